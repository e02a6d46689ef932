"""json.loads for helpers that wait for a download, without importing json.

Waiting helpers read the downloader's record every 50 ms (fetch/miss.py). Importing json
compiles its regular expressions, with re, enum and functools: a few milliseconds of CPU
for each waiter, taken from the downloader it waits for on a small machine
(tests/fetch/test_miss_waiting.py). json's parsing is done by the C scanner of `_json`
anyway; this module gives that scanner json.loads's default settings. Only a text that
is not JSON imports json, for its error (tests/fetch/test_records.py holds the two to
each other). Everything else uses json.
"""

from __future__ import annotations

from _json import make_scanner

_WHITESPACE = " \t\n\r"


class _DecoderDefaults:
    """json.JSONDecoder()'s settings, as the C scanner reads them."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, float  # float("NaN") as json does


# It reads the settings as attributes; typeshed names a JSONDecoder-like type.
_SCANNER = make_scanner(_DecoderDefaults)  # type: ignore[arg-type]


def loads(raw: bytes) -> object:
    """What json.loads makes of `raw`; json.JSONDecodeError (a ValueError) where it would
    fail, and the same ValueError or RecursionError for a number or a nesting past the
    interpreter's limits."""
    # As json.loads decodes UTF-8; UnicodeDecodeError is a ValueError.
    text = raw.decode("utf-8-sig", "surrogatepass")
    value, end = _scan(text, _after_space(text, 0))
    end = _after_space(text, end)
    if end != len(text):
        raise _error("Extra data", text, end)
    return value


def _after_space(text: str, at: int) -> int:
    return len(text) - len(text[at:].lstrip(_WHITESPACE))


def _scan(text: str, at: int) -> tuple[object, int]:
    try:
        return _SCANNER(text, at)
    except StopIteration as missing:
        raise _error("Expecting value", text, missing.value) from None
    except SystemError:
        # Python 3.11's scanner takes its error type from sys.modules["json.decoder"]
        # without importing it, and fails so when json was never imported: import it
        # and scan again for the real error (this text is not JSON, which is rare).
        import json.decoder  # noqa: F401

        return _SCANNER(text, at)


def _error(msg: str, text: str, pos: int) -> ValueError:
    from json import JSONDecodeError

    return JSONDecodeError(msg, text, pos)
