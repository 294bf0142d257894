"""Several inputs, or one big file cut in parts, read by worker processes, and what they found merged.

Per-rank and per-node files are the common case of a big job's logs, and one process reads about 80 MB/s:
:func:`plan` gives each file (and each part of a file over :data:`SPLIT_BYTES`) to a worker of a ``fork``
pool, when the inputs are big enough for a second process to pay (:data:`PARALLEL_BYTES`: forking and
sending a state back cost a few tens of milliseconds; measured on this project's 2-core machine: a 36 MB
4096-rank init log took 1.7 s either way (its states are big to send), a 200 MB log 1.7 s instead of 2.7 s,
a 96 MB restarting job 1.6 s instead of 2.5 s) and cores are free: the workers are the CPUs this
process may run on (``psutil``'s CPU affinity) less the processes running on them right now (a second
process was measured to give nothing on a busy 2-core machine). ``TOPODOC_JOBS=N`` sets the number (``1``:
one process). Each worker fills its own :class:`LogState`; they are merged in input order
(:meth:`LogState.merge`), so the result is the one-process result. A file is cut only at the start of a
line that holds an NCCL record (never inside a record torn across lines), and each part counts the lines
before it to number its evidence as the whole file does. Compressed, UTF-16 and piped inputs are read by
the main process.
"""

from __future__ import annotations

import dataclasses
import io
import os
import threading
from typing import BinaryIO, NamedTuple

from topodoc.logmodel import InputStats
from topodoc.parsers.nccl_log import facts
from topodoc.parsers.nccl_log.scan import CHUNK_BYTES, Scanner
from topodoc.parsers.nccl_log.state import LogState

PARALLEL_BYTES = 48 << 20  # measured: below this a second process does not pay
SPLIT_BYTES = 16 << 20  # a file this big is cut in parts of about this size (small parts: small states)
MAX_JOBS = 64  # TOPODOC_JOBS beyond this is taken as this
_SEEK = 4 << 20  # how far past a cut point a record start is looked for
_INFO = b" NCCL INFO "


class Unit(NamedTuple):
    """One piece of work: input ``index``; ``path`` a plain file (bytes ``start`` to ``end``, ``end`` None:
    to its end) or ``None`` for an input read whole by the main process (a stream, ``.gz``, UTF-16)."""

    index: int
    path: str | None
    start: int = 0
    end: int | None = None
    lines_before: int | None = 0  # lines of the file before ``start`` (evidence is numbered as in the whole
    # file); None: not counted yet (:func:`counted`; read here in order, the part before tells)
    info_before: bool = False  # an NCCL INFO record came before ``start``


def workers(total_bytes: int) -> int:
    """How many processes pay for ``total_bytes`` of input (1: read them here)."""
    forced = os.environ.get("TOPODOC_JOBS", "")
    if forced.isdigit() and int(forced) > 0:
        return min(int(forced), MAX_JOBS)
    if total_bytes < PARALLEL_BYTES:
        return 1
    try:
        import psutil

        cpus = len(psutil.Process().cpu_affinity() or ()) or (os.cpu_count() or 1)
    except (ImportError, AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, cpus - _busy()))


def _busy() -> int:
    """Other runnable processes right now (``/proc/loadavg``'s running count less this one): the load
    average lags by a minute, so a run just after another would wrongly see the machine busy."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            running = int(f.read().split()[3].split("/")[0])
        return max(0, running - 1)
    except (OSError, ValueError, IndexError):
        try:
            import psutil

            return round(psutil.getloadavg()[0])
        except (ImportError, AttributeError, OSError):
            return 0


def plan(items: list) -> list[Unit]:
    """The units of ``items`` (paths or ``(name, stream)`` pairs), in input order: a plain file over
    :data:`SPLIT_BYTES` is cut every :data:`SPLIT_BYTES` or so, whatever the number of workers, so the
    analysis never depends on the machine's load."""
    units: list[Unit] = []
    for index, item in enumerate(items):
        if not isinstance(item, str) or not _plain_file(item):
            units.append(Unit(index, None))
            continue
        size = os.path.getsize(item)
        parts = size // SPLIT_BYTES + 1
        units += _cut(index, item, size, parts) if parts > 1 else [Unit(index, item)]
    return units


