"""NCCL log analyzer: ``NCCL_DEBUG=INFO`` output (any NCCL 2.1-2.30, any launcher) -> :class:`LogAnalysis`.

Public API:

- ``analyze(inputs, extra_literals=()) -> LogAnalysis``: ``inputs`` is a list of paths (``.gz`` is read
  through gzip, ``-`` is stdin) or ``(name, binary stream)`` pairs; each keeps its own name for
  ``file:line`` evidence; ``extra_literals`` are prefilter strings (the failure catalogue's).
- ``analyze_text(text, name="<text>") -> LogAnalysis`` for tests.
- :class:`NoNcclLinesError` when no input holds a single NCCL line.

The reader (:mod:`.scan`) streams blocks of whole lines split on `` NCCL INFO ``; :mod:`.plan` drops the
records with nothing to learn and counts connection lines under their :mod:`.channel` keys, and what is
left is read by the full grammar, once per distinct prefix and message; lines are decoded as UTF-8 with
``errors="replace"``, lines over ``scan.LINE_LIMIT`` read by their two ends and counted.
The grammar is :mod:`.prefix` (prefixes and launcher decorations), :mod:`.facts`
(messages), :mod:`.errors` (the error catalogue); the result is frozen by :mod:`.summary`
and :mod:`.derive`; conclusions drawn across lines (one node, NIC loopback, the first failure across
ranks, where a hang stopped, NCCL releases by message wording) by :mod:`.infer` and :mod:`.wordings`.
Output schema: :mod:`topodoc.logmodel`.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from topodoc.logmodel import InputStats, LogAnalysis
from topodoc.parsers.nccl_log import parallel
from topodoc.parsers.nccl_log.scan import Scanner
from topodoc.parsers.nccl_log.state import LogState
from topodoc.parsers.nccl_log.summary import build

Input = str | tuple[str, BinaryIO]


class LogInputError(ValueError):
    """An input could not be read (missing, unreadable, a broken .gz)."""


class NoNcclLinesError(LogInputError):
    """None of the inputs contains an NCCL line."""


def analyze(
    inputs: Iterable[Input], extra_literals: Iterable[str] = (), require_nccl: bool = True
) -> LogAnalysis:
    """Stream every input through one :class:`LogState` and freeze the result.

    ``extra_literals``: strings that make a line worth the full grammar wherever they appear in it (the
    failure catalogue's prefilters: a signature whose lines hold none of NCCL's own keywords names its
    literal here). An NCCL record holding one is read by the grammar even when its first word is not one
    the scanner looks for; any other line holding one is read as an error line (classified by
    :func:`.errors.classify`, like a PyTorch or CUDA error line). Connection lines and the records the
    fast path drops (collective calls, trees, ring orders) are never searched for them.

    ``require_nccl=False``: inputs without an NCCL line give an analysis too (``diagnose FILE`` reads every
    text this way, for the catalogue's known failures in any line) instead of :class:`NoNcclLinesError`."""
    items, extra = list(inputs), tuple(extra_literals)
    names = [item[0] if isinstance(item, tuple) else "<stdin>" if item == "-" else item for item in items]
    units = parallel.plan(items)
    jobs = parallel.pool_size(units)
    if jobs > 1:
        _check_readable(names)
    state, stats = parallel.analyze_units(units, jobs, extra, names, _read_here(units, items, extra))
    if require_nccl and not any(s.nccl_lines for s in stats):
        names = ", ".join(s.name for s in stats) or "no input"
        raise NoNcclLinesError(f"no NCCL lines found in {names}")
    return build(state, tuple(stats))


class _Utf16Reader(io.RawIOBase):
    """A UTF-16 byte stream (what PowerShell's ``>`` writes) read back as UTF-8 bytes, chunk by chunk."""

    def __init__(self, head: bytes, rest: BinaryIO, encoding: str) -> None:
        self._text = io.TextIOWrapper(_Joined(head, rest), encoding=encoding, errors="replace")

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._text.read(size if size is None or size < 0 else max(1, size // 2)).encode("utf-8")


class _Joined(io.RawIOBase):
    """``head`` (bytes already read to sniff the encoding) followed by the rest of ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._head[: len(buffer)] if self._head else self._stream.read(len(buffer))
        self._head = self._head[len(data):] if self._head else b""
        buffer[: len(data)] = data
        return len(data)


def _not_a_device(name: str, fd: int) -> None:
    """A character device other than a terminal (``/dev/zero``, ``/dev/urandom``) is endless: refused."""
    try:
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISCHR(mode) and not os.isatty(fd) and not _is_null(os.fstat(fd)):
        raise LogInputError(f"{name}: a device, not a log (it never ends)")


def _is_null(info: os.stat_result) -> bool:
    """``/dev/null`` (an empty input, not an endless one)."""
    try:
        return info.st_rdev == os.stat(os.devnull).st_rdev
    except OSError:
        return False


def _text_log(name: str, stream: BinaryIO) -> BinaryIO:
    """``stream``, refused when it starts with NUL bytes only (``/dev/zero`` through a pipe, a zero-filled
    gzip bomb, a disk image): binary data, not a text log, and maybe endless."""
    peek = getattr(stream, "peek", None)
    head = peek(_SNIFF)[:_SNIFF] if peek else b""
    if len(head) >= 64 and not head.strip(b"\0"):
        raise LogInputError(f"{name}: binary data (NUL bytes), not a text log")
    return stream


_SNIFF = 4096


def utf8_stream(stream: BinaryIO) -> BinaryIO:
    """``stream`` itself, or a UTF-8 view of it when it is UTF-16 (a BOM, or NUL in every other byte)."""
    peek = getattr(stream, "peek", None)
    head = peek(64)[:64] if peek else b""
    if not head:
        return stream if peek else _sniffed(stream)
    encoding = _utf16(head)
    return _Utf16Reader(b"", stream, encoding) if encoding else stream


def _sniffed(stream: BinaryIO) -> BinaryIO:
    head = stream.read(64)
    encoding = _utf16(head)
    if encoding:
        return _Utf16Reader(head, stream, encoding)
    return io.BufferedReader(_Joined(head, stream))


def _utf16(head: bytes) -> str | None:
    """The one UTF-16 detector every reader uses (:func:`topodoc.inputs.utf16_encoding`)."""
    from topodoc.inputs import utf16_encoding

    return utf16_encoding(head)


def _read_here(units: list[parallel.Unit], items: list[Input], extra: tuple[str, ...]) -> Iterator:
    """Every unit read by this process, each into its own state (as the workers would), one by one; a
    part of a cut file starts where the part before it ended (lines, NCCL INFO record seen)."""
    before = (0, False)
    for unit in units:
        if unit.path is None:
            state = LogState()
            yield unit.index, state, _scan_input(state, items[unit.index], extra)
            continue
        try:
            result = parallel.read(unit, extra, before)
        except OSError as err:
            raise LogInputError(f"{unit.path}: {err.strerror or type(err).__name__}") from err
        before = (result[2].lines, result[1].info_seen)
        yield result


def _check_readable(paths: list[str]) -> None:
    for path in paths:
        try:
            with open(path, "rb"):
                pass
        except OSError as err:
            raise LogInputError(f"{path}: {err.strerror or type(err).__name__}") from err


def analyze_text(text: str, name: str = "<text>") -> LogAnalysis:
    return analyze([(name, io.BytesIO(text.encode("utf-8", "surrogateescape")))])


def _scan_input(state: LogState, item: Input, extra: tuple[str, ...] = ()) -> InputStats:
    if isinstance(item, tuple):
        return Scanner(state, item[0], extra).run(_text_log(item[0], utf8_stream(item[1])))
    if item == "-":
        _not_a_device("<stdin>", sys.stdin.fileno())
        return Scanner(state, "<stdin>", extra).run(_text_log("<stdin>", utf8_stream(sys.stdin.buffer)))
    opener = gzip.open if item.endswith(".gz") else open
    try:
        with opener(item, "rb") as raw:
            if not item.endswith(".gz"):
                _not_a_device(item, raw.fileno())
            return Scanner(state, item, extra).run(_text_log(item, utf8_stream(raw)))
    except (OSError, EOFError, zlib.error) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise LogInputError(f"{item}: {reason}") from err
