"""The timed side of scripts/bench_layout_floor.py: in one process, with nothing but the
standard library's os, make in a new cache folder exactly what the cache's layout
(docs/cache-format.md) needs for each dSYM of a plan, as the admission makes it, with no
network, no Mach-O reading and no checks: the floor under `dsymfind fetch` of the same dSYMs.

    python layout_floor_make.py PLAN CACHE [--no-fsync] [--plain] [--threads N]

PLAN is the marshal file bench_layout_floor.py writes: per dSYM its hex name, the names of
its bundle and DWARF file, and the bytes of its DWARF file, Info.plist, per-UUID plist,
remembered answer and its two status records. Per dSYM it makes (the admission's steps):
the lock file, taken; the `running` record (temporary sibling renamed over); a staging
folder and the entry's five folders in it; the DWARF file, Info.plist and per-UUID plist,
each fsynced; the entry renamed into `dsyms/` and `dsyms/` fsynced; the five UUID tree
folders and the relative link; the answer (renamed over); the final record (renamed over);
the staging folder removed. The top-level folders are made once. `--no-fsync` leaves the
fsyncs out (what they cost); `--plain` instead writes each DWARF file alone into CACHE
(what curl does). `--threads`: dSYMs at once, as fetch/batch.py runs four downloads.
Prints the seconds the work took inside the process on stdout.
"""

import contextlib
import fcntl
import marshal
import os
import sys
import threading
import time

TREE_LEVELS = 5


def main() -> int:
    args = sys.argv[1:]
    fsync = "--no-fsync" not in args
    plain = "--plain" in args
    threads = int(args[args.index("--threads") + 1]) if "--threads" in args else 4
    plan_path, cache = args[0], args[1]
    with open(plan_path, "rb") as f:
        plan = marshal.load(f)
    started = time.perf_counter()
    if plain:
        work = [(_plain, cache, item) for item in plan]
    else:
        for folder in ("locks", "downloads", "tmp", "dsyms", "uuids", "answers"):
            os.makedirs(os.path.join(cache, folder), mode=0o700, exist_ok=True)
        dsyms = os.open(os.path.join(cache, "dsyms"), os.O_RDONLY | os.O_DIRECTORY)
        work = [(_admit, cache, item, dsyms, fsync) for item in plan]
    queue = list(reversed(work))
    guard = threading.Lock()

    def worker() -> None:
        while True:
            with guard:
                if not queue:
                    return
                job, *rest = queue.pop()
            job(*rest)

    running = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    print(f"{time.perf_counter() - started:.6f}")
    return 0


def _plain(cache: str, item: dict) -> None:
    _write(os.path.join(cache, item["hex"]), item["dwarf"], fsync=False)


def _write(path: str, data: bytes, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: str, data: bytes) -> None:
    tmp = f"{path}.{threading.get_ident():x}.{os.getpid()}.tmp"
    _write(tmp, data, fsync=False)
    os.rename(tmp, path)


def _admit(cache: str, item: dict, dsyms: int, fsync: bool) -> None:
    hex_name = item["hex"]
    lock = os.open(
        os.path.join(cache, "locks", hex_name + ".lock"),
        os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
        0o600,
    )
    fcntl.flock(lock, fcntl.LOCK_EX)
    record = os.path.join(cache, "downloads", hex_name + ".json")
    _replace(record, item["running"])
    staging = os.path.join(cache, "tmp", hex_name + "-floor")
    os.mkdir(staging, 0o700)
    build = os.path.join(staging, hex_name)
    contents = os.path.join(build, item["bundle"], "Contents")
    resources = os.path.join(contents, "Resources")
    dwarf_dir = os.path.join(resources, "DWARF")
    for folder in (build, os.path.dirname(contents), contents, resources, dwarf_dir):
        os.mkdir(folder)
    _write(os.path.join(dwarf_dir, item["dwarf_name"]), item["dwarf"], fsync=fsync)
    _write(os.path.join(contents, "Info.plist"), item["info_plist"], fsync=fsync)
    _write(os.path.join(resources, item["uuid"] + ".plist"), item["uuid_plist"], fsync=fsync)
    os.rename(build, hex_name, dst_dir_fd=dsyms)
    if fsync:
        os.fsync(dsyms)
    folder = os.path.join(cache, "uuids")
    for level in range(TREE_LEVELS):
        folder = os.path.join(folder, hex_name[level * 4 : level * 4 + 4])
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o755)
    target = os.path.join(
        "../" * (TREE_LEVELS + 1),
        "dsyms",
        hex_name,
        item["bundle"],
        "Contents",
        "Resources",
        "DWARF",
        item["dwarf_name"],
    )
    os.symlink(target, os.path.join(folder, hex_name[TREE_LEVELS * 4 :]))
    _replace(os.path.join(cache, "answers", hex_name), item["answer"])
    _replace(record, item["done"])
    os.rmdir(staging)
    os.close(lock)


if __name__ == "__main__":
    raise SystemExit(main())
