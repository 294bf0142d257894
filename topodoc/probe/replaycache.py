"""The replay cache: each recording extracted once per user, reused by every later run and process.

Layout, under ``$XDG_CACHE_HOME/topodoc/replay`` (``~/.cache/topodoc/replay`` when unset; every
folder mode 0700, owned by this user, never a symlink, else no cache is used)::

    <sha256>.lock        flock: shared while a process uses the entry, exclusive to build or evict it
    <sha256>/COMPLETE    written last: format, digest, what the tree holds (files, bytes...)
    <sha256>/tree/       the recording, extracted by the safe extractor (meta.json, fs/, tapes)
    <sha256>/snapshot.json   the Snapshot collected from it, keyed by the code that collected it:
                         a JSON header line (with the SHA-256 of the rest), then the Snapshot
    <sha256>/member-commands.json   the archive's ``commands.json`` member as its bytes were (or that
                         the archive has none): a JSON header line (with the SHA-256 of the rest), then
                         the bytes; a warm ``diagnose --from`` reads the recorded command outputs here
                         instead of decompressing the archive (:func:`cached_member`)
    .tmp-<sha256>-...    an entry being built (a dead builder's is removed by the next build of any
                         entry: a builder holds its digest's lock)

The key is the SHA-256 of the archive's bytes, so a different archive never meets another's entry.
An entry is built in a temporary folder (:func:`topodoc.probe.archive.SafeArchive.extract`, every
check of the hostile-archive work kept), its marker written last, then renamed into place: a process
killed half-way leaves no entry that looks complete. An entry is used only when its marker names its
digest and, before its tree is handed out, the tree holds exactly the files, bytes, folders and links
the marker lists and hashes to the marker's ``content`` digest (SHA-256 over every path, kind, file's
bytes and link target, checked once per process): a same-size edit is found, and the entry rebuilt.
Once built the tree is read-only (files 0444, folders 0555: the pytest plugin's ``sysfs_root`` is this
tree) and made writable again only to be removed. Each use touches the marker (the LRU clock);
after a build, the least recently used entries no process holds are removed until the cache fits
:data:`MAX_BYTES` (``TOPODOC_REPLAY_CACHE_MB``; 0 turns the cache off).

The digests catch edits and damage, not a determined attacker running as the same user (who could
rewrite the digests, or topodoc itself).

``snapshot.json`` holds the Snapshot ``collect`` returned for the tree (used only when its bytes hash to
the digest in its header line), with the SHA-256 of every
topodoc (and ``regex``) source file the collecting process had loaded, its Python version and
topodoc version: a later process uses it only when all of those are unchanged, so it is the Snapshot
``collect`` would return (the ``source`` label, which ``collect`` only copies in, is set by the
caller).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import sys
import time

from topodoc import __version__, jsontext, usercache

FORMAT = 2  # 2: the marker's content digest, snapshot.json's header line
MARKER = "COMPLETE"
TREE = "tree"
SNAPSHOT = "snapshot.json"
TMP = ".tmp-"
ENV_MB = "TOPODOC_REPLAY_CACHE_MB"
MAX_BYTES = 256 * 1024 * 1024
LOCK_WAIT_S = 10.0  # a build takes about a second; past this the process replays without the cache
MAX_MARKER = 4096
MAX_SNAPSHOT = 64 * 1024 * 1024
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024  # archive.MAX_ARCHIVE_BYTES (not imported: it loads tarfile)

_held: dict[str, int] = {}  # entry folder -> descriptor of its lock, shared, held for the process
_checked: set[str] = set()  # entry folders whose tree this process found intact (while holding them)


def max_bytes() -> int:
    raw = os.environ.get(ENV_MB, "").strip()
    if raw.isdigit() and len(raw) < 9:
        return int(raw) * 1024 * 1024
    return MAX_BYTES


def cache_root() -> str | None:
    """The replay cache folder (``replay/`` in :func:`topodoc.usercache.folder`, same rules), made 0700
    when missing; None when it cannot be used safely."""
    if max_bytes() == 0:
        return None
    top = usercache.folder()
    if top is None:
        return None
    folder = os.path.join(top, "replay")
    if not usercache.private_folder(folder):
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


# -- locks ---------------------------------------------------------------------------------------


def _lock(root: str, digest: str, exclusive: bool, wait_s: float = LOCK_WAIT_S) -> int | None:
    """A descriptor of ``<digest>.lock`` holding the lock, or None when it was not had in ``wait_s``.
    An evictor unlinks the file while holding it, so the lock counts only on the file still there."""
    path = os.path.join(root, digest + ".lock")
    deadline = time.monotonic() + wait_s
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        if not _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline):
            os.close(fd)
            return None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _flock(fd: int, kind: int, deadline: float) -> bool:
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _hold(entry: str, fd: int) -> None:
    """Keep the shared lock on ``entry`` until the process ends (an evictor skips it meanwhile)."""
    old = _held.get(entry)
    _held[entry] = fd
    if old is not None and old != fd:
        os.close(old)


# -- entries -------------------------------------------------------------------------------------


def _read_small(path: str, cap: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(cap + 1)
    return data if len(data) <= cap else None


def _marker(entry: str, digest: str) -> dict | None:
    """The entry's marker when it is complete and names ``digest``, else None."""
    raw = _read_small(os.path.join(entry, MARKER), MAX_MARKER)
    try:
        marker = jsontext.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != FORMAT or marker.get("digest") != digest:
        return None
    counts = [marker.get(k) for k in ("files", "bytes", "dirs", "links", "footprint")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return None
    if not isinstance(marker.get("content"), str) or len(marker["content"]) != 64:
        return None
    try:
        info = os.lstat(os.path.join(entry, TREE))
    except OSError:
        return None
    return marker if stat.S_ISDIR(info.st_mode) else None


def tree_counts(tree: str) -> dict[str, int]:
    """Files, their bytes, folders and symlinks under ``tree`` (not following links); anything else
    (a FIFO, a device) counts as ``other``."""
    counts = {"files": 0, "bytes": 0, "dirs": 0, "links": 0, "other": 0}
    todo = [tree]
    while todo:
        with os.scandir(todo.pop()) as entries:
            for item in entries:
                if item.is_symlink():
                    counts["links"] += 1
                elif item.is_dir(follow_symlinks=False):
                    counts["dirs"] += 1
                    todo.append(item.path)
                elif item.is_file(follow_symlinks=False):
                    counts["files"] += 1
                    counts["bytes"] += item.stat(follow_symlinks=False).st_size
                else:
                    counts["other"] += 1
    return counts


def tree_digest(tree: str) -> str:
    """SHA-256 over every path under ``tree`` in sorted order, its kind, and a file's bytes or a link's
    target (not following links); a FIFO or device makes it raise OSError."""
    digest = hashlib.sha256()
    todo = [""]
    while todo:
        rel = todo.pop()
        with os.scandir(os.path.join(tree, rel)) as entries:
            items = sorted(entries, key=lambda item: item.name)
        for item in items:
            path = f"{rel}/{item.name}" if rel else item.name
            if item.is_symlink():
                digest.update(b"L\0%s\0%s\0" % (os.fsencode(path), os.fsencode(os.readlink(item.path))))
            elif item.is_dir(follow_symlinks=False):
                digest.update(b"D\0%s\0" % os.fsencode(path))
                todo.append(path)
            elif item.is_file(follow_symlinks=False):
                digest.update(b"F\0%s\0" % os.fsencode(path))
                digest.update(_file_sha256(item.path))
            else:
                raise OSError(errno.EINVAL, f"not a file, folder or link: {path}")
    return digest.hexdigest()


def _file_sha256(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.digest()


def _intact(entry: str, marker: dict) -> bool:
    """The tree holds what the marker lists (counts first: cheap) and hashes to its content digest."""
    tree = os.path.join(entry, TREE)
    try:
        found = tree_counts(tree)
        if found["other"] or any(found[k] != marker[k] for k in ("files", "bytes", "dirs", "links")):
            return False
        return tree_digest(tree) == marker["content"]
    except OSError:
        return False


def _seal(tree: str) -> None:
    """Files 0444 and folders 0555 under ``tree`` (and ``tree`` itself): nothing writes to a served tree
    by mistake (a test handed the pytest plugin's ``sysfs_root``). Links are left as they are."""
    for folder, dirs, files in os.walk(tree, topdown=False):
        for name, mode in [(f, 0o444) for f in files] + [(d, 0o555) for d in dirs]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, mode)
    os.chmod(tree, 0o555)


def _unseal(path: str) -> None:
    """Folders under ``path`` made 0700 again (not following links), so the tree can be removed."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
        os.chmod(path, 0o700)
    except OSError:
        return
    for folder, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                child = os.path.join(folder, name)
                if not os.path.islink(child):
                    os.chmod(child, 0o700)


def _touch(entry: str) -> None:
    with contextlib.suppress(OSError):
        os.utime(os.path.join(entry, MARKER))


def _remove(path: str) -> None:
    import shutil

    _unseal(path)
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.unlink(path)  # a file or link left where an entry belongs


def open_entry(root: str, digest: str, build=None, check_tree: bool = True) -> str | None:
    """The complete entry folder for ``digest``, held shared for the rest of the process; built with
    ``build(folder)`` (extract the archive into the empty ``folder``) when missing or damaged. None
    when there is none and no ``build``, or the lock was not had in time (the caller goes on without
    the cache). An :class:`~topodoc.probe.archive.ArchiveError` from ``build`` propagates."""
    entry = os.path.join(root, digest)
    for _attempt in range(3):
        fd = _lock(root, digest, exclusive=False)
        if fd is None:
            return None
        marker = _marker(entry, digest)
        if marker is not None and (not check_tree or entry in _checked or _intact(entry, marker)):
            if check_tree:
                _checked.add(entry)
            _touch(entry)
            _hold(entry, fd)
            return entry
        if entry in _held:  # this process held a damaged entry: give it up before rebuilding
            os.close(_held.pop(entry))
        _checked.discard(entry)
        os.close(fd)
        if build is None:
            return None
        fd = _lock(root, digest, exclusive=True)
        if fd is None:
            return None
        try:
            marker = _marker(entry, digest)
            if marker is None or not _intact(entry, marker):
                _build(root, digest, entry, build)
                _checked.add(entry)  # hashed as it was built: not hashed again by this process
                evict(root, keep=digest)
        finally:  # the next attempt takes the shared lock and checks the entry again
            os.close(fd)
    return None


def _build(root: str, digest: str, entry: str, build) -> None:
    """Extract into a new temporary folder, write the marker last, rename it into place. Runs with
    the entry's lock held exclusively, so any ``.tmp-<digest>-*`` left is a dead builder's."""
    import tempfile

    for name in os.listdir(root):
        if name.startswith(f"{TMP}{digest}-"):
            _remove(os.path.join(root, name))
    work = tempfile.mkdtemp(prefix=f"{TMP}{digest}-", dir=root)
    try:
        tree = os.path.join(work, TREE)
        os.mkdir(tree, 0o700)
        footprint = build(tree)
        counts = tree_counts(tree)
        marker = {"format": FORMAT, "digest": digest, "footprint": int(footprint), "topodoc": __version__,
                  "content": tree_digest(tree), **{k: counts[k] for k in ("files", "bytes", "dirs", "links")}}
        _seal(tree)
        _write_new(os.path.join(work, MARKER), json.dumps(marker).encode())
        _remove(entry)
        os.rename(work, entry)
    except BaseException:
        _remove(work)
        raise


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def evict(root: str, keep: str | None = None, limit: int | None = None) -> list[str]:
    """Remove least recently used entries no process holds until the cache fits ``limit`` bytes
    (:func:`max_bytes`); never ``keep``. Returns the digests removed."""
    limit = max_bytes() if limit is None else limit
    entries = []
    for name in os.listdir(root):
        entry = os.path.join(root, name)
        marker = _marker(entry, name) if len(name) == 64 else None
        if marker is None:
            continue
        try:
            used = os.stat(os.path.join(entry, MARKER)).st_mtime
            extra = os.stat(os.path.join(entry, SNAPSHOT)).st_size if os.path.exists(
                os.path.join(entry, SNAPSHOT)) else 0
        except OSError:
            continue
        entries.append((used, name, marker["footprint"] + extra))
    _drop_orphan_locks(root)
    _drop_dead_builds(root)
    total = sum(size for _used, _name, size in entries)
    removed = []
    for _used, name, size in sorted(entries):
        if total <= limit:
            break
        if name == keep or os.path.join(root, name) in _held:
            continue
        fd = _lock(root, name, exclusive=True, wait_s=0)
        if fd is None:
            continue  # in use by another process
        try:
            _remove(os.path.join(root, name))
            for other in os.listdir(root):
                if other.startswith(f"{TMP}{name}-"):
                    _remove(os.path.join(root, other))
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name + ".lock"))
        finally:
            os.close(fd)
        total -= size
        removed.append(name)
    return removed


def _drop_dead_builds(root: str) -> None:
    """Remove ``.tmp-<digest>-*`` folders whose builder is gone (killed): a live builder holds its
    digest's lock exclusively, so a lock had here without waiting means nobody is building it."""
    for name in os.listdir(root):
        digest = name[len(TMP) : len(TMP) + 64]
        if not name.startswith(TMP) or len(digest) != 64 or os.path.join(root, digest) in _held:
            continue
        fd = _lock(root, digest, exclusive=True, wait_s=0)
        if fd is None:
            continue
        try:
            _remove(os.path.join(root, name))
        finally:
            os.close(fd)
        if not os.path.lexists(os.path.join(root, digest)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, digest + ".lock"))


