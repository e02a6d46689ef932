"""`dsymfind status`: what the cache holds and what it is doing, read without changing it."""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import time
from collections.abc import Iterator
from typing import Any

from dsymfind import paths, permissions, processes, settings
from dsymfind.cache import locks, negative, records
from dsymfind.fetch.backoff import duration
from dsymfind.paths import CachePaths
from dsymfind.progress import human_size
from dsymfind.stores.base import read_partial_meta, redact
from dsymfind.uuids import dashed, normalize_uuid


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    return status(as_json=args.json)


def status(*, as_json: bool) -> int:
    current = settings.load(os.environ)
    report = gather(current)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return 0


def gather(current: settings.Settings) -> dict[str, Any]:
    cache = CachePaths(current["cache_dir"])
    report = _gather(cache, current)
    partials = _partial_downloads(cache)
    if partials:
        report["partial_downloads"] = partials  # present only when there are some
    unsafe = _unsafe(cache.root)
    if unsafe:
        report["unsafe"] = unsafe  # present only when there is something to fix
    return report


def _unsafe(root: str) -> list[str]:
    """What makes the cache unsafe (the helper and every writer refuse it), with each fix:
    the folders above it and the root, else every folder inside it."""
    problem = permissions.unsafe(root)
    if problem is None and os.path.isdir(root):
        return [f"{what} (fix: {fix})" for _, (what, fix), _ in permissions.folder_problems(root)]
    return [] if problem is None else [f"{problem[0]} (fix: {problem[1]})"]


def _gather(cache: CachePaths, current: settings.Settings) -> dict[str, Any]:
    return {
        "cache_dir": cache.root,
        "exists": os.path.isdir(cache.root),
        "size_bytes": sum(_disk_usage(entry) for entry in _files(cache.root)),
        "dsym_entries": _count_children(cache.dsyms),
        "executables": _count_children(cache.executables),
        "uuid_links": sum(1 for _ in _files(cache.uuids)),
        **_system_images(cache),
        # Checkouts of builds' commits (vcs/checkouts.py), already counted in size_bytes.
        "source_worktrees": _count_children(cache.checkouts),
        "source_worktrees_bytes": sum(_disk_usage(entry) for entry in _files(cache.checkouts)),
        **_negative_cache(cache, current),
        "servers_in_backoff": _servers_in_backoff(cache, current),
        "downloads": _downloads(cache),
        "resident_downloader": _resident(cache),
    }


def _resident(cache: CachePaths) -> dict[str, Any] | None:
    """The resident downloader listening for this cache's misses: its socket and pid (0
    where the platform cannot tell), or None."""
    from dsymfind.fetch import resident

    path = resident.socket_path(cache)
    pid = resident.listening_pid(path) if os.path.lexists(path) else None
    if pid is None:
        return None
    return {"socket": path, "pid": pid}


def _system_images(cache: CachePaths) -> dict[str, Any]:
    """What `dsymfind index` recorded of DeviceSupport folders and simulator runtimes."""
    from dsymfind.cache import systems

    images = [image for image in systems.every_record(cache).values() if image is not None]
    return {
        "system_image_slices": len(images),
        "system_image_files": len({image.path for image in images}),
        "system_os_builds": sorted({f"{i.os} {i.version} ({i.build})" for i in images}),
    }


