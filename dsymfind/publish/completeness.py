"""Whether a build is complete before it ships: for every slice of every Mach-O a product
ships (apple/products.py), where its dSYM is.

`inputs`: a dSYM among what was given (an archive's dSYMs/, the bundles beside an .app,
the dSYM bundles named). `store`: the store holds it (one existence check of its dSYM key
per UUID, under the store's layout). `stub`: an Xcode 16 debug-dylib stub, which needs none.
Otherwise `missing`, with the likeliest reason: a dSYM of the same name for another UUID
(stale), or no dSYM of that name anywhere (a vendor binary shipped without one).
`check-build` prints this; publish prints the missing images after its summary.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from dsymfind import settings, stores
from dsymfind.apple import products
from dsymfind.errors import DsymfindError
from dsymfind.publish import store_choice
from dsymfind.stores import layouts
from dsymfind.stores.writers import WOULD_PUBLISH, Writer

INPUTS, STORE, STUB, MISSING = "inputs", "store", "stub", "missing"
# Where a UUID's dSYM lies in a store (its URL or path), None when it does not.
Present = Callable[[str], str | None]


class Checked(NamedTuple):
    path: str  # relative to the product it ships in
    name: str
    uuid: str | None
    arch: str
    status: str  # INPUTS, STORE, STUB or MISSING
    reason: str

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


class Completeness(NamedTuple):
    images: list[Checked]
    problems: list[str]  # one line each: what could not be read, with its product

    @property
    def missing(self) -> list[Checked]:
        return [image for image in self.images if image.status == MISSING]

    @property
    def complete(self) -> bool:
        return not self.missing and not self.problems

    def as_dict(self) -> dict[str, object]:
        return {
            "complete": self.complete,
            "images": [image.as_dict() for image in self.images],
            "problems": self.problems,
        }


def check(paths: Sequence[str], present: Present | None = None) -> Completeness:
    """The images every path ships and where each one's dSYM is; `present` asks the store,
    once per UUID not among the inputs."""
    walked = [products.walk(path) for path in paths]
    shipped = _unique(image for product in walked for image in product.images)
    dsyms = [dsym for product in walked for dsym in product.dsyms]
    problems = [
        f"{os.path.basename(os.path.normpath(p.path))}: {line}"
        for p in walked
        for line in p.problems
    ]
    return Completeness([_checked(image, dsyms, present) for image in shipped], problems)


def _unique(images: Iterable[products.Image]) -> list[products.Image]:
    """Each UUID once (a build folder holds a framework both alone and inside the app)."""
    seen: set[str] = set()
    kept = []
    for image in images:
        if image.uuid is not None and image.uuid in seen:
            continue
        if image.uuid is not None:
            seen.add(image.uuid)
        kept.append(image)
    return kept


def _checked(
    image: products.Image, dsyms: list[products.Image], present: Present | None
) -> Checked:
    def said(status: str, reason: str) -> Checked:
        return Checked(image.path, image.name, image.uuid, image.arch, status, reason)

    debug_dylib = products.debug_dylib_name(image.name)
    if image.stub:
        return said(STUB, f"a debug-dylib stub: needs no dSYM; its code is in {debug_dylib}")
    if image.uuid is None:
        return said(MISSING, "has no LC_UUID: no dSYM can be matched to it")
    given = next((d for d in dsyms if d.uuid == image.uuid), None)
    if given is not None:
        return said(INPUTS, given.path)
    where = present(image.uuid) if present is not None else None
    if where is not None:
        return said(STORE, where)
    named = [d for d in dsyms if d.name == image.name and d.uuid is not None]
    same_arch = [d for d in named if d.arch == image.arch] or named
    others = sorted({str(d.uuid) for d in same_arch})
    if others:
        return said(
            MISSING,
            f"stale dSYM: the {image.name} dSYM given is for {', '.join(others)}, another build's",
        )
    where_not = "among the inputs or in the store" if present is not None else "among the inputs"
    return said(MISSING, f"vendor binary shipped without a dSYM: no {image.name} dSYM {where_not}")


def in_store(writer: Writer, layout: str, casing: str) -> Present:
    """One existence check of a UUID's dSYM key per call: a stat in a folder, a HEAD on S3
    (the writer's check, which never reads the bytes there)."""

    def present(uuid: str) -> str | None:
        key = layouts.apply_casing(layouts.debug_file_key(layout, uuid), casing)
        if writer.local_root is not None:
            # A folder's check would hash the file there; being there is all that is asked.
            path = os.path.join(writer.local_root, *key.split("/"))
            return path if os.path.isfile(path) else None
        return writer.where(key) if writer.check(key, "").state != WOULD_PUBLISH else None

    return present


def store_present(store: str, given: Mapping[str, str]) -> Present:
    """`--store STORE` (publish/store_choice.py) as a Present, under the layout and casing
    publish would write there."""
    location = store_choice.locate(store, settings.load(os.environ), given)
    if location.server is not None:
        layout, casing = location.server["layout"], location.server["casing"]
    else:
        kind = stores.kind_for(stores.scheme_of(location.url))
        layout, casing = kind.DEFAULT_LAYOUT or layouts.DEFAULT, "default"
    if layout == layouts.TEMPLATE:
        raise DsymfindError(
            f"--store {store}: a template server, whose keys are URLs; name its folder or bucket"
        )
    return in_store(store_choice.open_writer(location), layout, casing)


def line(image: Checked) -> str:
    """One image, as check-build and publish print it."""
    return f"{image.path}  {image.uuid or '-'}  {image.arch}  {image.status}  {image.reason}"


def summary(result: Completeness) -> str:
    counts = {status: 0 for status in (INPUTS, STORE, STUB, MISSING)}
    for image in result.images:
        counts[image.status] += 1
    said = ", ".join(f"{counts[s]} {w}" for s, w in _WORDS)
    unread = f"; {len(result.problems)} not readable" if result.problems else ""
    verdict = "complete" if result.complete else "INCOMPLETE"
    return f"{verdict}: {len(result.images)} images: {said}{unread}"


_WORDS = (
    (INPUTS, "in the inputs"),
    (STORE, "in the store"),
    (STUB, "stubs"),
    (MISSING, "missing"),
)


class Gate(NamedTuple):
    """publish's completeness check: the paths it was given that ship something, whether a
    missing image fails the run (`--require-complete`), and how its lines begin (`warning: `
    under Xcode, which shows such lines as the build's warnings)."""

    paths: list[str]
    required: bool = False
    prefix: str = ""

    @classmethod
    def of(cls, paths: Sequence[str], *, required: bool, prefix: str = "") -> Gate | None:
        """None when no path ships anything (dSYMs alone): nothing to check."""
        if not any(products.is_product(path) for path in paths):
            return None
        return cls(list(paths), required, prefix)

    def report(self, writer: Writer, layout: str, casing: str, *, to_stderr: bool) -> bool:
        """Check, print the missing images and what could not be read (after publish's
        summary, or on stderr when stdout is JSON); whether the run must fail for them."""
        present = None if layout == layouts.TEMPLATE else in_store(writer, layout, casing)
        result = check(self.paths, present)
        out = sys.stderr if to_stderr else sys.stdout
        for problem in result.problems:
            print(f"{self.prefix}dsymfind: {problem}", file=out)
        for image in result.missing:
            print(f"{self.prefix}missing dSYM: {line(image)}", file=out)
        if not result.complete:
            print(f"{self.prefix}{summary(result)}", file=out)
        return self.required and not result.complete
