"""Recording archives: write a ``.tar.gz`` from plain members, and extract one safely.

Extraction refuses, with one clear :class:`ArchiveError` line: absolute member names, ``..``
components, hard links, device files and FIFOs, symlinks whose target is absolute or leads outside
the archive, members over :data:`MAX_MEMBER_BYTES`, archives over :data:`MAX_TOTAL_BYTES` or
:data:`MAX_MEMBERS`. Members are written by hand (never ``extractall``) and every symlink is checked
again after extraction by resolving it, so chains of links cannot escape either.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import tarfile
import time
from dataclasses import dataclass, field

MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 200_000


class ArchiveError(ValueError):
    """The archive is unreadable or unsafe to extract."""


@dataclass
class Members:
    """What goes into an archive: regular files (bytes), directories, symlinks (name -> target)."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)


def write_archive(path: str, members: Members, mtime: int | None = None) -> int:
    """Write ``members`` as a gzip tarball at ``path``; returns its size in bytes.

    Every member and the gzip header carry ``mtime`` (now when None) and the header names no file,
    so the same members and ``mtime`` always give the same bytes."""
    stamp = int(time.time()) if mtime is None else int(mtime)
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=stamp, filename="") as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        _add_members(tar, members, stamp)
    return os.path.getsize(path)


def _add_members(tar: tarfile.TarFile, members: Members, mtime: int) -> None:
    for name in sorted(members.dirs):
        tar.addfile(_info(name, tarfile.DIRTYPE, mtime, mode=0o755))
    for name in sorted(members.files):
        data = members.files[name]
        info = _info(name, tarfile.REGTYPE, mtime, mode=0o644)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    for name in sorted(members.links):
        info = _info(name, tarfile.SYMTYPE, mtime, mode=0o777)
        info.linkname = members.links[name]
        tar.addfile(info)


def _info(name: str, kind: bytes, mtime: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mtime, info.mode = kind, mtime, mode
    return info


def extract_archive(path: str, dest: str) -> None:
    """Extract the archive at ``path`` into the existing directory ``dest``, refusing anything unsafe."""
    try:
        with tarfile.open(path, "r:gz") as tar:  # recordings are gzip; "r:*" errors span lines
            members = tar.getmembers()
            _check_all(members)
            ready: set[str] = set()
            for member in members:
                _extract_one(tar, member, dest, ready)
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ArchiveError(f"{path}: not a readable recording archive ({err})") from err
    _verify_links(dest)


def _check_all(members: list[tarfile.TarInfo]) -> None:
    if len(members) > MAX_MEMBERS:
        raise ArchiveError(f"archive has {len(members)} members, more than the {MAX_MEMBERS} allowed")
    total = 0
    for member in members:
        check_member(member)
        total += member.size
    if total > MAX_TOTAL_BYTES:
        raise ArchiveError(f"archive unpacks to {total} bytes, more than the {MAX_TOTAL_BYTES} allowed")


def check_member(member: tarfile.TarInfo) -> None:
    """Raise :class:`ArchiveError` if one member is unsafe on its own."""
    name = member.name
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"refusing absolute path in archive: {name!r}")
    if ".." in name.replace("\\", "/").split("/"):
        raise ArchiveError(f"refusing path with '..' in archive: {name!r}")
    if not (member.isfile() or member.isdir() or member.issym()):
        kind = "hard link" if member.islnk() else "device or special file"
        raise ArchiveError(f"refusing {kind} in archive: {name!r}")
    if member.size > MAX_MEMBER_BYTES:
        raise ArchiveError(f"refusing oversized member {name!r} ({member.size} bytes)")
    if member.issym():
        _check_link(name, member.linkname)


def _check_link(name: str, target: str) -> None:
    if target.startswith("/"):
        raise ArchiveError(f"refusing symlink with absolute target: {name!r} -> {target!r}")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if joined == ".." or joined.startswith("../"):
        raise ArchiveError(f"refusing symlink leaving the archive: {name!r} -> {target!r}")


def _extract_one(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: str, ready: set[str]) -> None:
    """Write one member; ``ready`` holds the parent folders already made and checked to lie inside
    ``dest`` (a folder's real path cannot change later: nothing is ever replaced or removed)."""
    target = os.path.join(dest, member.name)
    parent = os.path.dirname(target)
    if parent not in ready:
        os.makedirs(parent, exist_ok=True)
        _inside(dest, os.path.realpath(parent), member.name)
        ready.add(parent)
    if member.isdir():
        os.makedirs(target, exist_ok=True)
    elif member.issym():
        os.symlink(member.linkname, target)
    else:
        source = tar.extractfile(member)
        with open(target, "wb") as out:
            out.write(source.read() if source else b"")


def _inside(dest: str, real: str, name: str) -> None:
    root = os.path.realpath(dest)
    if real != root and not real.startswith(root + os.sep):
        raise ArchiveError(f"refusing member that leaves the archive through a symlink: {name!r}")


def _verify_links(dest: str) -> None:
    for folder, dirs, files in os.walk(dest):
        for entry in dirs + files:
            full = os.path.join(folder, entry)
            if os.path.islink(full):
                rel = os.path.relpath(full, dest)
                _inside(dest, os.path.realpath(full), rel)
