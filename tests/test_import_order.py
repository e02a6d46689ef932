"""The package stands in layers, and no module imports one of a layer above its own.

Every import counts: inside functions and under TYPE_CHECKING too, since a type names what
a module knows of. A layer may hold several packages (the formats: apple/ and windows/);
those do not import each other. The root's modules belong to the layer of what they do:
the basics everything shares at the bottom, the configuration above the stores whose
settings it checks, the helper's local lookup above the cache, the helper above the miss
path, main at the top. docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import pytest
from support.imports import import_graph

# Bottom to top: (layer, its packages, its root modules).
LAYERS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (
        "basics",
        (),
        (
            "dsymfind",
            "_bare_os",
            "_plist",
            "errors",
            "uuids",
            "debugsymbols",
            "paths",
            "atomic",
            "permissions",
            "markers",
            "answers",
            "progress",
            "processes",
        ),
    ),
    ("formats", ("apple", "windows"), ()),
    ("stores", ("stores",), ()),
    ("configuration", (), ("settings", "config_reader", "log")),
    ("cache", ("cache",), ()),
    ("source control", ("vcs",), ()),
    ("local lookup", (), ("local_lookup", "search_paths")),
    ("miss path and downloads", ("fetch",), ()),
    ("symbolicate and publish", ("symbolicate", "publish"), ()),
    ("the helper", (), ("helper",)),
    ("macOS integration", ("macos",), ()),
    ("commands", ("commands",), ()),
    ("entry", (), ("main", "__main__")),
]


def unit_of(module: str) -> str:
    """A package's name for its modules, the module's own for the root's."""
    parts = module.split(".")
    return "dsymfind" if len(parts) == 1 else parts[1]


def rank_of(unit: str) -> int:
    for rank, (_, packages, roots) in enumerate(LAYERS):
        if unit in packages or unit in roots:
            return rank
    raise KeyError(unit)


def packages() -> set[str]:
    return {package for _, named, _ in LAYERS for package in named}


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a layer above the importer's, or of a sibling package in its layer."""
    found = []
    for module, targets in sorted(graph.items()):
        here = unit_of(module)
        for target in sorted(targets):
            there = unit_of(target)
            if here == there:
                continue
            above = rank_of(there) > rank_of(here)
            sibling = rank_of(there) == rank_of(here) and here in packages()
            if above or sibling:
                found.append(f"{module} -> {target}")
    return found


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({unit_of(m) for m in import_graph()} - set(_placed()))
    assert unplaced == [], f"give these a layer in LAYERS: {unplaced}"


def _placed() -> list[str]:
    return [unit for _, named, roots in LAYERS for unit in (*named, *roots)]


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = wrong_way(import_graph(type_only=True))
    assert found == [], "imports running up: " + "; ".join(found)


@pytest.mark.parametrize(
    ("importer", "imported", "wrong"),
    [
        ("dsymfind.stores.http", "dsymfind.cache.locks", True),  # up
        ("dsymfind.apple.macho", "dsymfind.windows.pe", True),  # a sibling
        ("dsymfind.cache.place", "dsymfind.apple.macho", False),  # down
        ("dsymfind.settings", "dsymfind.config_reader", False),  # within one layer's root
    ],
)
def test_the_rule_sees_up_and_sideways(importer: str, imported: str, wrong: bool) -> None:
    assert bool(wrong_way({importer: {imported}})) == wrong
