"""No module of the package imports, however indirectly, one that imports it back.

Every import counts, those inside functions too (a cycle hidden in a function still ties
the two modules together for whoever changes one); only imports under TYPE_CHECKING are
left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dsymfind"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path, modules: set[str], package_dir: Path = PACKAGE) -> set[str]:
    """The package's modules that `path` imports (a `from a import b` of module a.b: a.b)."""
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if candidate in modules else base)
            visit(child)

    visit(ast.parse(path.read_text()))
    # A package's own __init__ is imported by its submodules' imports: not an edge back.
    return {m for m in found if m in modules and m != name and not name.startswith(m + ".")}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return {module_name(path): imported(path, modules) for path in paths}


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
