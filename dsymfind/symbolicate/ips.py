"""The JSON `.ips` form (iOS 15, macOS 12 and later): read its threads, write it back.

`pc = usedImages[imageIndex].base + imageOffset`. Written back as Xcode and Console
show a symbolicated report: the metadata line as it was, then the body with every key
kept; each frame looked up gains `symbol`, `symbolLocation` (from the function's start
to the pc), `sourceFile` and `sourceLine`, and each inlined callee becomes a frame of its
own before its caller (same `imageOffset` and `imageIndex`, `"inline": true`). Frames the
report already names are left as they are, so a symbolicated report reads back unchanged.
"""

from __future__ import annotations

import json
import math
import os
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError, IpsParts
from dsymfind.symbolicate.model import Frame, Report, ReportImage, Thread, is_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from dsymfind.symbolicate.engine import Located
    from dsymfind.symbolicate.model import Seen

KIND = "ips"
LAST_EXCEPTION = "lastExceptionBacktrace"


def read(seen: Seen) -> Report:
    parts = seen.ips
    assert parts is not None and parts.body is not None  # formats.parse: a JSON body
    body = parts.body
    images = _images(body, parts.metadata)
    threads = body.get("threads")
    if not isinstance(threads, list):
        raise CrashReportError("not a crash report: no threads list")
    faulting = body.get("faultingThread")
    read_threads = _last_exception(body, len(images))
    count = len(images)
    for index, thread in enumerate(threads):
        if not isinstance(thread, dict) or not isinstance(thread.get("frames"), list):
            continue  # a thread without frames has nothing to symbolicate
        crashed = thread.get("triggered") is True or faulting == index
        read_threads.append(Thread(index, crashed, _frames(thread["frames"], 0, count)))
    arch = _text(body.get("cpuType"))
    return Report(KIND, images, read_threads, arch, parts)


def _last_exception(body: dict[str, Any], count: int) -> list[Thread]:
    """The backtrace of the uncaught exception that ended the process, a list of frames of
    its own (`lastExceptionBacktrace`): what a reader looks at first, so it counts as
    crashed. Every one of its frames is a return address, frame 0 included: the list is
    what the runtime's backtrace call recorded, never a thread's pc."""
    frames = body.get(LAST_EXCEPTION)
    if not isinstance(frames, list):
        return []
    return [Thread(None, True, _frames(frames, 1, count))]


# Each `usedImages` entry's image, by the entry's keys, values and their types (True and
# 1 are equal, and read apart): the reports of a batch list the same images again and
# again, and one found here needs none of the checks of one read for the first time.
_IMAGES: dict[tuple[Any, ...], ReportImage] = {}
_IMAGES_LIMIT = 10_000


def _images(body: dict[str, Any], metadata: dict[str, Any]) -> list[ReportImage]:
    known = _known_images(body.get("usedImages"))
    if known is not None:
        return known
    images = _read_images(body, metadata)
    if len(_IMAGES) >= _IMAGES_LIMIT:
        _IMAGES.clear()
    for entry, image in zip(body["usedImages"], images, strict=True):
        try:
            _IMAGES[_image_key(entry)] = image
        except TypeError:  # a list or object among its values: read each time
            continue
    return images


def _known_images(used: object) -> list[ReportImage] | None:
    """Every entry's image when each was read before; None otherwise."""
    if not isinstance(used, list):
        return None
    images = []
    for entry in used:
        if not isinstance(entry, dict):
            return None
        try:
            image = _IMAGES.get(_image_key(entry))
        except TypeError:
            return None
        if image is None:
            return None
        images.append(image)
    return images


def _image_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (tuple(entry.items()), tuple(map(type, entry.values())))


def _read_images(body: dict[str, Any], metadata: dict[str, Any]) -> list[ReportImage]:
    identified = crashreport.used_images(body, metadata)
    images = []
    for entry, image in zip(body["usedImages"], identified, strict=True):
        base = entry.get("base")
        images.append(
            ReportImage(
                uuid=None if image is None else image.uuid,
                name=_text(entry.get("name")) or (image.name if image else "???"),
                arch=_text(entry.get("arch")),
                base=base if is_address(base) else None,
                apple=image is not None and image.apple,
            )
        )
    return images


def _frames(entries: list[Any], first: int, count: int) -> list[Frame]:
    """The frames of a `frames` list in a report of `count` images, the first at `first`."""
    # One loop making the frames, is_address spelled out, without a call a frame: this
    # runs for every frame of every report.
    frames: list[Frame] = []
    append = frames.append
    for position, entry in enumerate(entries, first):
        if not isinstance(entry, dict):
            append(Frame(None, None, position, entry))
            continue
        index, offset = entry.get("imageIndex"), entry.get("imageOffset")
        named = "symbol" in entry
        if type(offset) is int and offset >= 0 and isinstance(index, int) and 0 <= index < count:
            append(Frame(index, offset, position, entry, named=named))
        else:
            append(Frame(None, None, position, entry, named=named))
    return frames


def write(report: Report) -> str:
    parts: IpsParts = report.document
    frames_texts = {thread.index: _thread_text(thread) for thread in report.threads}
    return parts.header + "\n" + _body_text(parts.body, frames_texts) + "\n"


