"""tuples.py: a Record class is the named tuple typing.NamedTuple makes of the same class."""

from __future__ import annotations

from typing import NamedTuple

from dsymfind.tuples import Record


class Typed(NamedTuple):
    """A found thing."""

    name: str
    size: int = 0
    tags: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.size == 0

    def grown(self, by: int) -> Typed:
        return self._replace(size=self.size + by)


class Ours(Record):
    """A found thing."""

    name: str
    size: int = 0
    tags: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.size == 0

    def grown(self, by: int) -> Ours:
        return self._replace(size=self.size + by)


def test_a_record_is_the_named_tuple_typing_makes() -> None:
    typed, ours = Typed("a", tags=("x",)), Ours("a", tags=("x",))

    assert ours == typed and tuple(ours) == ("a", 0, ("x",))
    assert isinstance(ours, tuple)
    assert Ours._fields == Typed._fields
    assert Ours._field_defaults == Typed._field_defaults
    assert repr(ours) == repr(typed).replace("Typed", "Ours")
    assert Ours.__doc__ == Typed.__doc__ == "A found thing."
    assert Ours.__module__ == Typed.__module__


def test_a_record_keeps_its_methods_and_properties() -> None:
    ours = Ours("a")

    assert ours.empty and not ours.grown(2).empty
    assert ours.grown(2) == Ours("a", 2)
    assert Ours(*Typed("b", 3)) == Ours("b", 3)
