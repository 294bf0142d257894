"""``df -h /dev/shm`` (and any ``df`` listing holding /dev/shm), ``mount | grep shm`` and ``/proc/mounts``
lines: the size, use and options of the shared-memory tmpfs NCCL's SHM transport allocates in.

Schema (:class:`ShmText`): ``mounts``, one :class:`ShmMount` per /dev/shm (or /run/shm) line as printed:
``origin`` (``df``, ``mount``, ``proc-mounts``), the source (``shm`` in a Docker container, ``tmpfs`` on a
host), sizes in bytes where the line gives them (``df -h`` sizes are powers of 1024 as GNU and busybox df
print them, ``7,8G`` read as 7.8G; plain ``df`` numbers are 1K blocks; ``mount`` gives a size only through a
``size=`` option, ``None`` otherwise: a tmpfs without one is half of RAM, which the line does not say),
``use_pct``, the options, the text as printed and the 1-based ``line``; ``others``: how many other df/mount
rows were read; ``unknown``: other lines with their numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class ShmParseError(ValueError):
    """No /dev/shm line."""


@dataclass(frozen=True, kw_only=True)
class ShmMount:
    origin: str  # "df", "mount" or "proc-mounts"
    source: str
    mountpoint: str
    fstype: str | None = None
    size_bytes: int | None = None
    used_bytes: int | None = None
    avail_bytes: int | None = None
    use_pct: int | None = None
    options: tuple[str, ...] = ()
    text: str  # the line as printed (a df row wrapped over two lines: both, joined by one space)
    line: int


@dataclass(frozen=True, kw_only=True)
class ShmText:
    mounts: tuple[ShmMount, ...] = ()
    others: int = 0
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


SHM_POINTS = ("/dev/shm", "/run/shm")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = r"\d{1,15}(?:[.,]\d{1,3})?[KMGTPB]?"
# "shm  64M  0  64M  0% /dev/shm"; wrapped: the source alone on one line, the numbers on the next
_DF_ROW = re.compile(
    rf"^(?P<source>\S{{1,400}})?\s+(?P<size>{_SIZE})\s+(?P<used>{_SIZE})\s+(?P<avail>{_SIZE})\s+"
    r"(?P<pct>\d{1,3}|-)%?\s+(?P<point>/\S{0,400})\s*$"
)
_DF_HEAD = re.compile(r"^Filesystem\s+(?P<unit>Size|1K-blocks|1k-blocks|\d+[KMG]?-blocks)\s+Used\s+Avail")
_MOUNT = re.compile(
    r"^(?P<source>\S{1,400}) on (?P<point>/\S{0,400}) type (?P<type>\S{1,40}) \((?P<opts>[^)]{0,800})\)"
)
_PROC = re.compile(
    r"^(?P<source>\S{1,400}) (?P<point>/\S{0,400}) (?P<type>tmpfs|ramfs|shm|devtmpfs|\w{1,20}) "
    r"(?P<opts>(?:rw|ro)(?:,\S{1,200}){0,40}) \d+ \d+\s*$"
)
_SOURCE_ONLY = re.compile(r"^\S{1,400}$")
_SIZE_OPT = re.compile(r"^size=(?P<n>\d{1,20})(?P<unit>[kmgtKMGT%]?)$")


def _bytes(text: str, block: int) -> int | None:
    """``64M`` / ``64.0M`` / ``7,8G`` (powers of 1024, as df -h prints), or a plain count of ``block``."""
    m = re.fullmatch(r"(\d{1,15}(?:[.,]\d{1,3})?)([KMGTPB]?)", text)
    if not m:
        return None
    number = float(m[1].replace(",", "."))
    return int(number * (_UNITS[m[2]] if m[2] else block))


def _block(head: str) -> int:
    if head == "Size":
        return 1
    m = re.fullmatch(r"(\d+)([KMG]?)-blocks", head, re.I)
    return int(m[1]) * _UNITS[m[2].upper()] if m else 1024


def _is_shm(point: str) -> bool:
    return point.rstrip("/") in SHM_POINTS


def _mount_size(options: tuple[str, ...]) -> int | None:
    for opt in options:
        m = _SIZE_OPT.match(opt)
        if m and m["unit"] != "%":
            return int(m["n"]) * _UNITS[m["unit"].upper()]
    return None


def looks_like(lines: list[str]) -> bool:
    for line in lines:
        text = line.rstrip()
        m = _DF_ROW.match(text)
        if m and _is_shm(m["point"]):
            return True
        m = _MOUNT.match(text) or _PROC.match(text)
        if m and _is_shm(m["point"]):
            return True
    return False


def parse(text: str) -> ShmText:
    mounts: list[ShmMount] = []
    unknown: list[tuple[int, str]] = []
    others = 0
    block = 1024  # df's default 1K blocks until a header says otherwise
    pending: tuple[int, str] | None = None  # a wrapped df row's source, alone on its line
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        head = _DF_HEAD.match(line)
        if head:
            block = _block(head["unit"])
            pending = None
            continue
        row = _DF_ROW.match(line)
        if row:
            wrapped = pending if not row["source"] else None
            source = row["source"] or (wrapped[1] if wrapped else "?")
            first = wrapped[0] if wrapped else number
            printed = f"{wrapped[1]} {line.strip()}" if wrapped else line
            pending = None
            if not _is_shm(row["point"]):
                others += 1
                continue
            mounts.append(ShmMount(
                origin="df", source=source, mountpoint=row["point"],
                size_bytes=_bytes(row["size"], block), used_bytes=_bytes(row["used"], block),
                avail_bytes=_bytes(row["avail"], block),
                use_pct=int(row["pct"]) if row["pct"].isdigit() else None, text=printed, line=first,
            ))
            continue
        found = _MOUNT.match(line)
        origin = "mount"
        if not found:
            found, origin = _PROC.match(line), "proc-mounts"
        if found:
            pending = None
            if not _is_shm(found["point"]):
                others += 1
                continue
            options = tuple(o for o in found["opts"].split(",") if o)
            mounts.append(ShmMount(
                origin=origin, source=found["source"], mountpoint=found["point"], fstype=found["type"],
                size_bytes=_mount_size(options), options=options, text=line, line=number,
            ))
            continue
        pending = (number, line.strip()) if _SOURCE_ONLY.match(line.strip()) else None
        unknown.append((number, line))
    if not mounts:
        raise ShmParseError("no /dev/shm line (df, mount or /proc/mounts)")
    return ShmText(mounts=tuple(mounts), others=others, unknown=tuple(unknown))
