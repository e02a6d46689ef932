"""`Record`: `typing.NamedTuple` for the type checker, `collections.namedtuple` when run.

`typing` costs `dsymfind symbolicate` more than two milliseconds to import (with the
`contextlib` and `warnings` it loads), and its modules need nothing of it but their
records. A class written as for `NamedTuple` (fields with annotations, defaults, methods,
a docstring) becomes the same named tuple as `typing.NamedTuple` would make of it.
"""

from __future__ import annotations

from collections import namedtuple

__all__ = ["Record"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:

    class _RecordType(type):
        """Makes each class based on Record the named tuple of its annotated fields."""

        def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]):
            if not bases:
                return super().__new__(cls, name, bases, namespace)  # Record itself
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = [namespace[field] for field in fields if field in namespace]
            made = namedtuple(name, fields, defaults=defaults, module=namespace["__module__"])
            for key, value in namespace.items():
                if key not in fields and key not in _NOT_COPIED:
                    setattr(made, key, value)
            return made

    # What namedtuple sets itself, or what the class statement adds for every class.
    _NOT_COPIED = frozenset({"__annotations__", "__module__", "__qualname__"})

    class Record(metaclass=_RecordType):
        """The base of a class that is to be a named tuple."""
