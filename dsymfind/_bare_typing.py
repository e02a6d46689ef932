"""typing's NamedTuple and Protocol for the modules on `dsymfind symbolicate`'s path,
without importing typing.

`class Found(NamedTuple)` under `from __future__ import annotations` makes typing check
each field's annotation, a string, by compiling it: the first compile() of a process
builds the AST's types (about 10 M instructions), and each class costs twice what a
collections.namedtuple does. With typing's own import, that was a quarter of what a
short report's run took. mypy reads these names as typing's; at run time a class
deriving from NamedTuple is made by collections.namedtuple from its annotations (kept
as written), its defaults and its methods, and Protocol, which only types name, is
`object`. tests/test_bare_typing.py holds NamedTuple to typing's.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
    from typing import Protocol as Protocol
else:
    from collections import namedtuple

    Protocol = object

    # What collections.namedtuple makes, which a class body may not replace.
    _MADE = frozenset(
        {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults"}
        | {"_make", "_replace", "_asdict"}
    )
    # What the class statement puts in every namespace: namedtuple sets its own.
    _GIVEN = frozenset({"__module__", "__annotations__"})

    class _Maker(type):
        """Makes each class deriving from NamedTuple a collections.namedtuple."""

        def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]):
            if not bases:  # NamedTuple itself
                return super().__new__(cls, name, bases, namespace)
            if bases != (NamedTuple,):
                raise TypeError("a NamedTuple derives from NamedTuple alone")
            fields = tuple(namespace.get("__annotations__", {}))
            defaulted = [field for field in fields if field in namespace]
            if fields[len(fields) - len(defaulted) :] != tuple(defaulted):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            made = namedtuple(
                name,
                fields,
                defaults=[namespace[field] for field in defaulted],
                module=namespace["__module__"],
            )
            made.__annotations__ = dict(namespace.get("__annotations__", {}))
            for key, value in namespace.items():
                if key in _MADE:
                    raise AttributeError(f"{name}: a NamedTuple may not define {key}")
                if key not in _GIVEN and key not in fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_Maker):
        """Derive from this for a collections.namedtuple (see the module's text)."""
