"""Record a machine into one ``.tar.gz`` and open such a recording as a replaying :class:`Host`.

``write_recording`` runs the real collectors through recording wrappers (:class:`RecordingFs`,
:class:`RecordingNvml`, :class:`RecordingRunner`), so the archive holds exactly what the code reads, and
then the commands of :mod:`topodoc.probe.extras` (``nvidia-smi -q -x``, ``ibstat``, ``lspci -vvv``, ...)::

    meta.json       format, topodoc version, recorded_at, name, redacted, unreadable paths + reasons
    fs/...          the files, listings and symlinks the collectors touched (links kept, made relative)
    nvml.json       the NVML tape (every call's args, return code and value)
    commands.json   each command's argv, stdout, stderr, exit code, timed_out, missing

With ``SOURCE_DATE_EPOCH`` set (reproducible-builds.org), ``recorded_at`` and every timestamp in the
archive are that instant, so the same machine state always gives the same archive bytes.

``open_recording`` checks the whole archive, then extracts it (see :mod:`topodoc.probe.archive`)
into the per-user replay cache (:mod:`topodoc.probe.replaycache`), or, when that cannot be used,
into a scratch folder (see :mod:`topodoc.probe.scratch`: ``/dev/shm`` for small trees, removed at
exit and on SIGTERM/SIGHUP, swept when a killed process left one). Each archive is extracted once per
process (keyed by the SHA-256 of its bytes; at most :data:`CACHE_SIZE` trees kept) and every call
gets a fresh Host over that tree, so a process that replays the same recording many times (tests,
the agent) pays once.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from topodoc import __version__
from topodoc.model import GapReason
from topodoc.probe import replaycache, scratch
from topodoc.probe.archive import ArchiveError, Members, SafeArchive, write_archive
from topodoc.probe.host import (
    Host,
    RecordingNvml,
    RecordingRunner,
    RootFs,
    TapeNvml,
    TapeRunner,
    links_stay_inside,
)
from topodoc.probe.recordfs import RecordingFs

FORMAT = 1
CACHE_SIZE = 32
EPOCH_VARIABLE = "SOURCE_DATE_EPOCH"


@dataclass(frozen=True)
class RecordingSummary:
    path: str
    name: str
    files: int
    links: int
    nvml_calls: int
    commands: int
    unreadable: int
    size_bytes: int
    redacted: bool


def write_recording(
    host: Host, out_path, *, redact: bool = False, name: str | None = None
) -> RecordingSummary:
    from topodoc.probe import extras
    from topodoc.probe.collect import collect

    epoch = source_date_epoch()
    fs = RecordingFs(host.fs)
    nvml, runner = RecordingNvml(host.nvml), RecordingRunner(extras.KernelLinesOnly(host.runner))
    recording = Host(fs, nvml, runner)
    collect(recording)
    extras.capture(recording)  # the command outputs a person would ask for (probe.extras)
    name = name or _name_from(out_path)
    meta = _meta(fs, name, redact, epoch)
    members = _members(fs, meta, nvml.tape, runner.tape)
    if redact:
        from topodoc.probe.redact import redact_members

        redact_members(members)
        name = json.loads(members.files["meta.json"])["name"]  # a host name in it is redacted too
    size = write_archive(str(out_path), members, mtime=epoch)
    return RecordingSummary(
        str(out_path),
        name,
        len(fs.files),
        len(fs.links),
        len(nvml.tape["calls"]),
        len(runner.tape["commands"]),
        len(fs.unreadable),
        size,
        redact,
    )


def _name_from(out_path) -> str:
    base = os.path.basename(str(out_path))
    for suffix in (".tar.gz", ".tgz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` as an int, None when unset; a value that is not one raises ValueError."""
    raw = os.environ.get(EPOCH_VARIABLE, "").strip()
    if not raw:
        return None
    if not re.fullmatch(r"[0-9]{1,12}", raw):
        raise ValueError(f"{EPOCH_VARIABLE} must be a whole number of seconds since 1970, got {raw!r}")
    return int(raw)


