"""The binary images of Apple crash reports: which UUIDs a crash needs symbols for.

Two formats, told apart by content, never by file name:

- `.ips` (iOS 15, macOS 12 and later): one line of JSON metadata, then a JSON object
  whose `usedImages` lists every image with its `uuid`, `name`, `arch` and `path`.
  Older `.ips` files (bug type 109) have the same metadata line followed by a
  classic text report.
- classic text reports (`.crash`): a "Binary Images:" section with one line per image,
  `0x104a5c000 - 0x104a5ffff +MyApp arm64  <4c4c449a55553144a19ae6e643e6625e> /path`,
  where the version may be `(1.0 - 1)`, `(*)` or `???`, and the UUID may be dashed.

Apple's own images are marked (`Image.apple`) by one rule, `is_apple_image`, which every
report reader uses: by their path, in `.ips` also by a `source` saying the image is in the
dyld shared cache, and by name where a report gives no path (MetricKit, a text frame whose
image "Binary Images" does not list).

See Apple's "Interpreting the JSON format of a crash report" and "Examining the fields
in a crash report".
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any, NamedTuple

from dsymfind import atomic
from dsymfind.errors import DsymfindError
from dsymfind.uuids import normalize_uuid

# Images the system could not identify carry this UUID (absolute-address images, `???`).
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
BINARY_IMAGES_HEADER = "Binary Images:"
# A report is read whole; real ones are at most a few MiB (thousands of images and threads),
# so anything larger is not one, and reading it would only cost memory.
MAX_REPORT_BYTES = 32 << 20

# A Binary Images line is two addresses, a name (<= 255 bytes), arch, version, a UUID and a
# path (<= 1024 bytes, macOS PATH_MAX): real ones stay well under this; longer lines are
# not image lines and are not parsed at all.
MAX_IMAGE_LINE_CHARS = 4096

# Compiled on first use, through re's own cache: an .ips report never needs them (nor re,
# imported with the text form's first image line), and compiling both cost every command
# that imports this module a millisecond and a half.
# Each line is parsed in one forward pass and one backward pass, never with a pattern that
# can backtrack over a run of spaces (a crafted report must not take quadratic time).
# `start - end` and the whitespace that follows; the hex and space classes are disjoint.
ADDRESSES_PATTERN = r"\s*0x[0-9a-fA-F]+\s*-\s*0x[0-9a-fA-F]+\s"
# The first `<UUID>` after the addresses: each `<` is looked at for at most 37 characters.
UUID_FIELD_PATTERN = r"<(?P<uuid>[0-9a-fA-F-]{32,36})>"
ARCHITECTURES = frozenset(
    {"arm64e", "arm64_32", "arm64", "armv7", "armv7k", "armv7f", "armv7s", "armv6"}
    | {"x86_64h", "x86_64", "i386", "ppc64", "ppc"}
)
UNKNOWN_VERSION = "???"

# Where Apple's own images live: their symbols come from Apple (Xcode's device support),
# seldom from the user's symbol servers. The OS's own programs (`/bin/sleep`, daemons in
# /usr/libexec) are Apple's too, and so is what an OS cryptex holds (iOS 16 and later
# mount it there; on macOS it lies under /System/). Each ends with "/", so /usr/local/lib
# and /usr/local/bin are not one.
APPLE_PATH_PREFIXES = (
    "/System/",
    "/usr/lib/",
    "/usr/libexec/",
    "/bin/",
    "/sbin/",
    "/usr/bin/",
    "/usr/sbin/",
    "/Library/Apple/",
    "/private/preboot/Cryptexes/OS/",
)
# `.ips` usedImages `source` values of images in the dyld shared cache ("S": the cache,
# "C": a library in it), Apple's whatever their path says. The metadata line's
# `is_first_party` is no such mark: public reports of nvim, qlcplus and LLDB's own test
# programs carry `"is_first_party":1`.
SHARED_CACHE_SOURCES = frozenset({"S", "C"})
# Apple's images as reports name them where they give no path (MetricKit's `binaryName`,
# a text frame whose image "Binary Images" does not list): the ones app backtraces cross.
# A name not listed is taken as the app's, so at worst its dSYM is asked for in vain.
APPLE_IMAGE_NAMES = frozenset(
    {
        "dyld",
        "libc++.1.dylib",
        "libc++abi.dylib",
        "libdispatch.dylib",
        "libdyld.dylib",
        "libobjc.A.dylib",
        "libxpc.dylib",
        "AppKit",
        "CFNetwork",
        "CoreData",
        "CoreFoundation",
        "CoreGraphics",
        "Foundation",
        "GraphicsServices",
        "JavaScriptCore",
        "QuartzCore",
        "Security",
        "SwiftUI",
        "UIKit",
        "UIKitCore",
        "WebKit",
    }
)
APPLE_NAME_PREFIXES = ("libsystem_", "libswift")

# How a path that is not a regular file is named in its error. A FIFO would block the
# read, a device may never end, and none of them is a crash report.
_NOT_REGULAR = (
    (stat.S_ISDIR, "Is a directory"),
    (stat.S_ISFIFO, "Is a FIFO"),
    (stat.S_ISSOCK, "Is a socket"),
    (stat.S_ISCHR, "Is a character device"),
    (stat.S_ISBLK, "Is a block device"),
)


class Image(NamedTuple):
    uuid: str  # normalized: uppercase, dashed
    name: str
    arch: str  # "" when the report does not say
    path: str
    apple: bool = False  # one of Apple's system images (see is_apple_image)


class CrashReportError(DsymfindError):
    """A file that cannot be read as a crash report; the message names the file."""


def read(path: str) -> list[Image]:
    """The images with a UUID in the report at `path`, each UUID once, in report order."""
    text = read_text(path)
    try:
        return parse(text)
    except CrashReportError as exc:
        raise CrashReportError(f"{path}: {exc}") from exc


def read_text(path: str) -> str:
    """The text of the report at `path`: a regular file of at most MAX_REPORT_BYTES."""
    text = read_text_if_small(path)
    if text is None:
        raise too_large(path)
    return text


def read_text_if_small(path: str) -> str | None:
    """read_text, but None for a file larger than any crash report (a sample or spindump
    may be): the caller reads it otherwise, or says too_large."""
    try:
        data = _read_regular(path, MAX_REPORT_BYTES)
    except OSError as exc:
        raise CrashReportError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    return None if data is None else data.decode("utf-8", errors="replace")


def too_large(path: str) -> CrashReportError:
    from dsymfind.progress import human_size

    limit = human_size(MAX_REPORT_BYTES)
    return CrashReportError(f"{path}: larger than any crash report (over {limit}), not read")


def _read_regular(path: str, limit: int) -> bytes | None:
    """A regular file's bytes; None when it holds more than `limit`. Never blocks.

    The stat refuses a FIFO or device before it is opened; the fstat, of what was opened,
    refuses whatever replaced the file in between (O_NONBLOCK keeps a FIFO's open from
    waiting). Read by os.read, no file object: a batch reads thousands, and a buffered
    reader's read(limit + 1) asked the system for a buffer of the limit's size (32 MiB)
    for every report, besides its own calls (isatty, seek).
    """
    _refuse_unless_regular(os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        _refuse_unless_regular(info.st_mode)
        if info.st_size > limit:
            return None
        return _read_within(fd, info.st_size, limit)
    finally:
        os.close(fd)


def _read_within(fd: int, size: int, limit: int) -> bytes | None:
    """A regular file's bytes, `size` as its fstat said (it may have grown since, and is
    read to its end); None when it holds more than `limit`."""
    data = atomic.read_to_end(fd, size, limit + 1)
    return None if len(data) > limit else data


def _refuse_unless_regular(mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _NOT_REGULAR if test(mode)), "Is not a regular file")
    raise OSError(errno.EINVAL, kind)


def is_apple_image(path: str, name: str = "", source: str = "") -> bool:
    """Whether an image is one of Apple's: one in the dyld shared cache (an `.ips`
    `source`), else by its `path` when the report gives one, else by its `name`."""
    if source in SHARED_CACHE_SOURCES:
        return True
    if path:
        return path.startswith(APPLE_PATH_PREFIXES)
    return name in APPLE_IMAGE_NAMES or name.startswith(APPLE_NAME_PREFIXES)


def parse(text: str) -> list[Image]:
    stripped = strip_leading(text)
    images = _parse_ips(stripped) if stripped.startswith("{") else _parse_text(stripped)
    first: dict[str, Image] = {}
    for image in images:
        first.setdefault(image.uuid, image)
    return list(first.values())


def strip_leading(text: str) -> str:
    """The report without a byte-order mark or blank space before it."""
    return text.lstrip("\ufeff \t\r\n")


class IpsParts(NamedTuple):
    """An `.ips` report split: the metadata line, then a JSON body or a text report."""

    metadata: dict[str, Any]
    body: dict[str, Any] | None  # None when a classic text report follows the metadata
    text: str  # that text report ("" with a JSON body)
    header: str  # the metadata line as written, up to its end (no newline)


def split_ips(text: str) -> IpsParts:
    """`text` (stripped, starting with "{") as metadata and body.

    A report saved as one JSON object, without the metadata line, is its own metadata.
    """
    metadata, end = _decode(text, 0, "the IPS metadata line")
    rest = text[end:].lstrip()
    if not rest:
        return IpsParts(metadata, metadata, "", text[:end])
    if not rest.startswith("{"):
        return IpsParts(metadata, None, rest, text[:end])  # bug type 109
    body, _ = _decode(text, len(text) - len(rest), "the report body")
    return IpsParts(metadata, body, "", text[:end])


def _parse_ips(text: str) -> list[Image]:
    parts = split_ips(text)
    if parts.body is None:
        return _parse_text(parts.text)
    return [image for image in used_images(parts.body, parts.metadata) if image is not None]


_DECODER = json.JSONDecoder()


def _decode(text: str, at: int, what: str) -> tuple[Any, int]:
    try:
        value, end = _DECODER.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        # An unterminated string is reported where it starts, not where the text ends.
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        problem = "truncated" if cut else "malformed"
        raise CrashReportError(f"{what} is {problem} JSON ({exc.msg}, line {exc.lineno})") from exc
    except RecursionError:
        # The parser recurses once per level; a real report nests about ten deep.
        raise CrashReportError(f"{what} is nested too deeply for a crash report") from None
    except ValueError:
        # Valid JSON otherwise: only an integer over the interpreter's digit limit (4300)
        # makes the decoder's int() fail.
        raise CrashReportError(f"{what} holds a number too long for a crash report") from None
    if not isinstance(value, dict):
        raise CrashReportError(f"{what} is not a JSON object")
    return value, end


def used_images(body: dict[str, Any], metadata: dict[str, Any]) -> list[Image | None]:
    """Every `usedImages` entry, in order (frames name them by index); None for one
    without a usable UUID."""
    if "usedImages" not in body:
        raise no_used_images(metadata)
    used = body["usedImages"]
    if not isinstance(used, list):
        raise CrashReportError("usedImages is not a list")
    images = []
    for index, entry in enumerate(used):
        if not isinstance(entry, dict):
            raise CrashReportError(f"usedImages[{index}] is not an object")
        images.append(_ips_image(index, entry))
    return images


def no_used_images(metadata: dict[str, Any]) -> CrashReportError:
    """What a JSON report without `usedImages` is told, with its bug type when it has one."""
    kind = metadata.get("bug_type")
    suffix = f" (IPS bug_type {kind})" if kind is not None else ""
    return CrashReportError(f"not a crash report: no usedImages{suffix}")


def _ips_image(index: int, entry: dict[str, Any]) -> Image | None:
    raw = entry.get("uuid")
    if raw is None:
        return None
    uuid = normalize_uuid(raw) if isinstance(raw, str) else None
    if uuid is None:
        raise CrashReportError(f"usedImages[{index}] has a malformed uuid {raw!r}")
    if uuid == ZERO_UUID:
        return None
    path = _text(entry.get("path"))
    name = _text(entry.get("name")) or path.rsplit("/", 1)[-1] or "???"
    apple = is_apple_image(path, name, _text(entry.get("source")))
    return Image(uuid, name, _text(entry.get("arch")), path, apple)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _parse_text(text: str) -> list[Image]:
    return [image for _, _, image in text_images(text.splitlines())]


def text_images(lines: list[str]) -> list[tuple[int, int, Image]]:
    """The "Binary Images" section's images with a usable UUID, each with its address
    range (start, end) as the line gives it."""
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == BINARY_IMAGES_HEADER)
    except StopIteration:
        raise CrashReportError(
            f'not a crash report: neither JSON nor a text report with "{BINARY_IMAGES_HEADER}"'
        ) from None
    images: list[tuple[int, int, Image]] = []
    for line in lines[start + 1 :]:
        if not line.lstrip().startswith("0x"):
            if images or line.strip():
                break  # the section ends at a blank line or the next section
            continue
        image = _text_image(line)
        if image is not None:
            images.append(image)
    return images


def _text_image(line: str) -> tuple[int, int, Image] | None:
    """One image line and its address range; None for a line without a usable UUID
    (unknown images)."""
    if len(line) > MAX_IMAGE_LINE_CHARS:
        return None
    import re

    addresses = re.match(ADDRESSES_PATTERN, line)
    if addresses is None:
        return None
    field = re.compile(UUID_FIELD_PATTERN).search(line, addresses.end())
    if field is None:
        return None
    uuid = normalize_uuid(field["uuid"])
    if uuid is None or uuid == ZERO_UUID:
        return None
    path = line[field.end() :].strip()
    name, arch = _name_and_arch(line[addresses.end() : field.start()].strip())
    name = name or path.rsplit("/", 1)[-1] or UNKNOWN_VERSION
    start, _, end = addresses.group().partition("-")
    image = Image(uuid, name, arch, path, is_apple_image(path, name))
    return int(start.strip(), 16), int(end.strip(), 16), image


def _name_and_arch(middle: str) -> tuple[str, str]:
    """`+My App arm64 (1.0 - 1)` -> ("My App", "arm64"): what precedes the UUID, split.

    The `+` (an image outside the OS) goes; then, from the end, the version fields
    (`(...)` or `???`, each after whitespace), then the architecture when the last word
    names one. Whatever remains, spaces included, is the name.
    """
    if middle.startswith("+") and len(middle) > 1:
        middle = middle[1:]
    end = _versions_start(middle)
    word = _word_start(middle, end)
    if word > 0 and middle[word:end] in ARCHITECTURES:
        return middle[: _space_start(middle, word)], middle[word:end]
    return middle[:end], ""


def _versions_start(text: str) -> int:
    """Where the trailing version fields begin (len(text) when there are none)."""
    end = len(text)
    while True:
        if text.endswith(UNKNOWN_VERSION, 0, end):
            start = end - len(UNKNOWN_VERSION)
        elif text.endswith(")", 0, end):
            start = text.rfind("(", 0, end)
            if start < 0 or text.find(")", start, end - 1) >= 0:
                return end
        else:
            return end
        before = _space_start(text, start)
        if before in (0, start):  # a field needs whitespace before it, and a name before that
            return end
        end = before


def _space_start(text: str, end: int) -> int:
    """The start of the run of whitespace that ends at `end`."""
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _word_start(text: str, end: int) -> int:
    """The start of the word that ends at `end`."""
    while end > 0 and not text[end - 1].isspace():
        end -= 1
    return end


# MetricKit gives a crash's exception type and signal as numbers (<mach/exception_types.h>,
# <sys/signal.h>); the names are those an .ips of the same crash gives.
EXCEPTION_NAMES = {
    1: "EXC_BAD_ACCESS",
    2: "EXC_BAD_INSTRUCTION",
    3: "EXC_ARITHMETIC",
    4: "EXC_EMULATION",
    5: "EXC_SOFTWARE",
    6: "EXC_BREAKPOINT",
    7: "EXC_SYSCALL",
    8: "EXC_MACH_SYSCALL",
    9: "EXC_RPC_ALERT",
    10: "EXC_CRASH",
    11: "EXC_RESOURCE",
    12: "EXC_GUARD",
    13: "EXC_CORPSE_NOTIFY",
}
SIGNAL_NAMES = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    5: "SIGTRAP",
    6: "SIGABRT",
    7: "SIGEMT",
    8: "SIGFPE",
    9: "SIGKILL",
    10: "SIGBUS",
    11: "SIGSEGV",
    12: "SIGSYS",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
}
