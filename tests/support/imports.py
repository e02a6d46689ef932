"""The package's import graph, read from its source: for the tests that hold its shape
(no cycle; packages in one direction)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dsymfind"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(
    path: Path, modules: set[str], package_dir: Path = PACKAGE, *, type_only: bool = False
) -> set[str]:
    """The package's modules that `path` imports (a `from a import b` of module a.b: a.b);
    with `type_only`, the imports under TYPE_CHECKING count too."""
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child) and not type_only:
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


def import_graph(*, type_only: bool = False) -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return {module_name(path): imported(path, modules, type_only=type_only) for path in paths}