def _drop_orphan_locks(root: str) -> None:
    """Remove the lock files of digests that have no entry (an archive refused as unsafe, a lookup
    that found nothing) and that no process holds."""
    for name in os.listdir(root):
        digest = name[: -len(".lock")]
        if not name.endswith(".lock") or len(digest) != 64 or os.path.lexists(os.path.join(root, digest)):
            continue
        fd = _lock(root, digest, exclusive=True, wait_s=0)
        if fd is None:
            continue
        try:
            if not os.path.lexists(os.path.join(root, digest)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(root, name))
        finally:
            os.close(fd)


# -- the collected Snapshot ----------------------------------------------------------------------


class DigestError(ValueError):
    """The archive cannot be read to hash it (the same one line :class:`ArchiveError` would give)."""


def file_digest(path: str) -> str:
    """SHA-256 of a recording archive's bytes; refused unless it is a regular file of at most
    :data:`topodoc.probe.archive.MAX_ARCHIVE_BYTES` (opening never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise DigestError(f"{path}: not a readable recording archive ({err.strerror or err})") from err
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DigestError(f"{path}: not a recording archive (not a regular file)")
        if info.st_size > MAX_ARCHIVE_BYTES:
            raise DigestError(
                f"{path}: refusing a {info.st_size}-byte archive (more than {MAX_ARCHIVE_BYTES})")
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        try:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        except OSError as err:
            raise DigestError(f"{path}: not a readable recording archive ({err.strerror or err})") from err
    return digest.hexdigest()


def cached_snapshot(digest: str):
    """``(Snapshot, recording name)`` collected before from the recording with this digest by the
    same code, or None. Loads neither the archive reader nor the collectors."""
    from topodoc import codec

    root = cache_root()
    try:
        entry = open_entry(root, digest, check_tree=False) if root else None
    except OSError:
        return None  # a filesystem without flock, a folder gone under us: replay without the cache
    stored = read_snapshot(entry) if entry else None
    if stored is None:
        return None
    try:
        return codec.snapshot_from_data(stored[0]), stored[1]  # an unsupported schema is a miss
    except codec.CodecError:
        return None


MEMBER_PREFIX = "member-"
MAX_MEMBER = 16 * 1024 * 1024


def cached_member(digest: str, name: str) -> tuple[bool, bytes | None]:
    """``(True, bytes)`` of the archive member ``name`` that :func:`store_member` kept for the recording
    with this digest (``(True, None)``: the archive has no such member), or ``(False, None)`` when nothing
    usable is kept (no entry, no file, a header or body that does not match). Loads no archive reader."""
    root = cache_root()
    try:
        entry = open_entry(root, digest, check_tree=False) if root else None
    except OSError:
        return False, None
    raw = _read_small(os.path.join(entry, MEMBER_PREFIX + name), MAX_MEMBER + MAX_MARKER) if entry else None
    head, sep, body = raw.partition(b"\n") if raw is not None else (b"", b"", b"")
    try:
        stored = jsontext.loads(head) if sep else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False, None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("name") != name:
        return False, None
    if stored.get("sha256") != hashlib.sha256(body).hexdigest():
        return False, None
    if not isinstance(stored.get("present"), bool):
        return False, None
    if not stored["present"]:
        return (True, None) if body == b"" else (False, None)
    return True, body


def store_member(digest: str, name: str, data: bytes | None) -> None:
    """Keep an archive member's bytes (None: the archive has no such member) beside the recording's
    cached tree, when that entry exists; nothing otherwise (a new file renamed over the old one)."""
    if data is not None and len(data) > MAX_MEMBER:
        return
    root = cache_root()
    try:
        entry = open_entry(root, digest, check_tree=False) if root else None
    except OSError:
        return
    if entry is None:
        return
    body = data or b""
    head = {"format": FORMAT, "name": name, "present": data is not None,
            "sha256": hashlib.sha256(body).hexdigest()}
    import tempfile

    try:
        fd, temp = tempfile.mkstemp(prefix=".member-", dir=entry)
        with os.fdopen(fd, "wb") as out:
            out.write(json.dumps(head, separators=(",", ":")).encode() + b"\n" + body)
        os.replace(temp, os.path.join(entry, MEMBER_PREFIX + name))
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(temp)


def code_fingerprint(files: list[str]) -> str | None:
    """SHA-256 over the paths and contents of ``files``; None when one cannot be read."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}|{__version__}".encode())
    for path in files:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        digest.update(f"\0{path}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


SOURCES = ("topodoc", "regex")  # our code, and the one library the collectors parse with


def loaded_sources() -> list[str]:
    """The Python source files of every topodoc and regex module this process has loaded (a new regex
    release changes its ``.py`` files, its version among them)."""
    files = set()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in SOURCES:
            path = getattr(module, "__file__", None)
            if path and path.endswith(".py"):
                files.add(os.path.abspath(path))
    return sorted(files)


def read_snapshot(entry: str) -> tuple[dict, str | None] | None:
    """The cached ``(snapshot data, recording name)`` of an entry when its bytes hash to the digest in
    its header line and the code that collected it is the code on disk now, else None."""
    raw = _read_small(os.path.join(entry, SNAPSHOT), MAX_SNAPSHOT)
    head, sep, body = raw.partition(b"\n") if raw is not None else (b"", b"", b"")
    try:
        stored = jsontext.loads(head) if sep else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return None
    if stored.get("sha256") != hashlib.sha256(body).hexdigest():
        return None  # edited or cut short since it was written
    files, name = stored.get("code_files"), stored.get("name")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    if stored.get("code") != code_fingerprint(files) or not isinstance(name, (str, type(None))):
        return None
    try:
        data = jsontext.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return (data, name) if isinstance(data, dict) else None


def write_snapshot(entry: str, data: dict, name: str | None) -> None:
    """Store a collected Snapshot's data next to the tree (a new file renamed over the old one)."""
    files = loaded_sources()
    code = code_fingerprint(files)
    if code is None:
        return
    body = json.dumps(data, separators=(",", ":")).encode()
    head = {"format": FORMAT, "code": code, "code_files": files, "name": name,
            "sha256": hashlib.sha256(body).hexdigest()}
    import tempfile

    try:
        fd, temp = tempfile.mkstemp(prefix=".snapshot-", dir=entry)
        with os.fdopen(fd, "wb") as out:
            out.write(json.dumps(head, separators=(",", ":")).encode() + b"\n" + body)
        os.replace(temp, os.path.join(entry, SNAPSHOT))
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(temp)
