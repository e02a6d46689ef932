"""A team's repositories and a CI build, for real: a bare origin, clones of it, and a build
of C sources by absolute paths (as Xcode compiles them: DW_AT_comp_dir and DW_AT_name
under the clone) into a Mach-O executable and its dSYM, with the LLVM toolchain. Also an
ssh host that never answers, the ssh processes /proc shows, and a git that waits."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from dsymfind.apple import macho
from support.fixtures import load_generator

_make_macho = load_generator()
# The fixtures' flags, but for -ffile-compilation-dir=.: the build's own paths stay in.
CFLAGS = [flag for flag in _make_macho.CFLAGS if not flag.startswith("-ffile-compilation-dir")]
# No libSystem: these programs call nothing outside themselves.
LDFLAGS = ["--threads=1", "-platform_version", "macos", "11.0", "11.0"]

MAIN_C = "int helper(int value);\n\nint main(void) {\n    return helper(2);\n}\n"
# The line lldb is asked for: `return` is line 3 of helper.c as built.
HELPER_AS_BUILT = (
    "/* helper.c */\nint helper(int value) {\n    return value * 3; /* as built */\n}\n"
)
BUILT_LINE = "return value * 3; /* as built */"
# The developer's clone, one commit ahead: other code on that very line.
HELPER_AHEAD = "/* helper.c */\nint helper(int value) {\n    return value * 4; /* ahead */\n}\n"
SOURCES = {"Sources/main.c": MAIN_C, "Sources/helper.c": HELPER_AS_BUILT}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **_IDENTITY},
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


_IDENTITY = {
    "GIT_AUTHOR_NAME": "CI",
    "GIT_AUTHOR_EMAIL": "ci@example.com",
    "GIT_COMMITTER_NAME": "CI",
    "GIT_COMMITTER_EMAIL": "ci@example.com",
}


def origin(tmp_path: Path) -> Path:
    """A bare repository holding SOURCES as its first commit on `main`."""
    bare = tmp_path / "origin.git"
    tmp_path.mkdir(parents=True, exist_ok=True)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = clone(bare, tmp_path / "seed")
    commit_files(seed, SOURCES, "first")
    git(seed, "push", "-q", "origin", "main")
    return bare


def clone(bare: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", str(bare), str(dest))
    git(dest, "checkout", "-q", "-B", "main")
    return dest


def commit_files(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Build:
    executable: Path
    dsym: Path
    uuid: str


def build(repo: Path, name: str = "App") -> Build:
    """The clone's Sources/*.c compiled by absolute path from its top, linked and given a
    dSYM, all under `build/` (untracked, as Xcode's DerivedData is to git)."""
    tools = _make_macho.locate_tools(use_fat64_tools=False)
    out = repo / "build"
    out.mkdir(exist_ok=True)
    objects = []
    for source in sorted((repo / "Sources").glob("*.c")):
        obj = out / (source.stem + ".o")
        _run([tools.clang, "-target", "arm64-apple-macos11", *CFLAGS, "-c", str(source),
              "-o", str(obj)], repo)  # fmt: skip
        objects.append(str(obj))
    executable = out / name
    _run([tools.ld, "-arch", "arm64", *LDFLAGS, "-o", str(executable), *objects], repo)
    dsym = out / f"{name}.dSYM"
    _run([tools.dsymutil, str(executable), "-o", str(dsym)], repo)
    (uuid,) = [s.uuid for s in macho.read_slices(executable)]
    assert uuid is not None
    return Build(executable, dsym, uuid)


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "ZERO_AR_DATE": "1"},
        check=False,
    )
    assert done.returncode == 0 and "warning:" not in done.stderr, done.stderr


class SilentHost:
    """A TCP listener on 127.0.0.1 that accepts every connection and never says a word:
    an ssh server that is down behind a port that still answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> SilentHost:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._listener.close()
        for held in self._held:
            held.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._held.append(connection)

    def url(self, path: str = "/team/app.git") -> str:
        return f"ssh://git@127.0.0.1:{self.port}{path}"


def ssh_processes(port: int) -> dict[int, list[str]]:
    """The live (not zombie) ssh processes whose arguments name `port`, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            words = Path(f"/proc/{entry}/cmdline").read_bytes().decode().split("\0")
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            continue
        if state != "Z" and words and Path(words[0]).name == "ssh" and str(port) in words:
            found[int(entry)] = words
    return found


def waiting_git(folder: Path, *, when: str, release: Path, looks: int) -> Path:
    """A folder holding a `git` to put first on PATH: for any command line holding `when`
    (` worktree add `, ` fetch `) it waits until `release` exists, looking `looks` times
    0.1 s apart, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "git"
    wrapper.write_text(
        f'#!/bin/sh\ncase " $* " in *"{when}"*)\n'
        f"  i=0; while [ ! -e '{release}' ] && [ $i -lt {looks} ]; do sleep 0.1; i=$((i+1)); done"
        f' ;;\nesac\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return folder
