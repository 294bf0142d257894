"""Recording archives: write a ``.tar.gz`` from plain members, and extract one safely.

Extraction is safe by construction, in two passes over one open file:

1. *Check*: the members are streamed (never listed first) and the first limit stops the read:
   :data:`MAX_MEMBERS`, :data:`MAX_TOTAL_BYTES`, :data:`MAX_MEMBER_BYTES`, extended (PAX / GNU long
   name) headers over :data:`MAX_HEADER_BYTES` each or :data:`MAX_HEADERS_TOTAL` in all, names over
   :data:`MAX_NAME` characters. Absolute names, ``..``, duplicate names, a member under a regular file
   or a symlink member, hard links, devices, FIFOs and sparse members are refused. Every symlink is
   resolved against the archive's own link graph (links to links, through directories that are
   links, ``..`` after a link) and refused when it leaves the archive, loops, or needs more than
   :data:`MAX_LINK_HOPS` links. Python's ``tarfile.data_filter`` checks every symlink as well where
   it exists. Modes, owners and times in the archive are ignored (0644 files, 0755 folders).
   Nothing is written before every member has passed.
2. *Write*: the files' bytes kept from the check (up to :data:`KEEP_BYTES`), or else the archive
   read again, which must match what was checked member for member; folders
   are descended one component at a time with ``O_NOFOLLOW`` directory descriptors (``openat``
   style), regular files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, and symlinks are made
   only after every regular file is written, so no write ever goes through a link.

Every error is one :class:`ArchiveError` line of at most :data:`MAX_ERROR` characters.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import posixpath
import stat
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, field

MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 20_000  # the largest bundled recording (8xgpu-roce-2s) holds 2,149 members
MAX_HEADER_BYTES = 64 * 1024  # one PAX / GNU long-name header
MAX_HEADERS_TOTAL = 8 * 1024 * 1024  # all of them together
MAX_HEADER_CHAIN = 8  # extended headers in front of one member
MAX_NAME = 4096  # PATH_MAX
MAX_COMPONENT = 255  # NAME_MAX
MAX_LINK_HOPS = 40  # what Linux allows before ELOOP
MAX_DEPTH = 256  # folders in a resolved link target (sysfs goes ~15 deep)
MAX_LINK_STEPS = 500_000  # path components walked resolving every link of one archive
MAX_ERROR = 300
MAX_READ = 1024 * 1024  # no single read of the decompressed stream may ask for more
MAX_STREAM_BYTES = MAX_TOTAL_BYTES + 64 * 1024 * 1024  # data plus every header and padding
MAX_ARCHIVE_BYTES = MAX_TOTAL_BYTES  # the compressed file itself
KEEP_BYTES = 32 * 1024 * 1024  # file data held from the check pass (a recording holds < 1 MB)
CHUNK = 64 * 1024

_FILE, _DIR, _LINK = "file", "dir", "link"
_NOWHERE = "/nonexistent/topodoc-scratch"  # a destination for data_filter's lexical checks


class ArchiveError(ValueError):
    """The archive is unreadable or unsafe to extract. The message is one line, capped."""

    def __init__(self, message: str) -> None:
        line = " ".join(str(message).split())
        if len(line) > MAX_ERROR:
            line = line[: MAX_ERROR - 3] + "..."
        super().__init__(line)


def _show(name: str) -> str:
    """A member name for an error line: quoted, escaped and cut to 80 characters."""
    text = repr(name)
    return text if len(text) <= 80 else text[:60] + "..." + text[-17:]


@dataclass
class Members:
    """What goes into an archive: regular files (bytes), directories, symlinks (name -> target)."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)


# -- writing -------------------------------------------------------------------------------------


def write_archive(path: str, members: Members, mtime: int | None = None) -> int:
    """Write ``members`` as a gzip tarball at ``path``; returns its size in bytes.

    The archive is written to a new temporary file in the same folder (created ``O_EXCL``, mode
    0600: recordings hold serials, MACs and the kernel command line), synced, then renamed over
    ``path``: an existing symlink at ``path`` is replaced, never followed, and a failure (a full
    disk, a signal) leaves no partial archive. Every member and the gzip header carry ``mtime`` (now
    when None) and the header names no file, so the same members and ``mtime`` give the same bytes."""
    stamp = int(time.time()) if mtime is None else int(mtime)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".topodoc-record-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as raw:
            with (
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=stamp, filename="") as gz,
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
            ):
                _add_members(tar, members, stamp)
            raw.flush()
            os.fsync(raw.fileno())
            size = os.fstat(raw.fileno()).st_size
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_folder(folder)
    return size


