"""What `dsymfind publish --system` publishes: Apple's own libraries from a Mac's
DeviceSupport folders and simulator runtimes (apple/device_support.py), so that a teammate
who never connected that device gets the symbol tables that name its system frames.

Each image is an executable to the store, under the executable keys a fetch asks for, and
verified as publish verifies any binary (publish/inputs.py). The images of one OS build
(`iOS 17.5.1 (21F90)`, from however many of the paths given) make one build record of kind
`system`, whose app is the OS's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from dsymfind.apple import device_support
from dsymfind.apple.device_support import DeviceSupportError, OSBuild
from dsymfind.publish.inputs import Collector, Piece
from dsymfind.stores import builds
from dsymfind.stores.writers import Manager


class SystemBuild(NamedTuple):
    """One OS build and the pieces of its images found under the paths."""

    os_build: OSBuild
    pieces: list[Piece]


def collected(paths: Sequence[str], collector: Collector) -> list[SystemBuild]:
    """Every OS build under `paths` with the pieces of its images, in the order found. An
    image that cannot be read is refused (collector.found.refused) and the walk goes on;
    files that are no Mach-O are passed over. A path that holds no OS build is refused, and
    when no path holds one, that is the error (DeviceSupportError, one line)."""
    found: dict[tuple[str, str, str], SystemBuild] = {}
    missing: list[tuple[str, DeviceSupportError]] = []
    for path in paths:
        try:
            os_builds = device_support.os_builds(path)
        except DeviceSupportError as exc:
            missing.append((path, exc))
            continue
        for os_build in os_builds:
            # Xcode may keep one OS build in two folders (`16.0 (20A362)` and its `arm64e`
            # twin): one build, one record.
            group = found.setdefault(
                (os_build.os, os_build.version, os_build.build), SystemBuild(os_build, [])
            )
            before = len(collector.found.pieces)
            for image in device_support.system_files(os_build, collector.refuse):
                collector.add_system_image(image.path, image.install_path)
            group.pieces.extend(collector.found.pieces[before:])
    if not found and missing:
        raise missing[0][1]
    for path, error in missing:
        collector.refuse(path, str(error).partition(": ")[2] or str(error))
    return list(found.values())


def recorded_already(manager: Manager, record: builds.Record) -> str | None:
    """The key of a system record of the same OS build that names every image `record`
    names (a teammate's run, or an earlier one of this Mac), else None: publishing an OS
    build again then writes no second record of it. A record that cannot be read names
    nothing here."""
    wanted = {(image.uuid, image.key) for image in record.images}
    summaries, _ = builds.list_summaries(manager)
    for summary in summaries:
        same = (summary.kind, summary.app, summary.version, summary.build) == (
            builds.SYSTEM,
            record.app,
            record.version,
            record.build,
        )
        if not same or summary.images < len(wanted):
            continue
        try:
            existing = builds.read_record(manager, summary.key)
        except builds.BadRecord:
            continue
        if existing is not None and wanted <= {(i.uuid, i.key) for i in existing.images}:
            return summary.key
    return None