# Written compact, each on one line, as Apple writes `threads`: they are most of a
# report, and indented JSON is written in Python, four times slower than json's C
# compact encoder (14 ms against 3.4 for the body of 2,000 frames in BENCHMARKS.md).
ONE_LINE_KEYS = frozenset({"threads", LAST_EXCEPTION})
COMPACT = (",", ":")


def _encoder(separators: tuple[str, str]) -> Callable[[object], str]:
    """json.dumps(value, separators=separators, check_circular=False) as a function, made
    once: json.dumps makes a new encoder each call, and JSONEncoder.encode a new C encoder
    (through iterencode's Python) each call, which for the small objects of a report (a
    frame, a `usedImages` entry) cost about as much as the writing."""
    encode = _ENCODERS.get(separators)
    if encode is None:
        encode = _ENCODERS[separators] = _made_encoder(separators)
    return encode


def _made_encoder(separators: tuple[str, str]) -> Callable[[object], str]:
    # Parsed JSON and the frames added to it hold no cycle to look for.
    encoder = json.JSONEncoder(separators=separators, check_circular=False)
    if c_make_encoder is None:  # an interpreter without json's C accelerator
        return encoder.encode
    # The C encoder JSONEncoder.iterencode makes for a one-shot encode, with its arguments
    # (CPython's json/encoder.py): it keeps no state between calls.
    item_separator, key_separator = separators
    made = c_make_encoder(
        None,  # no markers: check_circular is off
        encoder.default,
        encode_basestring_ascii,
        None,  # no indent
        key_separator,
        item_separator,
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    return lambda value: "".join(made(value, 0))


_ENCODERS: dict[tuple[str, str], Callable[[object], str]] = {}


def _body_text(body: dict[str, Any] | None, frames_texts: FramesTexts) -> str:
    """The body as indented JSON, one top-level key a line, the threads on theirs."""
    if not body:
        return "{}"
    members = [
        f"  {encode_basestring_ascii(key)}: {_value_text(key, value, frames_texts)}"
        for key, value in body.items()
    ]
    return "{\n" + ",\n".join(members) + "\n}"


# Each written thread's `frames` as compact JSON, by Thread.index (None: the last
# exception backtrace).
FramesTexts = dict[int | None, str]


def _value_text(key: str, value: object, frames_texts: FramesTexts) -> str:
    if key == LAST_EXCEPTION and None in frames_texts:
        return frames_texts[None]
    if key == "threads" and isinstance(value, list):
        return _threads_text(value, frames_texts)
    if key in ONE_LINE_KEYS:
        return _encoder(COMPACT)(value)
    return _indented_at(value, "  ")  # one level in


def _threads_text(threads: list[Any], frames_texts: FramesTexts) -> str:
    """The `threads` list as compact JSON, each written thread's frames as their text: a
    thread is written with a placeholder for its frames, which the text then replaces."""
    encode = _encoder(COMPACT)
    written = []
    for index, thread in enumerate(threads):
        frames_text = frames_texts.get(index)
        if frames_text is None or not isinstance(thread, dict):
            written.append(encode(thread))
            continue
        text = encode({**thread, "frames": _FRAMES_PLACEHOLDER})
        written.append(text.replace(_FRAMES_PLACEHOLDER_TEXT, frames_text, 1))
    return "[" + ",".join(written) + "]"


# Random, so that no string of a report can be taken for it.
_FRAMES_PLACEHOLDER = f"frames-{os.urandom(16).hex()}"
_FRAMES_PLACEHOLDER_TEXT = encode_basestring_ascii(_FRAMES_PLACEHOLDER)


def indented(value: object) -> str:
    """json.dumps(value, indent=2), at a fraction of its cost: json writes indented text in
    Python, and a report's JSON is mostly objects of plain values (a frame's row, a
    `usedImages` entry), which are written here by json's C encoder."""
    return _indented_at(value, "")


def _indented_at(value: object, indent: str) -> str:
    """`value` as json.dumps(indent=2) writes it `indent` deep: every line but the first
    shifted right by `indent` (JSON text has no raw newline inside a string)."""
    if not isinstance(value, dict | list) or not value:
        return _plain_text(value) or json.dumps(value)
    if isinstance(value, dict) and not _STR.issuperset(map(type, value)):
        return json.dumps(value, indent=2).replace("\n", "\n" + indent)  # json's key rules
    inner = indent + "  "
    items = value.values() if isinstance(value, dict) else value
    # The types checked by sets in C, not by a generator a value: a report has thousands.
    if _PLAIN_TYPES.issuperset(map(type, items)):
        # Each separator carries the newline and the indentation: the C encoder writes it.
        flat = _encoder((",\n" + inner, ": "))(value)
        return f"{flat[0]}\n{inner}{flat[1:-1]}\n{indent}{flat[-1]}"
    if isinstance(value, list) and all(map(_is_flat_object, value)):
        return _flat_objects(value, indent)
    # Loops, not comprehensions: one frame a level, so that it nests as deep as json does.
    members = []
    if isinstance(value, dict):
        for key, item in value.items():
            members.append(f"{encode_basestring_ascii(key)}: {_indented_at(item, inner)}")
        return "{\n" + inner + (",\n" + inner).join(members) + "\n" + indent + "}"
    for item in value:
        members.append(_indented_at(item, inner))
    return "[\n" + inner + (",\n" + inner).join(members) + "\n" + indent + "]"


def _is_flat_object(value: object) -> bool:
    """Whether `value` is a non-empty object of plain values under string keys."""
    return (
        type(value) is dict
        and bool(value)
        and _STR.issuperset(map(type, value))
        and _PLAIN_TYPES.issuperset(map(type, value.values()))
    )


def _flat_objects(objects: list[Any], indent: str) -> str:
    """A list of flat objects (a report's `usedImages`) as json.dumps(indent=2) writes it
    `indent` deep, in one call of the C encoder: its item separator carries the indentation
    of the objects' members, and each border between two objects is then put right. A
    `},` and a newline stand only there: no other value ends in `}`, and a string value
    holds no raw newline."""
    inner, members = indent + "  ", indent + "    "
    flat = _encoder((",\n" + members, ": "))(objects)
    between = flat[2:-2].replace("},\n" + members + "{", f"\n{inner}}},\n{inner}{{\n{members}")
    return f"[\n{inner}{{\n{members}{between}\n{inner}}}\n{indent}]"


# What json writes as a string, number, boolean or null (exactly these types: a subclass
# may be written otherwise).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})


def _plain_text(value: object) -> str | None:
    """A string's, number's, boolean's or null's JSON text as json writes it; None for
    anything else."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return None


def _thread_text(thread: Thread) -> str:
    """The thread's frames as compact JSON, each looked up with the keys it gains and its
    inlined callees before it. The report's own frames are left as they were read: adding
    the keys to each frame's object made json's two-key objects grow (a new table each),
    a quarter of the writing of a batch."""
    texts: list[str] = []
    append_text = texts.append
    encode = _encoder(COMPACT)
    written = _FRAME_TEXTS
    for frame in thread.frames:
        symbols, source = frame.symbols, frame.source
        if not symbols or not isinstance(source, dict):
            append_text(encode(source))
            continue
        if len(symbols) > 1:
            texts += map(encode, [_inline_entry(frame, located) for located in symbols[:-1]])
        located = symbols[-1]
        # A frame as Apple writes it, its offset and image and no more, is written as the
        # same frame was before (by its Located), without encoding it again: this runs for
        # every frame of every report.
        if len(source) == 2 and type(source.get("imageIndex")) is int:
            key = (id(located), frame.offset, frame.image, next(iter(source)))
            cached = written.get(key)
            if cached is None:
                cached = _remember_text(key, located, encode(_named(source, frame, located)))
            append_text(cached[1])
            continue
        append_text(encode(_named(source, frame, located)))
    return "[" + ",".join(texts) + "]"


def _named(source: dict[str, Any], frame: Frame, located: Located) -> dict[str, Any]:
    """The frame's object with the keys `located` gives it (a key it had keeps its place)."""
    return {**source, **symbol_keys(frame.offset, located)}


def _remember_text(key: tuple[Any, ...], located: Located, text: str) -> tuple[Located, str]:
    if len(_FRAME_TEXTS) >= _SYMBOL_KEYS_LIMIT:
        _FRAME_TEXTS.clear()
    # The Located kept beside its text: while it is held, no other object takes its id.
    remembered = _FRAME_TEXTS[key] = (located, text)
    return remembered


# A named frame's whole text, by its Located's id, offset, image index and first key (the
# order of its two).
_FRAME_TEXTS: dict[tuple[Any, ...], tuple[Located, str]] = {}


def _inline_entry(frame: Frame, located: Located) -> dict[str, Any]:
    entry = {"imageOffset": frame.offset, "imageIndex": frame.image}
    return {**entry, **symbol_keys(frame.offset, located), "inline": True}


def symbol_keys(offset: int | None, located: Located) -> dict[str, Any]:
    """The keys a frame at `offset` named `located` gains (MetricKit's frames gain the
    same), made once for each: the frames of a batch return to the same places again and
    again. Shared: copied into a frame, never changed."""
    key = (id(located), offset)
    cached = _SYMBOL_KEYS.get(key)
    if cached is not None:
        return cached[1]
    keys: dict[str, Any] = {"symbol": located.symbol}
    if located.start is not None and offset is not None:
        keys["symbolLocation"] = offset - located.start
    if located.file:
        keys["sourceFile"] = os.path.basename(located.file)
    if located.line:
        keys["sourceLine"] = located.line
    if len(_SYMBOL_KEYS) >= _SYMBOL_KEYS_LIMIT:
        _SYMBOL_KEYS.clear()
    # The Located kept beside its keys: while it is held, no other object takes its id.
    _SYMBOL_KEYS[key] = (located, keys)
    return keys


# Each frame's keys by its Located's id and its offset.
_SYMBOL_KEYS: dict[tuple[int, int | None], tuple[Located, dict[str, Any]]] = {}
_SYMBOL_KEYS_LIMIT = 100_000


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
