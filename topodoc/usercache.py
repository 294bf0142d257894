"""Small files topodoc keeps per user under ``$XDG_CACHE_HOME/topodoc`` (``~/.cache/topodoc`` when unset).

Only what can be rebuilt lives here (the parsed failure catalogue, :mod:`topodoc.catalogue`; the code
``@dataclass`` compiled for topodoc's classes, :mod:`topodoc.dataclass_code`); a
cache that cannot be used safely is no cache: every folder is mode 0700, owned by this user and never a
symlink, files are read without following links and only when they are this user's regular files under a
size cap, and written to a new file (``O_EXCL``, mode 0600) that is then renamed over the old one, so a
reader never sees half a file. Every failure (read-only home, no ``HOME``, a foreign folder) answers
``None`` / ``False`` and the caller computes the value instead. The replay cache
(:mod:`topodoc.probe.replaycache`) keeps its entries under the same folder with the same rules.
"""

from __future__ import annotations

import contextlib
import os
import stat


def folder() -> str | None:
    """``$XDG_CACHE_HOME/topodoc`` (made 0700 when missing), or None when it cannot be used safely."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    top = os.path.join(base, "topodoc")
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return top if private_folder(top) else None


def private_folder(path: str) -> bool:
    """Make ``path`` (mode 0700) when missing; True when it is a folder of this user, not a link, and only
    this user's (group and other bits are cleared)."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError:
        return False
    return True


def read(name: str, cap: int) -> bytes | None:
    """The bytes of cache file ``name``, or None (missing, a link, not ours, over ``cap`` bytes)."""
    top = folder()
    if top is None:
        return None
    try:
        fd = os.open(os.path.join(top, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > cap:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(cap + 1)
        return data if len(data) <= cap else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write(name: str, data: bytes) -> bool:
    """Replace cache file ``name`` with ``data`` (new file, then rename); False when it could not be."""
    top = folder()
    if top is None:
        return False
    path = os.path.join(top, name)
    tmp = os.path.join(top, f".tmp-{name}-{os.getpid()}")
    with contextlib.suppress(OSError):
        os.unlink(tmp)  # a process of the same pid that was killed half-way
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
