"""The build record a publish run writes last (stores/builds.py, docs/builds.md): which app,
version and build it published, from which commit and CI run, on which machine, and every
image it put in the store, so that a reader that finds the record finds every object it
names.

The app's name, bundle ID, version and build number come from the inputs: an
`.xcarchive`'s Info.plist (`ApplicationProperties`), else an `.app`'s Info.plist, else a
dSYM bundle's (the app's own before a framework's). The CI run comes from the variables
each CI system sets.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from dsymfind.apple import plists
from dsymfind.apple.device_support import OSBuild
from dsymfind.atomic import read_small_file
from dsymfind.publish.inputs import DWARF, EXECUTABLE, PDB, PE, Piece
from dsymfind.stores import builds
from dsymfind.vcs import git
from dsymfind.windows.portable_pdb import METADATA_SIGNATURE

# An Info.plist is a few kilobytes; a bound so a hostile input cannot make us read more.
MAX_INFO_PLIST_BYTES = 1 << 20
_IMAGE_KINDS = {DWARF: "dsym", EXECUTABLE: "executable", PE: "pe", PDB: "pdb"}
_DSYM_PREFIX = "com.apple.xcode.dsym."


class AppInfo(NamedTuple):
    app: str = ""
    bundle_id: str = ""
    version: str = ""  # CFBundleShortVersionString
    build: str = ""  # CFBundleVersion


def app_info(paths: Sequence[str], pieces: Iterable[Piece]) -> AppInfo:
    """What the inputs say of the app: the first archive's, else the first app's, else the
    dSYM bundles' (an app's `.app.dSYM` first); empty fields when none says."""
    bundles = [_bundle_dir(piece) for piece in pieces]
    dsyms = [b for b in dict.fromkeys(bundles) if b is not None]
    dsyms.sort(key=lambda folder: not folder.endswith(".app.dSYM"))
    readers = (
        [(path, _from_archive) for path in paths if path.rstrip(os.sep).endswith(".xcarchive")]
        + [(path, _from_app) for path in paths if path.rstrip(os.sep).endswith(".app")]
        + [(folder, _from_dsym) for folder in dsyms]
    )
    for where, reader in readers:
        found = reader(where.rstrip(os.sep))
        if found is not None:
            return found
    return AppInfo()


def _bundle_dir(piece: Piece) -> str | None:
    """The `.dSYM` folder a DWARF file was found in, when it lies on this machine."""
    if piece.bundle is None:
        return None
    folder, mark, _ = piece.origin.partition(piece.bundle + os.sep)
    return folder + piece.bundle if mark and os.path.isdir(folder + piece.bundle) else None


def _info(path: str) -> dict[str, object] | None:
    try:
        return plists.loads_dict(read_small_file(path, MAX_INFO_PLIST_BYTES))
    except (OSError, plists.UnreadablePlist):
        return None


def _text(info: Mapping[str, object], key: str) -> str:
    value = info.get(key)
    return value[: builds.MAX_TEXT] if isinstance(value, str) else ""


def _from_archive(archive: str) -> AppInfo | None:
    info = _info(os.path.join(archive, "Info.plist"))
    properties = info.get("ApplicationProperties") if info else None
    if not isinstance(properties, dict):
        return None
    app_path = _text(properties, "ApplicationPath")
    name = os.path.splitext(os.path.basename(app_path))[0] if app_path else ""
    return AppInfo(
        name or _text(info or {}, "Name"),
        _text(properties, "CFBundleIdentifier"),
        _text(properties, "CFBundleShortVersionString"),
        _text(properties, "CFBundleVersion"),
    )


def _from_app(app: str) -> AppInfo | None:
    for plist in (os.path.join(app, "Info.plist"), os.path.join(app, "Contents", "Info.plist")):
        info = _info(plist)
        if info is not None:
            name = _text(info, "CFBundleName") or os.path.splitext(os.path.basename(app))[0]
            return _described(name, info, "")
    return None


def _from_dsym(dsym: str) -> AppInfo | None:
    info = _info(os.path.join(dsym, "Contents", "Info.plist"))
    if info is None:
        return None
    name = os.path.basename(dsym).removesuffix(".dSYM")
    return _described(os.path.splitext(name)[0], info, _DSYM_PREFIX)


def _described(name: str, info: Mapping[str, object], id_prefix: str) -> AppInfo:
    return AppInfo(
        name[: builds.MAX_TEXT],
        _text(info, "CFBundleIdentifier").removeprefix(id_prefix),
        _text(info, "CFBundleShortVersionString"),
        _text(info, "CFBundleVersion"),
    )


def ci_run(env: Mapping[str, str]) -> builds.CIRun | None:
    """The CI run publish runs in, as its system's variables name it; None outside CI."""
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_RUN_ID"):
        run = env["GITHUB_RUN_ID"]
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        repository = env.get("GITHUB_REPOSITORY")
        url = f"{server}/{repository}/actions/runs/{run}" if repository else None
        return _run("github", run, url)
    if env.get("GITLAB_CI"):
        url = env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL")
        return _run("gitlab", env.get("CI_JOB_ID") or env.get("CI_PIPELINE_ID") or url, url)
    if env.get("CI_BUILD_ID"):
        number = env.get("CI_BUILD_NUMBER")
        build_id = env["CI_BUILD_ID"]
        return _run("xcode-cloud", f"{number} ({build_id})" if number else build_id, None)
    if env.get("BUILDKITE_BUILD_URL"):
        url = env["BUILDKITE_BUILD_URL"]
        return _run("buildkite", env.get("BUILDKITE_BUILD_NUMBER") or url, url)
    if env.get("CIRCLE_BUILD_URL"):
        url = env["CIRCLE_BUILD_URL"]
        return _run("circleci", env.get("CIRCLE_BUILD_NUM") or url, url)
    if env.get("BUILD_URL"):
        url = env["BUILD_URL"]
        return _run("jenkins", env.get("BUILD_NUMBER") or url, url)
    return None


