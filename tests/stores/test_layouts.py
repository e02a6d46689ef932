"""Every registered layout's keys, as docs/symbol-stores.md lists them for its running
example, and the registry agreeing with everything that names layouts."""

from __future__ import annotations

from typing import cast

import pytest

from dsymfind.config_reader import parse_servers_env
from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.publish import keys
from dsymfind.stores import layouts
from dsymfind.stores.base import Server

UUID = "4C4C449A-5555-3144-A19A-E6E643E6625E"
HEX = "4c4c449a55553144a19ae6e643e6625e"
TREE = "4C4C/449A/5555/3144/A19A/E6E643E6625E"

DWARF_KEYS = {
    "native": TREE,
    "symstore": f"_.dwarf/mach-uuid-sym-{HEX}/_.dwarf",
    "symstore_index2": f"_/_.dwarf/mach-uuid-sym-{HEX}/_.dwarf",
    "ssqp": f"_.dwarf/mach-uuid-sym-{HEX}/_.dwarf",
    "unified": f"4c/{HEX[2:]}/debuginfo",
    "debuginfod": f"buildid/{HEX}/debuginfo",
}
# The executable `Crash`: the symstore family keys it by its name.
EXECUTABLE_KEYS = {
    "native": f"{TREE}.app",
    "symstore": f"Crash/mach-uuid-{HEX}/Crash",
    "symstore_index2": f"Cr/Crash/mach-uuid-{HEX}/Crash",
    "ssqp": f"crash/mach-uuid-{HEX}/crash",
    "unified": f"4c/{HEX[2:]}/executable",
    "debuginfod": f"buildid/{HEX}/executable",
}
# Layouts whose executable key needs no name: the only ones a server is asked for one.
KEYED_WITHOUT_A_NAME = ("native", "unified", "debuginfod")
PDB_KEYS = {
    "native": "crash.pdb/9B3C1A4E2F704D158A6BC1D2E3F405162/crash.pdb",
    "symstore": "crash.pdb/9B3C1A4E2F704D158A6BC1D2E3F405162/crash.pdb",
    "symstore_index2": "cr/crash.pdb/9B3C1A4E2F704D158A6BC1D2E3F405162/crash.pdb",
    "ssqp": "crash.pdb/9b3c1a4e2f704d158a6bc1d2e3f405162/crash.pdb",
    "unified": "crash.pdb/9B3C1A4E2F704D158A6BC1D2E3F405162/crash.pdb",
}
TEMPLATE = "dsyms/{UUID}/{uuidhex}.zip"


def a_server(layout: str, casing: str, template: str = "") -> Server:
    return cast("Server", {"layout": layout, "casing": casing, "template": template})


@pytest.mark.parametrize("layout", sorted(DWARF_KEYS))
def test_each_layout_keys_a_dwarf_file_as_documented(layout: str) -> None:
    assert layouts.debug_file_key(layout, UUID) == DWARF_KEYS[layout]
    server = a_server(layout, "default")
    assert layouts.server_key(server, UUID, layouts.DSYM) == DWARF_KEYS[layout]


@pytest.mark.parametrize("layout", sorted(EXECUTABLE_KEYS))
def test_each_layout_keys_an_executable_as_documented(layout: str) -> None:
    assert layouts.executable_key(layout, UUID, "Crash") == EXECUTABLE_KEYS[layout]
    unnamed = EXECUTABLE_KEYS[layout] if layout in KEYED_WITHOUT_A_NAME else None
    for name in (None, "", "a/b"):
        assert layouts.executable_key(layout, UUID, name) == unnamed
    server = a_server(layout, "default")
    assert layouts.server_key(server, UUID, layouts.EXECUTABLE) == unnamed


