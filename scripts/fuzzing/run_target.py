"""One fuzz target under atheris (libFuzzer): `run_target.py NAME [libFuzzer flags] CORPUS...`.

dsymfind and the stdlib decoders it drives are imported under atheris' instrumentation,
so libFuzzer sees their branch coverage. Any exception other than the reader's own
error type, or a targets.Violation (slow, huge or malformed), is a crash: libFuzzer
saves the input under -artifact_prefix and exits non-zero.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["dsymfind", "zipfile", "gzip", "plistlib"]):
    from fuzzing import targets

WORKDIR = targets.make_workdir()


def _macho(data: bytes) -> None:
    targets.check_macho(data)


def _archive(data: bytes) -> None:
    targets.check_archive(data, WORKDIR)


def _plist(data: bytes) -> None:
    targets.check_plist(targets.document_from_bytes(data))


def _plistread(data: bytes) -> None:
    targets.check_plist_reader(data)
    targets.check_plist_reader(targets.plist_from_words(data))


def _reporttext(data: bytes) -> None:
    targets.check_report_text(data)


def _pe(data: bytes) -> None:
    targets.check_pe(data, WORKDIR / "image.exe")


def _pdbfile(data: bytes) -> None:
    targets.check_pdb(data, WORKDIR / "symbols.pdb")


def _sample(data: bytes) -> None:
    targets.check_hang_text("sample", data)


def _spindump(data: bytes) -> None:
    targets.check_hang_text("spindump", data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "macho": _macho,
    "archive": _archive,
    "plist": _plist,
    "plistread": _plistread,
    "pe": _pe,
    "pdbfile": _pdbfile,
    "reporttext": _reporttext,
    "sample": _sample,
    "spindump": _spindump,
}


def main() -> None:
    name = sys.argv[1]
    check = TARGETS[name]

    def one_input(data: bytes) -> None:
        if len(data) < targets.MAX_INPUT_BYTES:  # MAX_SECONDS holds for inputs under 1 MB
            check(data)

    try:
        atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
        atheris.Fuzz()
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[1]))
    main()
