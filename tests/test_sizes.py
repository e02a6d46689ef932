"""One unit system in messages: every size a message shows is binary (KiB, MiB, GiB) and
spelled by progress.human_size, so a decimal MB can never sit beside a MiB again."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dsymfind.progress import human_size

PACKAGE = Path(__file__).resolve().parent.parent / "dsymfind"
# The one module that may name units in its strings: it defines them.
FORMATTER = PACKAGE / "progress.py"
# Decimal units are never ours; a binary one right after a value is a size formatted by hand
# (one in an example of what a setting accepts, "such as 2GiB", is not).
DECIMAL_UNIT = re.compile(r"(?<![A-Za-z])(?:[KMGTP]B|kB)(?![A-Za-z])")
UNIT_AFTER_VALUE = re.compile(r"\s?(?:[KMGTP]i?B|kB)(?![A-Za-z])")
# What a hand-made conversion divides or shifts by.
SCALES = {1000**n for n in range(1, 6)} | {1024**n for n in range(1, 6)}
SHIFTS = {10, 20, 30, 40}


def hand_made_sizes(source: str) -> list[tuple[int, str]]:
    """(line, why) for each f-string that names a unit or converts a size itself."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        after_value = False
        for part in node.values:
            if isinstance(part, ast.Constant) and _names_a_unit(str(part.value), after_value):
                found.append((node.lineno, f"names a unit: {part.value!r}"))
            elif isinstance(part, ast.FormattedValue) and _converts(part.value):
                found.append((node.lineno, f"converts a size: {ast.unparse(part.value)}"))
            after_value = isinstance(part, ast.FormattedValue)
    return found


def _names_a_unit(text: str, after_value: bool) -> bool:
    return bool(DECIMAL_UNIT.search(text) or (after_value and UNIT_AFTER_VALUE.match(text)))


def _converts(expression: ast.expr) -> bool:
    for node in ast.walk(expression):
        if not isinstance(node, ast.BinOp):
            continue
        scale = _constant(node.right)
        if isinstance(node.op, ast.Div | ast.FloorDiv) and scale in SCALES:
            return True
        if isinstance(node.op, ast.RShift) and scale in SHIFTS:
            return True
    return False


def _constant(node: ast.expr) -> float | None:
    try:
        value = eval(compile(ast.Expression(node), "<scale>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    return value if isinstance(value, int | float) else None


def test_the_scan_finds_what_it_looks_for() -> None:
    planted = (
        'a = f"{done / 1e6:.1f} MB so far"\n'
        'b = f"{free / 1024**3:.1f} free"\n'
        'c = f"over {limit >> 20}"\n'
        'd = f"over {limit} MiB"\n'
        'e = f"{human_size(n)} of {human_size(m)}, a size such as 2GiB"\n'
    )
    assert [line for line, _ in hand_made_sizes(planted)] == [1, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "module", sorted(p for p in PACKAGE.rglob("*.py") if p != FORMATTER), ids=str
)
def test_no_message_spells_a_size_its_own_way(module: Path) -> None:
    assert hand_made_sizes(module.read_text()) == []


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (5 * 1024**2 + 1024**2 // 10, "5.1 MiB"),
        (120 * 1024**3 + 1024**3 // 2, "120.5 GiB"),
        (3 * 1024**5, "3072.0 TiB"),
    ],
)
def test_sizes_are_binary_and_named_so(size: int, shown: str) -> None:
    assert human_size(size) == shown