@pytest.mark.parametrize("layout", sorted(DWARF_KEYS))
def test_each_layout_keeps_a_files_metadata_beside_it_or_in_its_folder(layout: str) -> None:
    key = DWARF_KEYS[layout]
    if layout == "unified":
        assert layouts.metadata_key(layout, key, "default") == f"4c/{HEX[2:]}/meta"
        assert layouts.metadata_key(layout, key.upper(), "upper") == f"4C/{HEX[2:].upper()}/META"
    else:
        assert layouts.metadata_key(layout, key, "default") == f"{key}.meta"
        assert layouts.metadata_key(layout, key.upper(), "upper") == f"{key.upper()}.META"


@pytest.mark.parametrize("layout", sorted(PDB_KEYS))
def test_each_publishable_layout_files_a_pdb_as_documented(layout: str) -> None:
    key = keys.windows_key(layout, "crash.pdb", "9B3C1A4E2F704D158A6BC1D2E3F405162")
    assert key == PDB_KEYS[layout]


def test_a_two_tier_store_files_a_short_name_under_its_first_character() -> None:
    assert keys.windows_key("symstore_index2", "a.pdb", "AB1") == "a/a.pdb/AB1/a.pdb"


def test_casing_applies_to_the_whole_finished_key() -> None:
    server = a_server("native", "upper")
    assert layouts.server_key(server, UUID, layouts.EXECUTABLE) == f"{TREE}.APP"
    server = a_server("symstore", "upper")
    expected = f"_.DWARF/MACH-UUID-SYM-{HEX.upper()}/_.DWARF"
    assert layouts.server_key(server, UUID, layouts.DSYM) == expected
    server = a_server("native", "lower")
    assert layouts.server_key(server, UUID, layouts.DSYM) == TREE.lower()


def test_a_template_server_keys_by_its_template_and_asks_for_no_executable() -> None:
    server = a_server("template", "upper", TEMPLATE)
    expected = f"dsyms/{UUID}/{HEX}.zip"  # casing is not applied to template keys
    assert layouts.server_key(server, UUID, layouts.DSYM) == expected
    assert layouts.server_key(server, UUID, layouts.EXECUTABLE) is None
    assert layouts.metadata_key("template", expected, "default") is None
    with pytest.raises(ValueError, match="template"):
        layouts.debug_file_key("template", UUID)


def test_every_layout_has_a_record_and_the_registry_names_it_once() -> None:
    assert tuple(layouts.BY_NAME) == layouts.LAYOUTS
    assert set(layouts.LAYOUTS) == {*DWARF_KEYS, "template"}
    assert all(record.name == name for name, record in layouts.BY_NAME.items())
    assert tuple(DWARF_KEYS) == layouts.IDENTITY_KEYED


def test_publish_writes_exactly_the_publishable_layouts() -> None:
    assert tuple(n for n, r in layouts.BY_NAME.items() if r.publishable) == layouts.PUBLISHABLE
    assert set(layouts.PUBLISHABLE) == set(PDB_KEYS)
    assert keys.PUBLISHABLE is layouts.PUBLISHABLE
    assert keys.checked_layouts(list(layouts.PUBLISHABLE)) == list(layouts.PUBLISHABLE)
    for refused in set(layouts.LAYOUTS) - set(layouts.PUBLISHABLE):
        with pytest.raises(DsymfindError, match=f"--layout {refused}: cannot publish in it"):
            keys.checked_layouts([refused])


def test_one_layout_is_the_default_publish_falls_back_on() -> None:
    assert [n for n, r in layouts.BY_NAME.items() if r.default] == [layouts.DEFAULT]
    assert layouts.DEFAULT == "unified"


def test_the_configuration_accepts_exactly_the_registered_layouts() -> None:
    for name in layouts.LAYOUTS:
        url = f"https://symbols.example/{TEMPLATE if name == 'template' else ''}"
        (server,) = parse_servers_env(f"{name}={url}")
        assert server["layout"] == name
    with pytest.raises(ConfigError) as refused:
        parse_servers_env("flat=https://symbols.example/")
    assert f"expected one of {', '.join(layouts.LAYOUTS)}, got 'flat'" in str(refused.value)