def _run(system: str, run: str | None, url: str | None) -> builds.CIRun | None:
    if not run:
        return None
    bounded = url[: builds.MAX_LINE] if url else None
    return builds.CIRun(system, run[: builds.MAX_LINE], bounded)


def image_of(piece: Piece, key: str, size: int) -> builds.Image:
    """The record's image for a piece written under `key`: a PE's or PDB's store ID stands
    for its UUID."""
    kind = _IMAGE_KINDS[piece.kind]
    if piece.kind == PDB and _is_portable(piece.path):
        kind = "portable-pdb"
    install_path = piece.install_path or ""
    return builds.Image(
        piece.name, identity(piece), piece.arch or "", kind, key, size, install_path
    )


def _is_portable(path: str) -> bool:
    """A .NET portable PDB (ECMA-335 metadata) rather than a Windows PDB (MSF)."""
    try:
        return read_small_file(path, len(METADATA_SIGNATURE)) == METADATA_SIGNATURE
    except OSError:
        return False


def identity(piece: Piece) -> str:
    """What the store's records call a piece: its UUID as 32 hex digits, or its store ID."""
    return (piece.uuid or piece.store_id or "").replace("-", "").upper()


def record(
    build_id: str,
    info: AppInfo,
    inputs: Sequence[str],
    images: Sequence[builds.Image],
    objects: Sequence[dict[str, object]],
    sources: Sequence[dict[str, object]],
    env: Mapping[str, str],
) -> builds.Record:
    """The record of a run, published now. Its commit, remote and dirty flag are the first
    DWARF file's build's (vcs/provenance.py), else the inputs' git commit."""
    described = described_inputs(inputs)
    commit, remote, dirty = "", "", False
    if sources:
        first = sources[0]
        commit, remote = str(first.get("commit", "")), str(first.get("remote", ""))
        dirty = first.get("dirty") is True
    else:
        commit = next((str(i["git_commit"]) for i in described if i["git_commit"]), "")
    return builds.Record(
        id=build_id,
        app=info.app,
        bundle_id=info.bundle_id,
        version=info.version,
        build=info.build,
        commit=commit,
        remote=remote[: builds.MAX_LINE],
        dirty=dirty,
        images=tuple(images),
        inputs=tuple(described),
        objects=tuple(objects),
        sources=tuple(sources),
        **_published_now(env),
    )


def system_record(
    build_id: str,
    os_build: OSBuild,
    images: Sequence[builds.Image],
    objects: Sequence[dict[str, object]],
    env: Mapping[str, str],
) -> builds.Record:
    """The record of an OS build's libraries published now (`publish --system`): the OS's
    name as its app, its version and build; no bundle, no commit (Apple built them)."""
    return builds.Record(
        id=build_id,
        app=os_build.os[: builds.MAX_TEXT],
        bundle_id="",
        version=os_build.version[: builds.MAX_TEXT],
        build=os_build.build[: builds.MAX_TEXT],
        commit="",
        remote="",
        dirty=False,
        images=tuple(images),
        inputs=({"path": os_build.symbols[: builds.MAX_LINE], "git_commit": None},),
        objects=tuple(objects),
        kind=builds.SYSTEM,
        **_published_now(env),
    )


def _published_now(env: Mapping[str, str]) -> dict[str, Any]:
    """What every record says of its publishing: when, in which CI run, on which machine."""
    return {
        "published_at": builds.iso(builds.utc_now()),
        "ci": ci_run(env),
        "host": socket.gethostname()[: builds.MAX_LINE],
    }


def described_inputs(inputs: Sequence[str]) -> list[dict[str, object]]:
    """Each input path with the git commit of the repository holding it (or None)."""
    commits: dict[str, str | None] = {}
    described: list[dict[str, object]] = []
    for path in inputs:
        folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
        if folder not in commits:
            commits[folder] = git_commit(folder)
        described.append({"path": path, "git_commit": commits[folder]})
    return described


def git_commit(folder: str) -> str | None:
    """HEAD of the git repository holding `folder`; None without git or a repository."""
    try:
        return git.head(folder)
    except git.GitError:
        return None