def _meta(fs: RecordingFs, name: str, redact: bool, epoch: int | None) -> dict:
    when = datetime.now(timezone.utc) if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)
    unreadable = [
        {"path": path, "reason": reason.value, "detail": detail}
        for path, (reason, detail) in sorted(fs.unreadable.items())
    ]
    return {
        "format": FORMAT,
        "topodoc_version": __version__,
        "name": name,
        "redacted": redact,
        "recorded_at": when.replace(microsecond=0).isoformat(),
        "unreadable": unreadable,
    }


def _members(fs: RecordingFs, meta: dict, nvml_tape: dict, command_tape: dict) -> Members:
    members = Members()
    members.dirs = {"fs" + d for d in fs.dirs if d != "/"} | {"fs"}
    members.files = {"fs" + path: data for path, data in fs.files.items()}
    for path in fs.empty_files - set(fs.files):
        members.files["fs" + path] = b""
    members.links = {"fs" + link: safe_target(link, target) for link, target in fs.links.items()}
    for key, value in (("meta.json", meta), ("nvml.json", nvml_tape), ("commands.json", command_tape)):
        members.files[key] = json.dumps(value, indent=1, sort_keys=True).encode()
    return members


def safe_target(link: str, target: str) -> str:
    """``target`` if it stays inside the recorded root as written, else the equivalent relative path."""
    folder = posixpath.dirname(link)
    if not target.startswith("/"):
        lexical = posixpath.normpath(posixpath.join(folder.lstrip("/"), target))
        if lexical != ".." and not lexical.startswith("../"):
            return target
    resolved = posixpath.normpath(posixpath.join(folder, target))
    return posixpath.relpath(resolved, folder)


def open_recording(path, digest: str | None = None) -> Host:
    """A Host replaying the recording at ``path`` (extracted safely, once per user while the replay
    cache holds it, else once per process); ``digest``: the SHA-256 of its bytes when known."""
    directory = _extracted(str(path), digest)
    return open_directory(directory, label=str(path))


_cache: dict[str, str] = {}  # digest -> extracted tree (the replay cache's, or this process's scratch)
_scratch: set[str] = set()  # the trees in _cache that are this process's to remove
_cache_lock = threading.Lock()


def _extracted(path: str, digest: str | None = None) -> str:
    key = digest or archive_digest(path)
    with _cache_lock:
        if key not in _cache:
            tree = cached_tree(path, key)
            if tree is None:
                tree = _extract_to_scratch(path)
                _scratch.add(tree)
            if len(_cache) >= CACHE_SIZE:
                old = _cache.pop(next(iter(_cache)))
                if old in _scratch:
                    _scratch.discard(old)
                    scratch.remove_tree(old)
            _cache[key] = tree
        return _cache[key]


def cached_tree(path: str, digest: str) -> str | None:
    """The recording's tree in the replay cache (extracted there first when missing), or None when
    the cache cannot be used (off, unwritable, busy)."""
    root = replaycache.cache_root()
    if root is None:
        return None

    def build(folder: str) -> int:
        with SafeArchive(path) as archive:
            archive.extract(folder)
            return archive.plan.footprint

    try:
        entry = replaycache.open_entry(root, digest, build)
    except OSError:
        return None  # the cache folder failed under us (full disk, permissions): no cache
    except ArchiveError as err:
        if isinstance(err.__cause__, OSError):
            return None  # writing failed (a full disk): the scratch extraction says what is wrong
        raise
    return os.path.join(entry, replaycache.TREE) if entry else None


def _extract_to_scratch(path: str) -> str:
    """Check the whole archive, then extract it into :func:`scratch.place_for` its size (``/dev/shm``
    when small enough); when writing there fails (a small ``/dev/shm`` in a container), once more in
    the default temporary directory."""
    with SafeArchive(path) as archive:
        place = scratch.place_for(archive.plan.footprint)
        if place is not None:
            try:
                return _extract_into(archive, place)
            except ArchiveError as err:
                if not isinstance(err.__cause__, OSError):
                    raise
        return _extract_into(archive, None)


