"""Whose folders the cache may live in, and what may be inside it.

lldb can run Python scripts found inside a dSYM (`target.load-script-from-symbol-file`),
so a cache that another user can write into, or swap for their own, lets that user plant
code the debugger runs as us. The rules are those of OpenSSH's StrictModes:

- every folder above the cache (and every folder a symlink on the way leads through)
  belongs to us or to root, and nobody else may write to it, unless it is sticky like
  /tmp: there, others may add names but not rename or remove ours;
- every symlink on the way belongs to us or to root: its owner may repoint it at will
  (in /tmp too), so another user's link to a folder of ours passes every other check;
- the cache folder and every folder inside it belong to us and nobody else may write to
  them (sticky does not help here: others could still add names);
- where the cache keeps a folder of its own (`dsyms`, `dsyms/<HEX>`, `uuids/...`,
  `answers`, `tmp`, `locks`, ...), a symlink is never followed.

Once these hold, no other user can redirect any name on the way to a cache file, so a
path checked once keeps leading to the same place; still, the helper and the downloader
use only the real path the check resolved from then on. The helper checks the folders above,
the root (through a descriptor opened without following links) and the cache's own
top-level folders on every lookup: one `lstat` per folder above, one `fstatat` per
cache folder. The whole tree is walked only by `check`, `doctor` and `status`.

Imported on the helper's hot path: _bare_os and `_stat` only (built into the interpreter).
"""

import _stat as stat  # built in: the stat module is Python, and os loads it

from dsymfind import _bare_os
from dsymfind.errors import DsymfindError
from dsymfind.paths import TREE_FOLDER_LEVELS, CachePaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    # What is wrong, and the fix.
    Problem = tuple[str, str]

# Folders dsymfind creates are private: the cache holds what the debugger trusts.
PRIVATE_DIR_MODE = 0o700
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_ROOT_UID = 0
# As the kernel's own limit on symlinks in one lookup (Linux: 40; macOS: 32).
_MAX_SYMLINKS = 32
_NO_FOLLOW_DIR = _bare_os.O_RDONLY | _bare_os.O_DIRECTORY | _bare_os.O_NOFOLLOW | _bare_os.O_CLOEXEC
_LINK_FIX = "dsymfind check --repair removes it"
# What a symlink in the place of a folder of the cache's own is (`check` says it of the path).
PLANTED_LINK = "a symlink where the cache keeps a folder of its own; it is never followed"
# How a fix says to move elsewhere: the cache's words (publishing has its own).
_MOVE_CACHE = "set cache_dir to"
_MOVE_STORE = "publish to"

_NAMES = CachePaths("")
# The cache's own top-level folders (paths.py spells them).
OWN_FOLDERS = (
    _NAMES.answers,
    _NAMES.uuids,
    _NAMES.dsyms,
    _NAMES.executables,
    _NAMES.catalogs,
    _NAMES.locks,
    _NAMES.negative,
    _NAMES.failing_servers,
    _NAMES.downloads,
    _NAMES.tmp,
    _NAMES.pdb_store,
    _NAMES.symcaches,
    _NAMES.systems,
)
# Folders whose every name is a folder the cache made (an entry, staging): never a link.
_ENTRY_FOLDERS = (_NAMES.dsyms, _NAMES.executables, _NAMES.tmp)
# This process's uid, once asked (see _my_uid).
_UID: list[int] = []


def _my_uid() -> int:
    """Our uid, asked of the kernel once: a lookup compares a dozen owners with it."""
    if not _UID:
        _UID.append(_bare_os.getuid())
    return _UID[0]


def unsafe(root: str) -> "Problem | None":
    """Why the cache at `root` must not be trusted, and the fix; None when it is safe.

    A cache that does not exist yet is safe when the folders above it are: whoever creates
    it (us) makes it private. Checks the folders above, the root and its own folders.
    """
    return _checked(root)[1]


def _checked(root: str) -> "tuple[str, Problem | None]":
    """The real path of the cache at `root` (or where it will be made), and `unsafe`'s answer."""
    me = _my_uid()
    real, found, problem = _walk(root, me)
    if problem is None and found is not None:
        problem = _cache_folder_problem(root, found, me)
        if problem is None:
            problem = _own_folders_problem(root, real, found, me)
    return real, problem


