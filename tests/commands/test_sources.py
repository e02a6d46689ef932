"""`dsymfind sources UUID` on what a user's bundle may hold, as a real process."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fixtures import HELLO_UUID, toml_list, write_config
from support.plists import POISONS
from support.processes import fail_line, run_cli


@pytest.mark.parametrize("poison", ["date", "base64", "binary-cut", "self-holding"])
def test_an_unreadable_per_uuid_plist_is_one_line_naming_it(
    poison: str, products: Path, config_file: Path
) -> None:
    """The plist says where the sources are: one that cannot be read is the answer's
    reason, named, never a traceback or an internal error."""
    plist_path = products / "hello.dSYM" / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist_path.write_bytes(POISONS[poison])
    write_config(config_file, f"search_paths = {toml_list([products])}\n")

    line = fail_line(run_cli("sources", HELLO_UUID))

    assert line.startswith(f"dsymfind: error: {plist_path}: unreadable plist: "), line
    assert "internal error" not in line and "Error" not in line, line


def test_a_bundle_without_a_per_uuid_plist_has_no_mapping(
    products: Path, config_file: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    done = run_cli("sources", HELLO_UUID)
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout.startswith(f"no source mapping for {HELLO_UUID}: the store recorded no")