def pool_size(units: list[Unit]) -> int:
    """Worker processes for ``units``: 1 (read here) unless they are all plain files and big enough, and
    this process runs no other thread (``fork`` copies locks other threads may hold: the agent, a caller's
    thread pool)."""
    if len(units) < 2 or any(u.path is None for u in units) or threading.active_count() > 1:
        return 1
    total = sum((u.end if u.end is not None else os.path.getsize(u.path)) - u.start for u in units)
    jobs = min(workers(total), len(units))
    if jobs > 1:
        import multiprocessing

        if "fork" not in multiprocessing.get_all_start_methods():
            return 1  # Windows: a spawned worker would import everything again; not worth it
    return jobs


def analyze_units(units: list[Unit], jobs: int, extra: tuple[str, ...], names: list[str],
                  here) -> tuple[LogState, list]:
    """Read the units and merge each result as it comes, in unit order: with ``here`` (an iterator of
    results made by the caller) when ``jobs`` is 1, else this process and a pool of ``jobs - 1`` workers
    (:func:`_shared`), so at most one finished part per worker waits beside the merged state."""
    if jobs < 2:
        return merge(here, names)
    import multiprocessing  # only where a pool starts: a small log never pays for the import

    context = multiprocessing.get_context("fork")
    units = counted(units)
    with context.Pool(jobs - 1) as pool:
        return merge(_shared(pool, units, jobs, extra), names)


def _shared(pool, units: list[Unit], jobs: int, extra: tuple[str, ...]):
    """The units' results in order: every ``jobs``-th unit read by this process (no copy of its state
    crosses a pipe), the others by the pool, handed out no further ahead than the next ``jobs`` units."""
    pending: dict[int, object] = {}
    for i, unit in enumerate(units):
        for j in range(i, min(len(units), i + jobs)):
            if j % jobs and j not in pending:
                pending[j] = pool.apply_async(read, (units[j], extra))
        yield read(unit, extra) if i % jobs == 0 else pending.pop(i).get()


def merge(results, names: list[str]) -> tuple[LogState, list]:
    """One state and one :class:`InputStats` per input from the units' results (in input order)."""
    state, stats = None, {}
    limits = (facts.PROC_LIMIT, facts.RANK_LIMIT)
    for index, part, part_stats in results:
        if state is None:
            state = part
        else:
            state.merge(part, limits)
        done = stats.get(index)
        if done is None:
            stats[index] = part_stats
        else:  # a later part of the same file: its line count already includes the lines before it
            stats[index] = InputStats(
                name=names[index], lines=part_stats.lines, nccl_lines=done.nccl_lines + part_stats.nccl_lines,
                bytes=done.bytes + part_stats.bytes, long_lines=done.long_lines + part_stats.long_lines,
            )
    return state if state is not None else LogState(), [stats[i] for i in sorted(stats)]


def read(unit: Unit, extra: tuple[str, ...], before: tuple[int, bool] | None = None
         ) -> tuple[int, LogState, InputStats]:
    """Read one file unit into a new state; ``before``: (lines, NCCL INFO record seen) before its start,
    for a unit not :func:`counted` (the previous part's end: its statistics' lines and state's
    ``info_seen``)."""
    if unit.lines_before is None:
        unit = unit._replace(lines_before=before[0], info_before=before[1])
    state = LogState()
    with open(unit.path, "rb") as raw:
        scanner = Scanner(state, unit.path, extra)
        if unit.start:
            raw.seek(unit.start)
            scanner.lines, scanner.seen_info, scanner.size = unit.lines_before, unit.info_before, unit.start
        stream = raw if unit.end is None else _Range(raw, unit.end - unit.start)
        stats = scanner.run(stream)
    return unit.index, state, dataclasses.replace(stats, bytes=stats.bytes - unit.start)


