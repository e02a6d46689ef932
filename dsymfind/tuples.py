"""`Record`: `typing.NamedTuple` for the type checker, a named tuple made here when run.

`typing` costs `dsymfind symbolicate` more than two milliseconds to import (with the
`contextlib` and `warnings` it loads), and `collections.namedtuple` more than one (the
package imports `operator`, `reprlib`, `keyword` and `itertools`); the modules need
nothing of either but their records. A class written as for `NamedTuple` (fields with
annotations, defaults, methods, a docstring) becomes a tuple class that behaves as
`typing.NamedTuple` would make it: the same fields, defaults, constructor, `repr`,
`_replace`, `_asdict` and `_make` (tests/test_tuples.py holds the two to each other).
"""

from __future__ import annotations

__all__ = ["Record"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    # The C descriptor namedtuple reads its fields with: attribute reads as fast as its.
    from _collections import _tuplegetter

    class _RecordType(type):
        """Makes each class based on Record the named tuple of its annotated fields."""

        def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]):
            if not bases:
                return super().__new__(cls, name, bases, namespace)  # Record itself
            if "__annotations__" not in namespace:
                # Where annotations are evaluated lazily, they are not in the namespace.
                raise TypeError(f"{name}: a Record's fields are its annotations, none found")
            fields = tuple(namespace["__annotations__"])
            defaults = tuple(namespace[field] for field in fields if field in namespace)
            _check_defaults_last(fields, namespace)
            body = _tuple_members(name, fields, defaults)
            # Methods, properties, the docstring, the module; a default is the field's own.
            body.update((key, value) for key, value in namespace.items() if key not in fields)
            return type(name, (tuple,), body)

    def _check_defaults_last(fields: tuple[str, ...], namespace: dict[str, object]) -> None:
        """A field without a default after one with: refused, in typing's words."""
        given: list[str] = []
        for field in fields:
            if field in namespace:
                given.append(field)
            elif given:
                raise TypeError(
                    f"Non-default namedtuple field {field} cannot follow default field"
                    f"{'s' if len(given) > 1 else ''} {', '.join(given)}"
                )

    def _tuple_members(name: str, fields: tuple[str, ...], defaults: tuple[object, ...]):
        members = {
            "__slots__": (),
            "__doc__": f"{name}({', '.join(fields)})",
            "__new__": _constructor(name, fields, defaults),
            "__match_args__": fields,
            "__repr__": _repr,
            "__getnewargs__": _getnewargs,
            "_fields": fields,
            "_field_defaults": dict(
                zip(fields[len(fields) - len(defaults) :], defaults, strict=True)
            ),
            "_make": classmethod(_make),
            "_replace": _replace,
            "_asdict": _asdict,
        }
        for index, field in enumerate(fields):
            members[field] = _tuplegetter(index, f"Alias for field number {index}")
        return members

    def _constructor(name: str, fields: tuple[str, ...], defaults: tuple[object, ...]):
        """`__new__(cls, field, ...)`: compiled with the fields as its parameters, so that
        arguments bind (by position or name, with defaults and errors) as Python binds
        them, at the cost of a plain call. The names are the class's own annotations."""
        parameters = ", ".join(fields)
        values = f"({parameters},)" if fields else "()"
        source = f"def __new__(_cls, {parameters}):\n    return _tuple_new(_cls, {values})\n"
        scope = {"_tuple_new": tuple.__new__}
        exec(source, scope)  # noqa: S102 - the source is made of identifiers only
        constructor = scope["__new__"]
        constructor.__defaults__ = defaults or None
        constructor.__qualname__ = f"{name}.__new__"
        constructor.__doc__ = f"Create new instance of {name}({parameters})"
        return constructor

    def _repr(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def _getnewargs(self) -> tuple[object, ...]:
        return tuple(self)

    def _make(cls, values):
        made = tuple.__new__(cls, values)
        if len(made) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
        return made

    def _replace(self, **changes):
        values = [changes.pop(name, value) for name, value in zip(self._fields, self, strict=True)]
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return self._make(values)

    def _asdict(self) -> dict[str, object]:
        return dict(zip(self._fields, self, strict=True))

    class Record(metaclass=_RecordType):
        """The base of a class that is to be a named tuple."""
