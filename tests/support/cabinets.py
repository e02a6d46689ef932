"""Damaged `.pd_` cabinets, unpacked one after another: what each gave."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dsymfind.windows import cab


def unpack_damaged(
    original: bytes,
    damage: Callable[[bytearray, int], None],
    *,
    rounds: int,
    folder: Path,
    max_bytes: int,
) -> list[int | cab.CabError]:
    """For each round, a copy of `original` damaged in place by damage(copy, round), unpacked
    in `folder`: the size it unpacked to, or the CabError that refused it (which must leave
    no output behind). Any other exception is the test's failure."""
    packed, out = folder / "x.pd_", folder / "out.pdb"
    results: list[int | cab.CabError] = []
    for round_ in range(rounds):
        data = bytearray(original)
        damage(data, round_)
        packed.write_bytes(bytes(data))
        out.unlink(missing_ok=True)
        try:
            cab.extract_single(str(packed), str(out), max_bytes=max_bytes)
        except cab.CabError as exc:
            assert not out.exists()
            results.append(exc)
        else:
            results.append(out.stat().st_size)
    return results