def _cut(index: int, path: str, size: int, parts: int) -> list[Unit]:
    """``parts`` units of one file, cut where a line holding an NCCL record starts."""
    cuts = [0]
    with open(path, "rb") as raw:
        for k in range(1, parts):
            at = _record_start(raw, size * k // parts)
            if at is not None and at > cuts[-1]:
                cuts.append(at)
    ends = [*cuts[1:], None]
    return [Unit(index, path, start, end, None if start else 0)
            for start, end in zip(cuts, ends, strict=True)]


def counted(units: list[Unit]) -> list[Unit]:
    """``units`` with the lines before each part counted (one pass of ``bytes.count`` per cut file, up to
    its last cut): what workers need, each reading its part alone. One process reading the parts in order
    takes them from the part before instead (:func:`read`'s ``before``), with no pass of its own."""
    out: list[Unit] = []
    counts: dict[int, dict[int, tuple[int, bool]]] = {}
    for unit in units:
        if unit.lines_before is not None:
            out.append(unit)
            continue
        if unit.index not in counts:
            cuts = [u.start for u in units if u.index == unit.index]
            counts[unit.index] = dict(zip(cuts, _lines_before(unit.path, cuts), strict=True))
        lines, seen = counts[unit.index][unit.start]
        out.append(unit._replace(lines_before=lines, info_before=seen))
    return out


def _lines_before(path: str, cuts: list[int]) -> list[tuple[int, bool]]:
    """(lines, NCCL INFO record seen) before each cut: one pass of ``bytes.count`` up to the last cut."""
    out, lines, seen, pos, carry = [(0, False)], 0, False, 0, b""
    with open(path, "rb") as raw:
        for cut in cuts[1:]:
            while pos < cut:
                data = raw.read(min(CHUNK_BYTES * 8, cut - pos))
                if not data:
                    break
                lines += data.count(b"\n")
                seen = seen or _INFO in carry + data
                carry, pos = data[-len(_INFO) :], pos + len(data)
            out.append((lines, seen))
    return out


def _record_start(raw: BinaryIO, near: int) -> int | None:
    """The first line at or after ``near`` (past the line ``near`` is in) a part may start at, within
    :data:`_SEEK` bytes: read 64 KiB first, then eight times more while none is found (the same answer
    as reading ``_SEEK`` at once, without reading 4 MiB per cut)."""
    size = 64 << 10
    while True:
        raw.seek(near)
        data = raw.read(size)
        found = _record_start_in(data)
        if found is not None:
            return near + found
        if size >= _SEEK or len(data) < size:
            return None
        size = min(size * 8, _SEEK)


def _record_start_in(data: bytes) -> int | None:
    """Where the first whole line after ``data``'s first newline that holds an INFO record starts (not a
    return-code chain, not right after a WARN line, whose chain lines follow), or ``None``: found by
    jumping from one INFO marker to the next, not by walking every line of the noise between."""
    pos = data.find(b"\n") + 1
    if pos == 0:
        return None
    while True:
        hit = data.find(_INFO, pos)
        if hit < 0:
            return None
        start = data.rfind(b"\n", 0, hit) + 1  # (>= pos: data[pos - 1] is a newline)
        end = data.find(b"\n", hit)
        if end < 0:
            return None  # the last line, not whole
        before = data[data.rfind(b"\n", 0, start - 1) + 1 : start - 1]  # the line above it
        if b" -> " not in data[start:end] and b"WARN" not in before:
            return start
        pos = end + 1


def _plain_file(path: str) -> bool:
    """A regular, uncompressed, not UTF-16 file another process can open and seek."""
    if path == "-" or path.endswith(".gz") or not os.path.isfile(path):
        return False
    with open(path, "rb") as raw:
        head = raw.read(64)
    return not (head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) >= 16 and head.count(0) > 8))


class _Range(io.RawIOBase):
    """The next ``length`` bytes of ``raw``."""

    def __init__(self, raw: BinaryIO, length: int) -> None:
        self._raw, self._left = raw, length

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes straight from ``raw`` (no copy through a buffer: the scanner reads 1 MiB)."""
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._raw.read(size) if size > 0 else b""
        self._left -= len(data)
        return data

    def readinto(self, buffer) -> int:
        """Into ``buffer`` straight from ``raw`` (the scanner's C core reads each block in place)."""
        if self._left <= 0:
            return 0
        with memoryview(buffer) as view, view.cast("B") as flat, flat[: min(len(flat), self._left)] as part:
            got = self._raw.readinto(part) or 0
        self._left -= got
        return got