def _extract_into(archive: SafeArchive, place: str | None) -> str:
    try:
        tree = scratch.new_tree(place)
    except OSError as err:
        raise ArchiveError(f"{archive.path}: cannot make a folder to unpack it ({err.strerror})") from err
    try:
        archive.extract(tree)
    except OSError as err:
        scratch.remove_tree(tree)
        raise ArchiveError(f"{archive.path}: cannot unpack it ({err.strerror or err})") from err
    except BaseException:
        scratch.remove_tree(tree)
        raise
    return tree


def archive_digest(path: str) -> str:
    """SHA-256 of the archive's bytes (refusing anything but a regular file)."""
    try:
        return replaycache.file_digest(path)
    except replaycache.DigestError as err:
        raise ArchiveError(str(err)) from err


def recorded_runner(path) -> TapeRunner:
    """The command tape alone of the recording at ``path`` (extracted as :func:`open_recording` does),
    without loading its NVML tape."""
    label = str(path)
    try:
        return TapeRunner(_load_json(Path(_extracted(label)), "commands.json", label, {}))
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        raise ArchiveError(f"{label}: malformed recording ({str(err)[:300]})") from err


def open_directory(directory, label: str | None = None) -> Host:
    """A Host replaying an already extracted recording (``meta.json``, ``fs/``, tapes) in ``directory``."""
    root = Path(directory)
    label = label or str(directory)
    meta = _load_json(root, "meta.json", label)
    if meta.get("format") != FORMAT or isinstance(meta.get("format"), bool):
        shown = str(meta.get("format"))[:40]
        raise ArchiveError(f"{label}: recording format {shown} is not the supported {FORMAT}")
    try:
        failures = _failures(meta)
        nvml = TapeNvml(_load_json(root, "nvml.json", label, {}))
        runner = TapeRunner(_load_json(root, "commands.json", label, {}))
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        raise ArchiveError(f"{label}: malformed recording ({str(err)[:300]})") from err
    fs_root = root / "fs"
    if not fs_root.is_dir():
        raise ArchiveError(f"{label}: not a topodoc recording (no fs/ directory)")
    return Host(RootFs(fs_root, failures, links_inside=links_stay_inside(str(fs_root))), nvml, runner, meta)


META_TEXT = ("name", "recorded_at", "topodoc_version")


def _failures(meta: dict) -> dict[str, tuple[GapReason, str]]:
    """meta.json's ``unreadable`` list as ``{path: (reason, detail)}``, every field's type checked
    (ValueError naming the field), and the text fields other code reads checked to be text."""
    for key in META_TEXT:
        if not isinstance(meta.get(key), (str, type(None))):
            raise ValueError(f"meta.json {key!r} must be a string, got {type(meta[key]).__name__}")
    items = meta.get("unreadable", [])
    if not isinstance(items, list):
        raise ValueError(f"meta.json 'unreadable' must be a list, got {type(items).__name__}")
    failures = {}
    for n, item in enumerate(items):
        where = f"meta.json unreadable[{n}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object, got {type(item).__name__}")
        path, reason, detail = item.get("path"), item.get("reason"), item.get("detail", "")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"{where}: 'path' must be an absolute path")
        if not isinstance(detail, str):
            raise ValueError(f"{where}: 'detail' must be a string, got {type(detail).__name__}")
        if reason not in {r.value for r in GapReason}:
            raise ValueError(f"{where}: 'reason' {str(reason)[:40]!r} is not a known reason")
        failures[path] = (GapReason(reason), detail)
    return failures


_REQUIRED = object()


def _load_json(root: Path, name: str, archive, default=_REQUIRED) -> dict:
    file = root / name
    if not file.is_file() or file.is_symlink():
        if default is _REQUIRED:
            raise ArchiveError(f"{archive}: not a topodoc recording (no {name})")
        return default
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise ArchiveError(f"{archive}: {name} is not valid JSON ({str(err)[:200]})") from err
    if not isinstance(data, dict):
        raise ArchiveError(f"{archive}: {name} must hold a JSON object")
    return data


def store_snapshot(digest: str, snapshot, name: str | None) -> None:
    """Keep ``snapshot`` (collected from the recording with this digest) next to its cached tree."""
    from topodoc import codec

    tree = _cache.get(digest)
    if tree is None or tree in _scratch:
        return  # not in the replay cache
    replaycache.write_snapshot(os.path.dirname(tree), codec.to_data(snapshot), name)
