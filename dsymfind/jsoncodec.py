"""JSON read and written as json.loads and json.dumps do, with json's C accelerator
(_json) but without importing json.

Importing json compiles its regular expressions: re, enum and functools come with it,
about 4 ms of a `dsymfind symbolicate` run, and helpers waiting for a download read
its record with this too. The scanner and the encoder json runs are the C ones of
_json; this module gives them json's default settings. An interpreter without _json
gets json itself.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    # json's C encoder: a value and the indentation level (unused) to the text's chunks.
    Encode = Callable[[object, int], tuple[str, ...]]

try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # pragma: no cover - CPython always has it
    make_scanner = make_encoder = None  # type: ignore[assignment,misc]

JSON_WHITESPACE = " \t\n\r"


class JSONSyntaxError(ValueError):
    """Text that is not JSON: why (`msg`), where (`pos`, `lineno`), as json says it."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        self.msg, self.pos = msg, pos
        self.lineno = doc.count("\n", 0, pos) + 1
        column = pos - doc.rfind("\n", 0, pos)
        super().__init__(f"{msg}: line {self.lineno} column {column} (char {pos})")


def loads(raw: bytes) -> object:
    """What json.loads makes of `raw` in UTF-8; ValueError when it is not one JSON value.

    A number longer than the interpreter's digit limit is a ValueError and a nesting
    deeper than its recursion limit a RecursionError, as with json.loads.
    """
    # As json.loads decodes UTF-8; UnicodeDecodeError is a ValueError.
    text = raw.decode("utf-8-sig", "surrogatepass")
    value, end = decode_at(text, _after_space(text, 0))
    end = _after_space(text, end)
    if end != len(text):
        raise JSONSyntaxError("Extra data", text, end)
    return value


def _after_space(text: str, at: int) -> int:
    return len(text) - len(text[at:].lstrip(JSON_WHITESPACE))


def decode_at(text: str, at: int) -> tuple[object, int]:
    """The JSON value that starts at `at` in `text`, and where it ends, as
    json.JSONDecoder().raw_decode gives them; JSONSyntaxError when there is none."""
    try:
        return _scan(text, at)
    except StopIteration as missing:
        raise JSONSyntaxError("Expecting value", text, missing.value) from None
    except ValueError as exc:
        decoder = sys.modules.get("json.decoder")  # only json's error needs json
        if decoder is not None and isinstance(exc, decoder.JSONDecodeError):
            raise JSONSyntaxError(exc.msg, text, exc.pos) from None
        raise


def _scan(text: str, at: int) -> tuple[object, int]:
    if make_scanner is None:  # pragma: no cover
        import json

        return json.JSONDecoder().raw_decode(text, at)
    try:
        return _SCANNER(text, at)
    except SystemError:
        # Python 3.11's scanner takes its error type from sys.modules["json.decoder"]
        # without importing it, and fails so when json was never imported: import it
        # and scan again for the real error (this text is not JSON, it is rare).
        import json.decoder

        return _SCANNER(text, at)


class _DecoderDefaults:
    """json.JSONDecoder()'s settings, as the C scanner reads them."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, float  # float("NaN") as json does


if make_scanner is not None:
    # It reads the settings as attributes; typeshed names a JSONDecoder-like type.
    _SCANNER = make_scanner(_DecoderDefaults)  # type: ignore[arg-type]


def dumps(
    value: object,
    *,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    ensure_ascii: bool = True,
) -> str:
    """json.dumps(value, ...) with check_circular=False: a cycle is a RecursionError.

    json itself writes indented text in Python; so does this, with the C encoder's
    pieces for the values in the containers.
    """
    if make_encoder is None:  # pragma: no cover
        import json

        return json.dumps(
            value,
            indent=indent,
            separators=separators,
            ensure_ascii=ensure_ascii,
            check_circular=False,
        )
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    if isinstance(value, str):
        return quote(value)  # as json.dumps does: most keys of a report are written so
    item_separator, key_separator = separators or (", " if indent is None else ",", ": ")
    encode = _encoder(quote, item_separator, key_separator)
    if indent is None:
        return "".join(encode(value, 0))
    chunks: list[str] = []
    _Indented(indent, item_separator, key_separator, quote, encode).write(value, chunks, "\n")
    return "".join(chunks)


def _encoder(quote: Callable[[str], str], item_separator: str, key_separator: str) -> Encode:
    """json's C encoder with json.dumps's settings: no markers (no cycle check), no key
    sorting or skipping, NaN and infinities written as JavaScript names."""
    encoder = make_encoder(
        None, _unserializable, quote, None, key_separator, item_separator, False, False, True
    )
    return encoder


def _unserializable(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


class _Indented:
    """json's indented layout: each member on its line, `indent` spaces a level."""

    def __init__(
        self,
        indent: int,
        item_separator: str,
        key_separator: str,
        quote: Callable[[str], str],
        encode: Encode,
    ) -> None:
        self.step, self.item_separator, self.key_separator = (
            " " * indent,
            item_separator,
            key_separator,
        )
        self.quote, self.encode = quote, encode

    def write(self, value: object, chunks: list[str], newline: str) -> None:
        """`value` as text, in `chunks`; `newline` starts each line at its level. One
        Python frame a level, as json's own writer: a value it nests, this one nests too."""
        entries: Iterable[tuple[str, object]]
        if isinstance(value, dict):
            brackets = "{}"
            entries = ((self._name(key), item) for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            brackets = "[]"
            entries = (("", item) for item in value)
        else:
            chunks.append(self._leaf(value))
            return
        if not value:
            chunks.append(brackets)
            return
        # An array's items or an object's members (each after its name), one a line.
        inner = newline + self.step
        separator, leaf, write = brackets[0] + inner, self._leaf, self.write
        for name, item in entries:
            chunks += (separator, name)
            if isinstance(item, (dict, list, tuple)):
                write(item, chunks, inner)
            else:
                chunks.append(leaf(item))
            separator = self.item_separator + inner
        chunks.append(newline + brackets[1])

    def _leaf(self, value: object) -> str:
        # Strings first, with the values json's C encoder writes the same without a call.
        if type(value) is str:
            return self.quote(value)
        if value is None or value is True or value is False:
            return _CONSTANTS[value]
        if type(value) is int:
            return int.__repr__(value)
        return "".join(self.encode(value, 0))  # floats, subclasses, the unwritable

    def _name(self, key: object) -> str:
        """A member's name and the separator after it."""
        return (self.quote(key) if type(key) is str else self._key(key)) + self.key_separator

    def _key(self, key: object) -> str:
        """A member's name; json writes a number, true, false or null key as a string."""
        if isinstance(key, str):
            return self.quote(key)
        if key is None or isinstance(key, (int, float)):
            return self.quote("".join(self.encode(key, 0)))
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


_CONSTANTS = {None: "null", True: "true", False: "false"}
