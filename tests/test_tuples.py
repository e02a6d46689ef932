"""tuples.py: a Record class is the named tuple typing.NamedTuple makes of the same class."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

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


class TypedBare(NamedTuple):
    first: int
    second: str = "two"


class OursBare(Record):
    first: int
    second: str = "two"


def test_a_record_is_made_read_and_changed_as_a_named_tuple_is() -> None:
    for made in (TypedBare, OursBare):
        assert made.__doc__ == f"{made.__name__}(first, second)"
        assert made.__match_args__ == ("first", "second")
        assert made(1)._asdict() == {"first": 1, "second": "two"}
        assert made(second="b", first=2) == (2, "b")
        assert made._make([3, "c"]).second == "c"
        assert made(1)._replace(second="x") == (1, "x")
        assert copy.copy(made(1)) == made(1)
        assert pickle.loads(pickle.dumps(made(1))) == (1, "two")
        assert made.first.__doc__ == TypedBare.first.__doc__


def test_a_record_refuses_what_a_named_tuple_refuses() -> None:
    wrong_calls: list[Callable[[type[Any]], object]] = [
        lambda made: made(),
        lambda made: made(1, "two", 3),
        lambda made: made(1, third=3),
        lambda made: made(1, first=1),
        lambda made: made._make([1]),
        lambda made: made(1)._replace(third=3),
    ]
    for call in wrong_calls:
        errors = []
        for made in (TypedBare, OursBare):
            with pytest.raises((TypeError, ValueError)) as raised:
                call(made)
            errors.append((type(raised.value), str(raised.value).replace(made.__name__, "_")))
        assert errors[0] == errors[1]


def test_a_field_without_a_default_after_one_with_is_refused_as_typing_refuses_it() -> None:
    with pytest.raises(TypeError) as typed:

        class Typed(NamedTuple):
            first: int = 1
            second: int = 2
            third: int

    with pytest.raises(TypeError) as ours:

        class Ours(Record):
            first: int = 1
            second: int = 2
            third: int

    assert str(ours.value) == str(typed.value)