def _sync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory; the rename itself is done
    finally:
        os.close(fd)


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


# -- reading: a bounded stream under tarfile -----------------------------------------------------


class _Bounded:
    """The decompressed stream as tarfile sees it: no read over :data:`MAX_READ`, forward seeks only,
    and at most :data:`MAX_STREAM_BYTES` decompressed in all -- counted on the bytes actually read or
    skipped, not on positions or the sizes headers claim (a negative size once sent tarfile back to
    decompress the same data again and again within a budget that stayed near 0)."""

    def __init__(self, gz: gzip.GzipFile) -> None:
        self._gz = gz
        self._consumed = 0

    def _spend(self, count: int) -> None:
        self._consumed += count
        if self._consumed > MAX_STREAM_BYTES:
            raise ArchiveError(f"refusing archive: it unpacks to more than {MAX_STREAM_BYTES} bytes")

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > MAX_READ:
            raise ArchiveError(f"refusing archive: a header or block asks for {size} bytes at once")
        self._spend(size)
        return self._gz.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        here = self._gz.tell()
        if whence != 0 or offset < here:
            raise ArchiveError("refusing archive: a member sends the reader back to data already read")
        self._spend(offset - here)
        return self._gz.seek(offset)

    def tell(self) -> int:
        return self._gz.tell()


class _TarInfo(tarfile.TarInfo):
    """tarfile's header parsing, refusing before it reads: oversized or chained extended headers,
    sparse members (whose maps tarfile reads from the data without a bound)."""

    _EXTENDED = (
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
    )

    def _proc_member(self, tar):
        if self.size < 0:  # tarfile reads GNU base-256 negative sizes; its offset would move backwards
            raise ArchiveError(f"refusing member with a negative size ({self.size}): {_show(self.name)}")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveError(f"refusing sparse member in archive: {_show(self.name)}")
        if self.type not in self._EXTENDED:
            return super()._proc_member(tar)
        if self.size > MAX_HEADER_BYTES:
            raise ArchiveError(
                f"refusing archive: an extended (PAX/GNU) header of {self.size} bytes, "
                f"more than the {MAX_HEADER_BYTES} allowed"
            )
        budget = tar.__dict__.setdefault("_topodoc_budget", [0, 0])  # [bytes, chain depth]
        budget[0] += self.size
        if budget[0] > MAX_HEADERS_TOTAL:
            raise ArchiveError(f"refusing archive: extended headers over {MAX_HEADERS_TOTAL} bytes in all")
        if budget[1] >= MAX_HEADER_CHAIN:
            raise ArchiveError(f"refusing archive: more than {MAX_HEADER_CHAIN} extended headers in a row")
        budget[1] += 1
        try:
            return super()._proc_member(tar)
        finally:
            budget[1] -= 1

    def _proc_gnusparse_10(self, next, pax_headers, tar):  # noqa: A002 (tarfile's signature)
        raise ArchiveError(f"refusing sparse member in archive: {_show(next.name)}")


def _members(raw) -> tarfile.TarFile:
    """Iterate the members of the gzip tarball open as ``raw`` from its start, one at a time."""
    raw.seek(0)
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    return tarfile.open(fileobj=_Bounded(gz), mode="r:", tarinfo=_TarInfo)


def _stream(tar: tarfile.TarFile):
    last = -1
    while True:
        member = tar.next()
        tar.members.clear()  # tarfile keeps every member it read; we never look back
        if member is None:
            return
        if member.offset <= last or member.offset_data < member.offset:
            raise ArchiveError(f"refusing archive: member {_show(member.name)} does not follow the one "
                               "before it (offsets must only grow)")
        last = member.offset
        yield member


# -- the check pass ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One checked member: its normalized name, kind, size (files) and target (symlinks)."""

    name: str
    kind: str
    size: int = 0
    target: str = ""