def refuse_unsafe(root: str) -> str:
    """The real path of the cache, checked: raise when it (if it exists) could hold what
    another user planted.

    The helper calls this before answering anything from the cache: its tree, its
    remembered answers and its search index all live there. It then uses only the path
    returned, whose every name was checked, never the configured spelling again.
    """
    real, problem = _checked(root)
    if problem is not None:
        raise refusal(problem)
    return real


def refusal(problem: "Problem") -> DsymfindError:
    """The one error every reader and writer gives for an unsafe cache."""
    what, fix = problem
    return DsymfindError(
        f"refusing the cache: {what}; lldb may run scripts from dSYMs found there (fix: {fix})"
    )


def secure_cache(root: str) -> str:
    """Create the cache folder private to us, or refuse one that others could write into;
    its real path, as checked (see `refuse_unsafe`).

    Every writer (downloader, index, gc, the PDB store) calls this before its first write.
    Besides the checks of `unsafe`, no name in `dsyms/`, `executables/` or `tmp/` may be a
    symlink: a writer would follow it (relink it, publish beside it, rename into it).
    """
    secure_umask()
    refuse_unsafe(root)  # before making anything: the folders above may be someone else's
    try:
        _make_parents(_bare_os.dirname(_bare_os.abspath(root)))
        _bare_os.mkdir(root, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise DsymfindError(f"cannot create the cache folder {root}: {exc.strerror}") from None
    real = refuse_unsafe(root)
    for folder in _ENTRY_FOLDERS:
        problem = _linked_names(_bare_os.join(real, folder))
        if problem is not None:
            raise refusal(problem)
    return real


def refuse_unsafe_store(folder: str) -> str:
    """The real path of a folder `publish` writes into, checked as the cache's path is: each
    folder on the way (and each symlink) ours or root's, none writable by others unless
    sticky; the store itself, which holds the keys' folders, writable by nobody else even
    when sticky (others could make those folders theirs). Raises when it is not so."""
    me = _my_uid()
    real, found, problem = _walk(folder, me, _MOVE_STORE)
    if problem is None and found is not None:
        problem = _root_problem(real, found, (me, _ROOT_UID), _MOVE_STORE, "go-w")
    if problem is not None:
        what, fix = problem
        raise DsymfindError(f"refusing to publish to {folder}: {what} (fix: {fix})")
    return real


def secure_umask() -> None:
    """From now on this process makes nothing others may write, whatever the umask: the
    UUID tree's intermediate folders, for one, take their mode from it (a user's umask 002
    would make them group-writable, which every later lookup then refuses)."""
    # The umask can only be read by setting it: stricter, never looser, for that instant.
    _bare_os.umask(_bare_os.umask(0o077) | stat.S_IWGRP | stat.S_IWOTH)


def entry_problem(root: str, uuid_hex: str) -> "Problem | None":
    """Why the cache's entries for one UUID (`dsyms/<HEX>`, `executables/<HEX>`) must not
    be read: a symlink, or a folder someone else owns or may write. Two lstat calls."""
    for folder in (_NAMES.dsyms, _NAMES.executables):
        problem = own_folder_problem(_bare_os.join(root, folder, uuid_hex))
        if problem is not None:
            return problem
    return None


def refuse_unsafe_entry(root: str, uuid_hex: str) -> None:
    problem = entry_problem(root, uuid_hex)
    if problem is not None:
        raise refusal(problem)


def open_own_folder(root: str, name: str) -> int:
    """A descriptor of the cache's top-level folder `name`, made private when missing, for
    renames into it (`dst_dir_fd=`) that no swap of a folder on the way can redirect.

    The root is checked as by `unsafe`, then opened without following a link and compared
    with what the check saw; `name` is made and opened inside that descriptor, again
    without following a link, and must be a folder of ours nobody else may write.
    """
    me = _my_uid()
    real, found, problem = _walk(root, me)
    if problem is None and found is None:
        problem = f"{root} does not exist", "run the command again"
    if problem is None and found is not None:
        problem = _cache_folder_problem(root, found, me)
    if problem is not None:
        raise refusal(problem)
    assert found is not None
    path = _bare_os.join(root, name)
    root_fd = _bare_os.open(real, _NO_FOLLOW_DIR)
    try:
        st = _bare_os.fstat(root_fd)
        if (st.st_dev, st.st_ino) != (found.st_dev, found.st_ino):
            raise refusal((f"{root} changed while it was being checked", "run it again"))
        try:  # noqa: SIM105 - contextlib would cost the hot path (this module) an import
            _bare_os.mkdir(name, PRIVATE_DIR_MODE, dir_fd=root_fd)
        except FileExistsError:
            pass
        try:
            fd = _bare_os.open(name, _NO_FOLLOW_DIR, dir_fd=root_fd)
        except OSError as exc:
            # A symlink (ELOOP), a file (ENOTDIR)...
            problem = own_folder_problem(path, top_level=True)
            raise refusal(problem or _cannot_check(path, exc)) from None
    finally:
        _bare_os.close(root_fd)
    problem = _inside_problem(path, _bare_os.fstat(fd), me, top_level=True)
    if problem is not None:
        _bare_os.close(fd)
        raise refusal(problem)
    return fd


def own_folder_problem(path: str, *, top_level: bool = False) -> "Problem | None":
    """Why `path`, where the cache keeps a folder of its own, must not be used; None when it
    is a folder of ours that nobody else may write, or absent. `top_level`: one of the
    cache's own folders in its root (a symlink there is the user's to remove)."""
    try:
        st = _bare_os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"{path} cannot be checked: {exc.strerror}", f"check the permissions of {path}"
    return _inside_problem(path, st, _my_uid(), top_level=top_level)


def folder_problems(root: str, *, limit: int = 100) -> "list[tuple[str, Problem, bool]]":
    """Everything in the cache that breaks the rules: (path, problem, whether it is a symlink
    in the place of a folder of the cache's own, which check --repair may remove).

    Walks the whole cache without following links (admin commands only: `check`, `doctor`,
    `status`). Stops after `limit` findings. Assumes `unsafe(root)` found the root safe.
    """
    me = _my_uid()
    found: list[tuple[str, Problem, bool]] = []
    pending: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while pending and len(found) < limit:
        folder, where = pending.pop()
        try:
            with _bare_os.scandir(folder) as listed:
                children = list(listed)
        except OSError:
            continue  # removed meanwhile, or not a folder: nothing below to judge
        for child in sorted(children, key=lambda c: c.name):
            place = (*where, child.name)
            if child.is_symlink():
                if _folder_expected(place):
                    planted = _link_problem(child.path, top_level=len(place) == 1)
                    found.append((child.path, planted, True))
                continue
            if not child.is_dir(follow_symlinks=False):
                continue
            try:
                st = child.stat(follow_symlinks=False)
            except OSError:
                continue
            problem = _inside_problem(child.path, st, me, top_level=len(place) == 1)
            if problem is not None:
                found.append((child.path, problem, False))
            pending.append((child.path, place))
    return found[:limit]


def _folder_expected(place: tuple[str, ...]) -> bool:
    """Whether the cache keeps a folder (or file) of its own at `place`, names below the root,
    so that a symlink there is none of the cache's making."""
    top = place[0]
    if len(place) == 1:
        return top in OWN_FOLDERS
    if top == _NAMES.tmp:
        return len(place) == 2  # a staging folder; inside it, a run's own business
    if top == _NAMES.executables:
        return len(place) <= 3  # <HEX>/<UUID>: a copied file
    if top == _NAMES.dsyms:
        # An entry and every name in its bundle, but for a shadow's DWARF file, which
        # links to the user's (cache/shadow.py).
        return not (len(place) > 2 and place[-2] == "DWARF")
    if top == _NAMES.uuids:
        return len(place) <= TREE_FOLDER_LEVELS
    return False


def _walk(
    folder: str, me: int, move: str = _MOVE_CACHE
) -> "tuple[str, _bare_os.stat_result | None, Problem | None]":
    """Resolve `folder` one name at a time, as the kernel would, checking every folder a
    name is looked up in: (the real path, the lstat of the folder itself or None when it
    does not exist, a problem).

    One lstat per name (and a readlink per symlink on the way), no descriptor held: once a
    folder is ours or root's and nobody else may write it, its names cannot change under us.
    """
    todo = _bare_os.abspath(folder).split(_bare_os.sep)[::-1]
    current, current_st, checked = _bare_os.sep, None, False
    links = 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            # Physically, as the kernel does after a symlink; a folder we went through.
            current, current_st, checked = _bare_os.dirname(current), None, True
            continue
        if current_st is None:
            try:
                current_st = _bare_os.lstat(current)
            except OSError as exc:
                return current, None, _cannot_check(current, exc)
        if not stat.S_ISDIR(current_st.st_mode):
            return current, None, None  # no folder can exist below a file: nothing to trust
        if not checked:
            problem = _above_problem(current, current_st, me, move)
            if problem is not None:
                return current, None, problem
            checked = True
        candidate = _bare_os.join(current, name)
        try:
            st = _bare_os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            # Not there yet: made by us, privately, when needed, where the names left lead.
            return _bare_os.normpath(_bare_os.join(candidate, *todo[::-1])), None, None
        except OSError as exc:
            return candidate, None, _cannot_check(candidate, exc)
        if stat.S_ISLNK(st.st_mode):
            problem = _link_on_the_way_problem(candidate, st, current_st, me, move)
            if problem is not None:
                return candidate, None, problem
            links += 1
            if links > _MAX_SYMLINKS:
                return (
                    candidate,
                    None,
                    (
                        f"{folder} cannot be checked: too many symlinks on the way",
                        f"{move} a plain folder of your own",
                    ),
                )
            target = _bare_os.readlink(candidate)
            if _bare_os.isabs(target):
                current, current_st, checked = _bare_os.sep, None, False
            todo.extend(target.split(_bare_os.sep)[::-1])
            continue
        current, current_st, checked = candidate, st, False
    if current_st is None:
        try:
            current_st = _bare_os.lstat(current)
        except OSError as exc:
            return current, None, _cannot_check(current, exc)
    return current, current_st, None


def _link_on_the_way_problem(
    link: str, st: _bare_os.stat_result, holder: _bare_os.stat_result, me: int, move: str
) -> "Problem | None":
    """A symlink on the way, as OpenSSH's StrictModes judges one: its owner may point it
    elsewhere at will, so it must be ours or root's; and it must sit in a folder nobody else
    may write (sticky or not: there a link is one name away from being theirs)."""
    if st.st_uid not in (me, _ROOT_UID):
        return (
            f"{link}, a symlink on the way to it, belongs to another user (uid {st.st_uid}), "
            "who can point it elsewhere at will",
            f"{move} a path without it (the folder it leads to, if that is yours)",
        )
    if stat.S_IMODE(holder.st_mode) & _OTHERS_WRITE:
        return (
            f"{link}, a symlink on the way to it, sits in {_bare_os.dirname(link)}, "
            "which others may write",
            f"{move} a path without it (the folder it leads to, if that is yours)",
        )
    return None


def _above_problem(
    path: str, st: _bare_os.stat_result, me: int, move: str = _MOVE_CACHE
) -> "Problem | None":
    """A folder above the cache: ours or root's, and not writable by others unless sticky."""
    mode = stat.S_IMODE(st.st_mode)
    own_fix = f"or {move} a folder of your own"
    if mode & _OTHERS_WRITE and not mode & stat.S_ISVTX:
        fix = (
            f"chmod go-w {path}{' as root' if st.st_uid == _ROOT_UID != me else ''}, {own_fix}"
            if st.st_uid in (me, _ROOT_UID)
            else f"{move} a folder of your own"
        )
        return f"{path}, which holds it, is writable by other users (mode {mode:o})", fix
    if st.st_uid not in (me, _ROOT_UID):
        return (
            f"{path}, which holds it, belongs to another user (uid {st.st_uid})",
            f"{move} a folder of your own",
        )
    return None


def _cache_folder_problem(root: str, st: _bare_os.stat_result, me: int) -> "Problem | None":
    return _root_problem(root, st, (me,), _MOVE_CACHE, "700")


def _root_problem(
    root: str, st: _bare_os.stat_result, owners: tuple[int, ...], move: str, chmod: str
) -> "Problem | None":
    """A folder dsymfind makes folders in (the cache, a store): one of `owners`' (ours
    first), and nobody else may write it, sticky or not: they could add folders of theirs."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{root} is not a folder", f"{move} a folder of your own"
    if st.st_uid not in owners:
        return (
            f"{root} belongs to another user (uid {st.st_uid})",
            f"{move} a folder of your own (or, if it is yours: chown -R {owners[0]} {root})",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & _OTHERS_WRITE:
        return (
            f"{root} is writable by other users (mode {mode:o})",
            f"chmod {chmod} {root}, or {move} a folder of your own",
        )
    return None


def _own_folders_problem(
    root: str, real: str, checked: _bare_os.stat_result, me: int
) -> "Problem | None":
    """The cache's own top-level folders, looked up through a descriptor of the root.

    The descriptor is opened without following a link and must be the folder the walk
    checked: what is judged below is what the path leads to now.
    """
    try:
        fd = _bare_os.open(real, _NO_FOLLOW_DIR)
    except OSError:
        # Unreadable to us (mode 0300, say): judge the names by path. The walk found every
        # folder on the way safe, so the path still leads where it did.
        return _own_folders_by_path(root)
    try:
        st = _bare_os.fstat(fd)
        if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
            return (
                f"{root} changed while it was being checked",
                "run it again; if this recurs, someone is moving the cache folder",
            )
        for name in OWN_FOLDERS:
            try:
                inner = _bare_os.stat(name, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                continue
            problem = _inside_problem(_bare_os.join(root, name), inner, me, top_level=True)
            if problem is not None:
                return problem
    finally:
        _bare_os.close(fd)
    return None


def _own_folders_by_path(root: str) -> "Problem | None":
    for name in OWN_FOLDERS:
        problem = own_folder_problem(_bare_os.join(root, name), top_level=True)
        if problem is not None:
            return problem
    return None


def _inside_problem(
    path: str, st: _bare_os.stat_result, me: int, *, top_level: bool = False
) -> "Problem | None":
    """A folder inside the cache: a real folder, ours, and nobody else may write it.

    A file of ours where a folder belongs is no danger, only in the way: whatever needs
    the folder fails on it and says so (as before these checks).
    """
    if stat.S_ISLNK(st.st_mode):
        return _link_problem(path, top_level=top_level)
    if not stat.S_ISDIR(st.st_mode) and st.st_uid == me:
        return None
    if st.st_uid != me:
        return (
            f"{path} belongs to another user (uid {st.st_uid})",
            f"remove it, as it may hold what they planted (or, if it is yours: chown -R {me} "
            f"{path})",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & _OTHERS_WRITE:
        return f"{path} is writable by other users (mode {mode:o})", f"chmod 700 {path}"
    return None


def _link_problem(path: str, *, top_level: bool = False) -> "Problem":
    # A top-level folder's link stops every command, check too: removing it is the user's.
    fix = f"rm {path}; dsymfind makes the folder again" if top_level else _LINK_FIX
    return f"{path} is {PLANTED_LINK}", fix


def _linked_names(folder: str) -> "Problem | None":
    """The first symlink among the names in `folder`: one directory read, no stat (d_type)."""
    try:
        with _bare_os.scandir(folder) as listed:
            for child in listed:
                if child.is_symlink():
                    return _link_problem(child.path)
    except OSError:
        pass  # absent (made later, by us) or unreadable (judged where it is used)
    return None


def _cannot_check(path: str, exc: OSError) -> "Problem":
    return f"{path} cannot be checked: {exc.strerror}", f"check the permissions of {path}"


def _make_parents(folder: str) -> None:
    """Make the missing folders above the cache, none writable by others whatever the umask
    (the checks above refuse such a folder); existing ones are left as they are."""
    if _bare_os.isdir(folder):
        return
    parent = _bare_os.dirname(folder)
    if parent != folder:
        _make_parents(parent)
    try:  # noqa: SIM105 - contextlib would cost the hot path (this module) an import
        _bare_os.mkdir(folder, 0o755)
    except FileExistsError:
        pass
