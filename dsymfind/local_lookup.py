"""Finding a dSYM for a UUID among everything already on this machine.

Order (docs/helper-contract.md): file-mapped UUID trees (configured, then DebugSymbols'),
dsymfind's own cache tree, then the search paths; then, with no dSYM anywhere, a system
image `dsymfind index` recorded (cache/systems.py), then an executable the downloader
fetched alone (no store had its dSYM), each answered with its file alone. Every
hit is checked against the Mach-O reader before it is answered, and remembered
(answers.py) so the next lookup is a few stats.
The remote stores slot in behind this, in the helper's miss path.

The Mach-O reader and plistlib are imported only past `recall`, off the hot path.
"""

import time

from dsymfind import _bare_os, answers, atomic, debugsymbols, permissions
from dsymfind.errors import DsymfindError
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry, uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.apple.macho import Slice
    from dsymfind.debugsymbols import Answer
    from dsymfind.settings import Settings


def search_origin(root: str) -> str:
    """How answers found below a search path name their origin."""
    return f"{debugsymbols.SEARCH_ORIGIN_PREFIX}{root}"


def tree_origin(root: str) -> str:
    """How answers found through a file-mapped tree name their origin."""
    return f"{debugsymbols.TREE_ORIGIN_PREFIX}{root}"


