"""No module of the package imports, however indirectly, one that imports it back.

Every import counts, those inside functions too (a cycle hidden in a function still ties
the two modules together for whoever changes one); only imports under TYPE_CHECKING are
left out, since they never run.
"""

from __future__ import annotations

from pathlib import Path

from support.imports import import_graph, imported


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_function_level_imports_and_ignores_type_checking(
    tmp_path: Path,
) -> None:
    package = tmp_path / "dsymfind"
    package.mkdir()
    (package / "a.py").write_text(
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n    from dsymfind import c\n"
        "def f():\n    from dsymfind import b\n"
    )
    modules = {"dsymfind.a", "dsymfind.b", "dsymfind.c"}
    assert imported(package / "a.py", modules, package) == {"dsymfind.b"}
    graph = {"dsymfind.a": {"dsymfind.b"}, "dsymfind.b": {"dsymfind.a"}, "dsymfind.c": set()}
    assert cycles(graph) == [["dsymfind.a", "dsymfind.b"]]