@dataclass
class Plan:
    """Everything an archive will write, checked; ``total_bytes`` is what the files hold. ``data``
    holds the files' bytes (by entry index) when they all fit :data:`KEEP_BYTES`, else None and the
    write pass reads the archive again."""

    entries: list[Entry] = field(default_factory=list)
    total_bytes: int = 0
    data: dict[int, bytes] | None = field(default_factory=dict)

    @property
    def footprint(self) -> int:
        """Bytes the tree takes on a tmpfs: each file rounded up to a page, a page per entry."""
        pages = sum(-(-entry.size // 4096) for entry in self.entries if entry.kind == _FILE)
        return (pages + len(self.entries)) * 4096


def _kind(member: tarfile.TarInfo) -> str:
    if member.sparse is not None:
        raise ArchiveError(f"refusing sparse member in archive: {_show(member.name)}")
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        return _FILE
    if member.isdir():
        return _DIR
    if member.issym():
        return _LINK
    if member.islnk():
        raise ArchiveError(f"refusing hard link in archive: {_show(member.name)}")
    if member.ischr() or member.isblk() or member.isfifo():
        raise ArchiveError(f"refusing device or special file in archive: {_show(member.name)}")
    raise ArchiveError(f"refusing member of unsupported type {member.type!r}: {_show(member.name)}")


def normalize(name: str) -> str:
    """The member name as a relative path with no empty or ``.`` parts; raises on anything unsafe."""
    if len(name) > MAX_NAME:
        raise ArchiveError(f"refusing member name of {len(name)} characters in archive: {_show(name)}")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"refusing absolute path in archive: {_show(name)}")
    if "\x00" in name:
        raise ArchiveError(f"refusing member name with a NUL byte in archive: {_show(name)}")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts or ".." in name.replace("\\", "/").split("/"):
        raise ArchiveError(f"refusing path with '..' in archive: {_show(name)}")
    if not parts:
        raise ArchiveError(f"refusing member with an empty name in archive: {_show(name)}")
    if any(len(part) > MAX_COMPONENT for part in parts):
        raise ArchiveError(f"refusing member name with a part over {MAX_COMPONENT} characters: {_show(name)}")
    return "/".join(parts)


def check_member(member: tarfile.TarInfo) -> Entry:
    """The :class:`Entry` for one member, or :class:`ArchiveError` if it is unsafe on its own."""
    kind = _kind(member)
    name = normalize(member.name)
    if member.size < 0:  # a PAX size record sets it after the header checks; refused here as well
        raise ArchiveError(f"refusing member with a negative size ({member.size}): {_show(name)}")
    if kind == _FILE and member.size > MAX_MEMBER_BYTES:
        raise ArchiveError(f"refusing oversized member {_show(name)} ({member.size} bytes)")
    if kind != _LINK:
        return Entry(name, kind, member.size if kind == _FILE else 0)
    target = member.linkname
    if not target or len(target) > MAX_NAME or "\x00" in target:
        raise ArchiveError(f"refusing symlink with an empty, NUL or over-long target: {_show(name)}")
    if target.startswith("/"):
        raise ArchiveError(f"refusing symlink with absolute target: {_show(name)} -> {_show(target)}")
    return Entry(name, kind, 0, target)


def _data_filter(member: tarfile.TarInfo) -> None:
    """Python's own ``data`` filter (3.11.4+, 3.10.12+), as a second opinion on each symlink (for
    files and folders it checks what :func:`check_member` already refuses, at a ``realpath`` each)."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return
    try:
        data_filter(member, _NOWHERE)
    except tarfile.FilterError as err:
        raise ArchiveError(f"refusing member {_show(member.name)}: {err}") from None


class _Namespace:
    """The tree an archive describes, built member by member, refusing conflicts as they appear."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}  # explicit members
        self.implied: set[str] = set()  # folders that hold a member
        self.links: dict[str, str] = {}
        self.steps = 0

    def add(self, entry: Entry) -> None:
        name = entry.name
        if name in self.kinds:
            raise ArchiveError(f"refusing duplicate member in archive: {_show(name)}")
        if entry.kind != _DIR and name in self.implied:
            raise ArchiveError(f"refusing member that is also a folder of other members: {_show(name)}")
        parent = posixpath.dirname(name)
        while parent and parent not in self.implied:
            if self.kinds.get(parent, _DIR) != _DIR:
                what = "symlink" if self.kinds[parent] == _LINK else "regular file"
                raise ArchiveError(f"refusing member under a {what} member: {_show(name)}")
            self.implied.add(parent)
            parent = posixpath.dirname(parent)
        self.kinds[name] = entry.kind
        if entry.kind == _LINK:
            self.links[name] = entry.target

    def check_links(self) -> None:
        resolved: dict[str, list[str]] = {}
        for name in self.links:
            self._resolve_link(name, resolved, [])

    def _resolve_link(self, name: str, resolved: dict[str, list[str]], chain: list[str]) -> list[str]:
        """Where the link ``name`` points, as parts from the archive root, following every link."""
        if name in resolved:
            return resolved[name]
        if name in chain:
            raise ArchiveError(f"refusing symlink loop in archive: {_show(name)}")
        if len(chain) >= MAX_LINK_HOPS:
            raise ArchiveError(f"refusing symlink chain longer than {MAX_LINK_HOPS}: {_show(name)}")
        chain.append(name)
        parts = name.split("/")[:-1]
        for part in self.links[name].split("/"):
            self.steps += 1
            if self.steps > MAX_LINK_STEPS or len(parts) > MAX_DEPTH:
                raise ArchiveError(f"refusing archive whose symlinks are too deep or too many: {_show(name)}")
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    target = self.links[chain[0]]
                    raise ArchiveError(
                        f"refusing symlink leaving the archive: {_show(chain[0])} -> {_show(target)}"
                    )
                parts.pop()
                continue
            parts.append(part)
            here = "/".join(parts)
            if here in self.links:
                parts = list(self._resolve_link(here, resolved, chain))
        chain.pop()
        resolved[name] = parts
        return parts


def scan(raw) -> Plan:
    """Check every member of the archive open as ``raw``; the :class:`Plan` of what it will write."""
    plan, space, links = Plan(), _Namespace(), []
    tar = _members(raw)
    for member in _stream(tar):
        if len(plan.entries) >= MAX_MEMBERS:
            raise ArchiveError(f"refusing archive with more than {MAX_MEMBERS} members")
        entry = check_member(member)
        if entry.kind == _LINK:
            links.append(member)
        plan.total_bytes += entry.size
        if plan.total_bytes > MAX_TOTAL_BYTES:
            raise ArchiveError(f"refusing archive that unpacks to more than {MAX_TOTAL_BYTES} bytes")
        space.add(entry)
        plan.entries.append(entry)
        if entry.kind == _FILE and plan.data is not None:
            if plan.total_bytes > KEEP_BYTES:
                plan.data = None
            else:
                data = _read_all(tar.extractfile(member)) if entry.size else b""
                plan.data[len(plan.entries) - 1] = data
    space.check_links()
    for member in links:
        _data_filter(member)
    return plan


def _read_all(source) -> bytes:
    return b"".join(iter(lambda: source.read(CHUNK), b"")) if source is not None else b""


# -- the write pass ------------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Tree:
    """Creates entries under ``dest`` through directory descriptors, never following a link. The
    descriptors of the current folder and its parents stay open (members come sorted by folder)."""

    def __init__(self, dest: str) -> None:
        self._stack: list[tuple[str, int]] = [("", os.open(dest, _DIR_FLAGS))]
        self._made: set[str] = set()

    def close(self) -> None:
        while self._stack:
            os.close(self._stack.pop()[1])

    def folder(self, path: str) -> int:
        """A descriptor of folder ``path`` (made when missing); valid until the next call."""
        while len(self._stack) > 1 and not (path + "/").startswith(self._stack[-1][0] + "/"):
            os.close(self._stack.pop()[1])
        here, fd = self._stack[-1]
        rest = path[len(here) :].lstrip("/")
        for part in rest.split("/") if rest else []:
            here = f"{here}/{part}" if here else part
            if here not in self._made:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                self._made.add(here)
            fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            self._stack.append((here, fd))
        return fd

    def write(self, entry: Entry, source) -> None:
        parent, leaf = posixpath.split(entry.name)
        where = self.folder(parent)
        if entry.kind == _DIR:
            self.folder(entry.name)
            return
        fd = os.open(leaf, _FILE_FLAGS, 0o644, dir_fd=where)
        written = 0
        with os.fdopen(fd, "wb") as out:
            while source is not None:
                chunk = source.read(CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                out.write(chunk)
        if written != entry.size:
            raise ArchiveError(f"member {_show(entry.name)} holds {written} bytes, not {entry.size}")

    def link(self, entry: Entry) -> None:
        parent, leaf = posixpath.split(entry.name)
        os.symlink(entry.target, leaf, dir_fd=self.folder(parent))


def _write(raw, plan: Plan, dest: str) -> None:
    tree = _Tree(dest)
    try:
        if plan.data is not None:
            _write_kept(tree, plan)
        else:
            _write_streamed(tree, raw, plan)
        for entry in plan.entries:
            if entry.kind == _LINK:
                tree.link(entry)
    finally:
        tree.close()


def _write_kept(tree: _Tree, plan: Plan) -> None:
    for index, entry in enumerate(plan.entries):
        if entry.kind != _LINK:
            tree.write(entry, io.BytesIO(plan.data[index]) if entry.kind == _FILE else None)


def _write_streamed(tree: _Tree, raw, plan: Plan) -> None:
    """Read the archive again; each member must be the one checked at the same place."""
    tar = _members(raw)
    count = 0
    for member in _stream(tar):
        if count >= len(plan.entries) or check_member(member) != plan.entries[count]:
            raise ArchiveError("refusing archive that changed while it was being read")
        entry = plan.entries[count]
        count += 1
        if entry.kind != _LINK:
            tree.write(entry, tar.extractfile(member) if entry.kind == _FILE else None)
    if count != len(plan.entries):
        raise ArchiveError("refusing archive that changed while it was being read")


# -- the entry point -----------------------------------------------------------------------------


def open_regular(path: str):
    """``path`` open for reading in binary, refused unless it is a regular file (a FIFO or a device
    named ``x.tar.gz`` would block or never end); opening never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise ArchiveError(f"{path}: not a readable recording archive ({err.strerror or err})") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArchiveError(f"{path}: not a recording archive (not a regular file)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


class SafeArchive:
    """A recording archive open for a safe extraction: ``plan`` (checked on opening), ``extract``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._raw = open_regular(path)
        try:
            size = os.fstat(self._raw.fileno()).st_size
            if size > MAX_ARCHIVE_BYTES:
                raise ArchiveError(f"{path}: refusing a {size}-byte archive (more than {MAX_ARCHIVE_BYTES})")
            self.plan = self._guard(scan)
        except BaseException:
            self._raw.close()
            raise

    def _guard(self, step, *args):
        try:
            return step(self._raw, *args)
        except ArchiveError as err:
            raise ArchiveError(f"{self.path}: {err}") from None
        except (tarfile.TarError, EOFError, OSError, zlib.error, gzip.BadGzipFile) as err:
            detail = getattr(err, "strerror", None) or err
            raise ArchiveError(f"{self.path}: not a readable recording archive ({detail})") from err
        except (RecursionError, UnicodeError, ValueError, OverflowError) as err:
            name = type(err).__name__
            raise ArchiveError(f"{self.path}: not a readable recording archive ({name})") from None

    def extract(self, dest: str) -> None:
        """Write the checked members into the existing, empty directory ``dest``."""
        if os.listdir(dest):
            raise ArchiveError(f"refusing to extract into a folder that is not empty: {dest}")
        self._guard(_write, self.plan, dest)
        self._guard(lambda _raw: _verify_links(dest))

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> SafeArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def extract_archive(path: str, dest: str) -> Plan:
    """Extract the archive at ``path`` into the existing, empty directory ``dest``, refusing anything
    unsafe before writing anything; returns the checked :class:`Plan`."""
    with SafeArchive(path) as archive:
        archive.extract(dest)
        return archive.plan


def _verify_links(dest: str) -> None:
    """A last look, by the kernel's own resolution: every symlink written resolves inside ``dest``."""
    root = os.path.realpath(dest)
    for folder, dirs, files in os.walk(dest):
        for entry in dirs + files:
            full = os.path.join(folder, entry)
            if os.path.islink(full):
                real = os.path.realpath(full)
                if real != root and not real.startswith(root + os.sep):
                    rel = os.path.relpath(full, dest)
                    raise ArchiveError(f"refusing member that leaves the archive through a symlink: {rel!r}")