class Lookup:
    def __init__(
        self, settings: "Settings", *, deadline: float | None = None, cache_root: str | None = None
    ) -> None:
        """`deadline` (monotonic) bounds a due search-path walk; past it, another process
        walks (search_paths.refresh_in_background) and this lookup uses the index as it is.
        `cache_root`: the cache's real path, as permissions.refuse_unsafe checked it."""
        self.settings = settings
        self.deadline = deadline
        self.cache = CachePaths(cache_root or settings["cache_dir"])
        if cache_root is not None:
            debugsymbols.note_real_root(cache_root)
        mapped = settings["file_mapped_paths"] + settings["debugsymbols_file_mapped_paths"]
        # DebugSymbols may list the cache's tree as configured (install registers it so).
        own_trees = {
            _bare_os.normpath(self.cache.uuids),
            _bare_os.normpath(CachePaths(settings["cache_dir"]).uuids),
        }
        self.mapped_roots = [
            p for p in dict.fromkeys(mapped) if _bare_os.normpath(p) not in own_trees
        ]
        searched = settings["search_paths"] + settings["debugsymbols_search_paths"]
        self.search_roots = list(dict.fromkeys(searched))
        # The shared claims `hold` took, by entry name: released by `let_go`.
        self._held: dict[str, int] = {}

    def origins(self) -> list[str]:
        return [
            *(tree_origin(root) for root in self.mapped_roots),
            debugsymbols.CACHE_ORIGIN,
            *(search_origin(root) for root in self.search_roots),
            debugsymbols.SYSTEM_ORIGIN,
        ]

    def describe(self) -> str:
        """What a lookup searches, for messages and the log."""
        spelled = {
            debugsymbols.CACHE_ORIGIN: f"cache {self.cache.uuids}",
            debugsymbols.SYSTEM_ORIGIN: f"system images {self.cache.systems}",
        }
        return "; ".join(spelled.get(s, s) for s in self.origins())

    def recall(self, uuid: str) -> "Answer | None":
        """The hot path: a remembered answer whose files are all unchanged."""
        found = answers.recall(self.cache.answers, uuid, self.origins())
        return None if found is None else found[0]

    def hold(self, answer: "Answer") -> bool:
        """Keep the cache entries `answer` names from removal until `let_go`, for an answer
        that will be written only after a wait: a shared claim on each one's use lock
        (locks.answering; gc and check --repair skip an entry so claimed). Then every path
        it names is checked: False when one is gone, or its entry is being removed, and
        the answer must not be given.

        A removal claims before it unlinks anything and holds its claim until the entry is
        deleted, so a path that exists once the claim is held stays until `let_go`.
        """
        from dsymfind.cache import locks

        for name in debugsymbols.entries_named(answer, self.cache.root):
            if name not in self._held:
                claim = locks.answering(self.cache, name)
                if claim is None:
                    return False  # being removed right now
                self._held[name] = claim
        return answers.missing(answer) is None

    def let_go(self) -> None:
        """Release what `hold` claimed (an answer given, or not to be given)."""
        for claim in self._held.values():
            _bare_os.close(claim)
        self._held.clear()

    def find(self, uuid: str) -> "Answer | None":
        remembered = self.recall(uuid)
        if remembered is not None:
            return remembered
        # The cache's entry for the UUID is read below (a shadow standing in, a tree link
        # into it): a symlink planted there is refused, never followed.
        permissions.refuse_unsafe_entry(self.cache.root, uuid_hex(uuid))
        for origin, entry in self._tree_entries(uuid):
            found = self._from_path(entry, uuid, origin)
            if found is not None:
                return found
        found = self._from_search_paths(uuid)
        if found is None:
            found = self._from_system_image(uuid)
        return found if found is not None else self._from_executable_entry(uuid)

    def _tree_entries(self, uuid: str) -> list[tuple[str, str]]:
        entries = [(tree_origin(root), tree_entry(root, uuid)) for root in self.mapped_roots]
        entries.append((debugsymbols.CACHE_ORIGIN, tree_entry(self.cache.uuids, uuid)))
        return entries

    def _from_path(self, entry: str, uuid: str, origin: str) -> "Answer | None":
        """A tree entry names the DWARF file or its bundle; either must carry `uuid`."""
        if not _bare_os.lexists(entry):
            return None
        from dsymfind.apple import bundle

        target = _bare_os.realpath(entry)
        candidates = bundle.dwarf_files(target) if _bare_os.isdir(target) else [target]
        for dwarf_path in candidates:
            found = bundle.verified_slice(dwarf_path, uuid)
            if found is not None:
                # The entry is an input too: repointed or removed, the answer is rebuilt.
                return self._answer(dwarf_path, found, uuid=uuid, origin=origin, via=entry)
        return None

    def _from_system_image(self, uuid: str) -> "Answer | None":
        """The image file recorded for `uuid`, when it still carries the UUID: answered as
        its symbol-rich executable (its symbol table names frames), with no dSYM."""
        name = uuid_hex(uuid)
        record = self.cache.system_record(name)  # the shard holding it, read whole
        shard = atomic.read_marshal(record)
        if not isinstance(shard, dict) or name not in shard:
            return None  # the negative answer's usual way here: one read, no import
        from dsymfind.cache import systems

        image = systems.usable(shard[name], uuid)
        if image is None:
            return None
        # The record's shard is an input: rewritten (a record of it dropped or changed), the
        # answer is built again.
        return self._executable_answer(image.path, uuid, debugsymbols.SYSTEM_ORIGIN, record)

    def _from_executable_entry(self, uuid: str) -> "Answer | None":
        """The executable the downloader admitted alone into `executables/<HEX>` when no
        store had the UUID's dSYM (an Apple library a teammate published with `publish
        --system`): answered as its symbol-rich executable, as a recorded system image."""
        entry = self.cache.executable_entry(uuid_hex(uuid))
        if not _bare_os.lexists(entry):
            return None  # one stat more for a UUID no one has
        from dsymfind.cache import entries

        path = entries.executable_file(entry)
        if path is None:
            return None
        return self._executable_answer(path, uuid, debugsymbols.CACHE_ORIGIN, entry)

    def _executable_answer(self, path: str, uuid: str, origin: str, source: str) -> "Answer | None":
        """`path` answered as the UUID's symbol-rich executable when it carries the UUID
        as an image (not a dSYM, not an object file); remembered, with `source` (what named
        the file) and the UUID's tree entries as inputs: a dSYM linked there later wins."""
        from dsymfind.apple import device_support, macho

        try:
            slices = macho.read_slices(path)
        except macho.MachOError:
            return None
        found = macho.slice_for_uuid(slices, uuid)
        if found is None or not device_support.is_image(found):
            return None
        answer = {
            debugsymbols.ARCHITECTURE: found.arch,
            debugsymbols.SYMBOL_RICH_EXECUTABLE: path,
        }
        inputs = [source, *(entry for _, entry in self._tree_entries(uuid))]
        answers.remember(self.cache.answers, uuid, answer, origin, inputs)
        return answer

    def _from_search_paths(self, uuid: str) -> "Answer | None":
        for root in self.search_roots:
            found = self._from_search_path(root, uuid)
            if found is not None:
                return found
        return None

    def _from_search_path(self, root: str, uuid: str) -> "Answer | None":
        """The index's ready answer when it has one; else a look that may walk the tree."""
        from dsymfind import search_paths

        origin = search_origin(root)
        ready, settled = search_paths.quick_find(self.cache.catalogs, root, uuid, origin)
        if ready is not None:
            answer, record = ready
            answers.keep(self.cache.answers, uuid, record)
            return answer
        if settled:
            return None
        catalog = search_paths.SearchCatalog(self.cache.catalogs, root)
        walked = catalog.refreshed
        hit = catalog.find(uuid, until=self._walk_until())
        if catalog.refreshed != walked:
            catalog.write_answers(origin)
        if catalog.unfinished:
            search_paths.refresh_in_background(self.cache.catalogs, root)
        return None if hit is None else self._answer(*hit, uuid=uuid, origin=origin)

    def _walk_until(self) -> float | None:
        """Half the time left: the other half is for the servers behind the search paths."""
        if self.deadline is None:
            return None
        now = time.monotonic()
        return now + max(self.deadline - now, 0.0) / 2

    def _answer(
        self, dwarf_path: str, found: "Slice", *, uuid: str, origin: str, via: str | None = None
    ) -> "Answer":
        from dsymfind.apple import bundle
        from dsymfind.cache import shadow

        # A user's dSYM the cache shadows is answered through its shadow, whose plists
        # carry the source remappings and the fetched executable (cache/shadow.py).
        dwarf_path = shadow.standing_in(self.cache, uuid, dwarf_path) or dwarf_path
        answer, inputs = bundle.answer_for(dwarf_path, uuid, found)
        # What recall would refuse is not answered now either: a tree entry of the cache's
        # reaching out of it through a symlink in its folders leads to someone else's dSYM.
        problem = debugsymbols.dsym_misplaced(
            dwarf_path, origin, uuid=uuid, cache_root=self.cache.root
        )
        if problem is not None:
            raise DsymfindError(f"refusing the answer for {uuid}: {problem}")
        if via is not None:
            inputs = [*inputs, via]
        answers.remember(self.cache.answers, uuid, answer, origin, inputs)
        return answer