def _files(root: str) -> Iterator[os.DirEntry[str]]:
    """Everything under `root` that is not a directory; links are not followed."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _files(entry.path)
        elif not paths.temp_writer(entry.name) is not None:
            yield entry


def _disk_usage(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0  # removed meanwhile (gc, a finished download)


def _count_children(folder: str) -> int:
    try:
        return sum(1 for name in os.listdir(folder) if not name.startswith("."))
    except OSError:
        return 0


def _negative_cache(cache: CachePaths, current: settings.Settings) -> dict[str, Any]:
    """What the negative cache says under the current store settings, newest first: the
    dSYMs no server had within the TTL (counted), and each entry with where the servers
    were asked; entries these settings do not read are only counted."""
    now, ttl = time.time(), current["negative_cache_ttl"]
    held = negative.entries(cache)
    applying = [e for e in held if e.applies(current["stores_fingerprint"])]
    in_force = [e for e in applying if e.fresh(ttl, now)]
    return {
        "negative_cache": sum(1 for entry in in_force if entry.what == negative.DSYM),
        "negative_entries": [
            {
                "uuid": entry.uuid,
                "what": entry.what,
                "seconds_left": math.ceil(ttl - entry.age(now)),
                "not_found": negative.not_found(entry),
            }
            for entry in in_force
        ],
        "negative_entries_unused": len(held) - len(applying),
    }


def _servers_in_backoff(cache: CachePaths, current: settings.Settings) -> list[Any]:
    backoff = current["server_backoff"]
    skipped = []
    for server in current["servers"]:
        try:
            age = time.time() - os.stat(cache.failing_server_marker(server["url"])).st_mtime
        except OSError:
            continue  # not failing (or its marker just went)
        if 0 <= age < backoff:
            skipped.append(
                {
                    "name": server["name"],
                    "url": redact(server["url"]),
                    "seconds_left": round(backoff - age),
                }
            )
    return skipped


def _downloads(cache: CachePaths) -> list[dict[str, Any]]:
    """Records still saying "running": in flight while their lock is held, else stale."""
    listed = []
    now = time.time()
    for path in sorted(glob.glob(os.path.join(glob.escape(cache.downloads), "*.json"))):
        # Records are named by the UUID's hex digits, which records.read accepts as well.
        record = records.read(cache, os.path.basename(path)[: -len(".json")])
        if record is None or record.get("state") != records.RUNNING:
            continue
        uuid = normalize_uuid(str(record.get("uuid")))
        if uuid is None:
            continue  # not a record the downloader wrote
        done, total = records.bytes_done(record)
        held = locks.is_held(cache, uuid)
        listed.append(
            {
                "uuid": uuid,
                "state": "in-flight" if held else "stale",
                "pid": record.get("pid"),
                "pid_alive": processes.alive(record.get("pid")),
                "lock_held": held,
                "bytes_done": done,
                "bytes_total": total,
                "rate": records.rate(record),
                "age": round(now - float(record.get("started", now)), 1),
            }
        )
    return listed


def _partial_downloads(cache: CachePaths) -> list[dict[str, Any]]:
    """Transfers cut part-way that the next lookup of their UUID continues."""
    listed = []
    for owner, path in cache.partial_files():
        meta = read_partial_meta(path)
        try:
            size = os.lstat(path).st_size
        except OSError:
            continue  # gone meanwhile
        if meta is None:
            continue  # not ours to describe
        kept, total = meta.get("bytes"), meta.get("total")
        listed.append(
            {
                "uuid": dashed(owner),
                # What the next run continues from: what was on disk at the last checkpoint.
                "bytes_done": min(kept, size) if isinstance(kept, int) else 0,
                "bytes_total": total if isinstance(total, int) else None,
                "source": str(meta.get("source", "")),
                "resumable": bool(meta.get("validator")) and isinstance(total, int),
            }
        )
    return listed


def _print_report(report: dict[str, Any]) -> None:
    print(f"cache: {report['cache_dir']}" + ("" if report["exists"] else " (not created yet)"))
    for problem in report.get("unsafe", []):
        print(f"UNSAFE: {problem}")
    print(f"size on disk: {human_size(report['size_bytes'])}")
    print(
        f"entries: {report['dsym_entries']} dSYMs, {report['executables']} executables, "
        f"{report['uuid_links']} UUID links"
    )
    builds = report["system_os_builds"]
    print(
        f"system images: {report['system_image_files']} files "
        f"({report['system_image_slices']} slices) of {len(builds)} OS builds"
        + (f": {', '.join(builds)}" if builds else "")
    )
    print(
        f"source worktrees: {report['source_worktrees']} "
        f"({human_size(report['source_worktrees_bytes'])})"
    )
    _print_negative_cache(report)
    for server in report["servers_in_backoff"]:
        print(
            f"server in backoff: {server['name']} ({server['url']}), "
            f"retried in {server['seconds_left']} s"
        )
    print(f"resident downloader: {_describe_resident(report['resident_downloader'])}")
    if not report["downloads"]:
        print("downloads: none in flight")
    for download in report["downloads"]:
        print(f"download {download['uuid']}: {_describe(download)}")
    for partial in report.get("partial_downloads", []):
        total = partial["bytes_total"]
        of = f" of {human_size(total)}" if total is not None else ""
        how = "resumable" if partial["resumable"] else "not resumable (no validator)"
        print(
            f"partial download {partial['uuid']}: {human_size(partial['bytes_done'])}{of}, "
            f"{how}, from {partial['source']}"
        )


def _describe_resident(listening: dict[str, Any] | None) -> str:
    if listening is None:
        return "none listening (the next miss spawns its downloader)"
    pid = f"pid {listening['pid']}" if listening["pid"] else "listening"
    return f"{pid} on {listening['socket']}"


# Negative entries `status` lists one by one (the newest); --json lists them all.
LISTED_NEGATIVE_ENTRIES = 10


def _print_negative_cache(report: dict[str, Any]) -> None:
    print(f"negative cache: {report['negative_cache']} UUIDs no server had recently")
    listed = report["negative_entries"]
    for entry in listed[:LISTED_NEGATIVE_ENTRIES]:
        where = f"not on {', '.join(entry['not_found'])}" if entry["not_found"] else "not found"
        left = duration(entry["seconds_left"])
        print(f"  {entry['uuid']} {entry['what']}: {where}; {left} more")
    if len(listed) > LISTED_NEGATIVE_ENTRIES:
        print(f"  and {len(listed) - LISTED_NEGATIVE_ENTRIES} more (--json lists them all)")
    unused = report["negative_entries_unused"]
    if unused:
        print(
            f"  {unused} more learned under other store settings or by an earlier version, "
            "not used (gc removes them once expired)"
        )


def _describe(download: dict[str, Any]) -> str:
    age = f"started {download['age']:.0f} s ago"
    if download["state"] == "stale":
        return f"stale: its downloader (pid {download['pid']}) is gone; {age}"
    progress = records.progress_text(
        download["bytes_done"], download["bytes_total"], download["rate"]
    )
    return f"{progress}  {age}, pid {download['pid']}"
