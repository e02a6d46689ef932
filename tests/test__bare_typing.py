"""_bare_typing's NamedTuple against typing's: the same class statement makes a class that
builds, reads, compares, prints, replaces and pickles as typing's does, and refuses what
typing's refuses."""

from __future__ import annotations

import pickle
import subprocess
import sys
import typing
from typing import Any

import pytest

from dsymfind import _bare_typing


def record(base: type) -> type:
    """The same class statement over `base`: typing's NamedTuple or _bare_typing's."""

    class Record(base):  # type: ignore[valid-type,misc]
        """A record."""

        path: str
        size: int | None
        kinds: list[str] = []  # noqa: RUF012 - shared on purpose, as typing shares it
        note: str = "none"

        def described(self) -> str:
            return f"{self.path}: {self.note}"

        @property
        def large(self) -> bool:
            return (self.size or 0) > 10

        @classmethod
        def empty(cls) -> Any:
            return cls("", None)

    return Record


Typed, Bare = record(typing.NamedTuple), record(_bare_typing.NamedTuple)  # type: ignore[arg-type]


class Plain(_bare_typing.NamedTuple):
    name: str


class TypedPlain(typing.NamedTuple):
    name: str


def test_the_class_is_a_tuple_with_typings_fields_defaults_and_texts() -> None:
    assert issubclass(Bare, tuple)
    assert Bare._fields == Typed._fields
    assert Bare._field_defaults == Typed._field_defaults
    assert Bare.__doc__ == Typed.__doc__
    assert Plain.__doc__ == TypedPlain.__doc__.replace("TypedPlain", "Plain")
    assert Bare.__module__ == Typed.__module__ == __name__
    assert Bare.__qualname__ == Typed.__qualname__
    assert Plain.__qualname__ == "Plain"
    assert list(Bare.__annotations__) == list(Typed.__annotations__)
    assert Bare.__match_args__ == Typed.__match_args__


def test_instances_behave_as_typings() -> None:
    typed, bare = Typed("a", 12, note="n"), Bare("a", 12, note="n")
    assert tuple(bare) == tuple(typed) == ("a", 12, [], "n")
    assert repr(bare) == repr(typed)
    assert bare == typed
    assert hash(Bare("a", 1, ())) == hash(Typed("a", 1, ()))  # type: ignore[arg-type]
    assert bare.described() == typed.described() == "a: n"
    assert bare.large and typed.large
    assert Bare.empty() == Typed.empty() == ("", None, [], "none")
    assert bare._replace(size=1) == typed._replace(size=1)
    assert bare._asdict() == typed._asdict()
    assert Bare._make(["b", 1, [], ""]) == Typed._make(["b", 1, [], ""])
    assert bare.kinds is Bare("c", 0).kinds  # one default object, as typing's
    with pytest.raises(AttributeError):
        bare.path = "b"  # type: ignore[misc]


def test_instances_pickle_by_reference() -> None:
    plain = Plain("a")
    assert pickle.loads(pickle.dumps(plain)) == plain
    assert type(pickle.loads(pickle.dumps(plain))) is Plain


def test_wrong_calls_fail_as_typings_do() -> None:
    for record in (Typed, Bare):
        with pytest.raises(TypeError):
            record("a")  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            record("a", 1, [], "n", "extra")  # type: ignore[call-arg]


def test_what_typing_refuses_is_refused() -> None:
    with pytest.raises(TypeError):

        class Misordered(_bare_typing.NamedTuple):  # type: ignore[misc]
            first: int = 0
            second: int  # type: ignore[misc]

    with pytest.raises(AttributeError):

        class Remade(_bare_typing.NamedTuple):
            first: int

            def _replace(self, **changes: object) -> Remade:  # type: ignore[override]
                return self


def test_protocol_is_a_plain_base_at_run_time() -> None:
    class Check(_bare_typing.Protocol):
        def check(self) -> None: ...

    assert Check.__mro__[1:] == (object,)


def test_importing_it_imports_no_typing() -> None:
    code = "import sys; import dsymfind._bare_typing; print('typing' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
