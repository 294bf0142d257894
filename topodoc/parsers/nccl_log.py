"""NCCL log analyzer: ``NCCL_DEBUG=INFO`` output (any NCCL 2.1-2.30, any launcher) -> :class:`LogAnalysis`.

Public API:

- ``analyze(inputs) -> LogAnalysis``: ``inputs`` is a list of paths (``.gz`` is read through gzip, ``-``
  is stdin) or ``(name, binary stream)`` pairs; each keeps its own name for ``file:line`` evidence.
- ``analyze_text(text, name="<text>") -> LogAnalysis`` for tests.
- :class:`NoNcclLinesError` when no input holds a single NCCL line.

The reader streams: it reads large binary chunks, splits them into lines in C, and sends only NCCL lines
to Python-level grammar. Channel (connection) lines, the bulk of a big INFO log, take a fast path: they
are counted under a key (process, peer, transport) and parsed once per distinct key, so memory depends on
the job's size, not the log's. Each line is decoded as UTF-8 with ``errors="replace"``. Output schema:
:mod:`topodoc.logmodel`.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
from collections.abc import Iterable
from typing import BinaryIO

from topodoc.logmodel import Evidence, InputStats, LogAnalysis
from topodoc.parsers import nccl_log_facts as facts
from topodoc.parsers import nccl_log_prefix as prefix
from topodoc.parsers.nccl_log_state import LogState
from topodoc.parsers.nccl_log_summary import build

CHUNK_BYTES = 4 << 20
_INFO = b" NCCL INFO "
_INTERESTING = re.compile(
    rb"NCCL|nccl|\] (?:INFO|WARN) |Watchdog|Pid +\d+ on |ProcessGroup|Cuda failure|CUDA error|DistBackendError"
)
_SKIP_WORDS = (b"Ring ", b"Tree", b"Channel ", b"Pattern ", b" ", b"NVLS Head", b"Trees")
_TESTS_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)")
_APP_ERROR = re.compile(
    r"Watchdog caught|NCCL error in|DistBackendError|nccl\w*Error:|Cuda failure|CUDA error:|NCCL WARN"
)
_INCOMPLETE = re.compile(r"^(?:Channel|Ring) \d+(?:/\d+)? : \d+(?:\[\w+\])? ->(?!.* via \S)")

Input = str | tuple[str, BinaryIO]


class NoNcclLinesError(ValueError):
    """None of the inputs contains an NCCL line."""


def analyze(inputs: Iterable[Input]) -> LogAnalysis:
    """Stream every input through one :class:`LogState` and freeze the result."""
    state = LogState()
    stats = [_scan_input(state, item) for item in inputs]
    if not any(s.nccl_lines for s in stats):
        names = ", ".join(s.name for s in stats) or "no input"
        raise NoNcclLinesError(f"no NCCL lines found in {names}")
    return build(state, tuple(stats))


def analyze_text(text: str, name: str = "<text>") -> LogAnalysis:
    return analyze([(name, io.BytesIO(text.encode("utf-8", "surrogateescape")))])


def _scan_input(state: LogState, item: Input) -> InputStats:
    if isinstance(item, tuple):
        return _Scanner(state, item[0]).run(item[1])
    if item == "-":
        return _Scanner(state, "<stdin>").run(sys.stdin.buffer)
    opener = gzip.open if item.endswith(".gz") else open
    with opener(item, "rb") as stream:
        return _Scanner(state, item).run(stream)


class _Scanner:
    """Reads one input: chunks -> lines -> fast path (connections) or grammar (everything else)."""

    def __init__(self, state: LogState, name: str) -> None:
        self.state, self.name = state, name
        self.lines = self.nccl = self.size = 0
        self.pending: tuple[int, str] | None = None  # an NCCL line that may continue on the next line

    def run(self, stream: BinaryIO) -> InputStats:
        carry = b""
        while True:
            block = stream.read(CHUNK_BYTES)
            if not block:
                break
            self.size += len(block)
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                self._block(block[:cut])
        if carry:
            self._block(carry + b"\n")
        self._flush_pending()
        return InputStats(self.name, self.lines, self.nccl, self.size)

    def _block(self, block: bytes) -> None:
        """Split on the INFO marker (in C): Python touches INFO records only; other lines are searched
        in bulk between records and looked at one by one only where the search hits."""
        pieces = block.split(_INFO)
        head = pieces[0]
        line = self.lines  # newlines before the current record: its 0-based line index
        self._between(head, 0, line + 1)
        line += head.count(b"\n")
        tail, partial = head[head.rfind(b"\n") + 1 :], None
        for piece in pieces[1:]:
            self.nccl += 1
            nl = piece.find(b"\n")
            if nl < 0:  # another record follows on the same physical line
                partial = (tail if partial is None else partial) + _INFO + piece
                continue
            if partial is not None:
                self._general(line + 1, partial + _INFO + piece[:nl])
                partial = None
            else:
                self._record(line + 1, tail, piece[:nl])
            last = piece.rfind(b"\n")
            if last > nl:
                self._between(piece, nl + 1, line + 2)
            line += piece.count(b"\n")
            tail = piece[last + 1 :]
        self.lines = line

    def _record(self, number: int, tail: bytes, msg: bytes) -> None:
        if msg.startswith(_SKIP_WORDS):
            if b" via " in msg:
                cut = msg.find(b" : ")
                end = tail.rfind(b" ")
                key = (tail[tail.rfind(b" ", 0, end) + 1 :], msg[cut + 3 :].rstrip(b"\r"))
                entry = self.state.conn_raw.get(key)
                if entry is None:
                    self.state.conn_raw[key] = [1, Evidence(self.name, number, _text(tail + _INFO + msg))]
                else:
                    entry[0] += 1
                return
            if not msg.startswith((b"Channel", b"Ring")) or msg.count(b"->") != 1:
                return
        self._general(number, tail + _INFO + msg)

    def _between(self, data: bytes, start: int, first_number: int) -> None:
        end = data.rfind(b"\n") + 1
        if end <= start or not (self.pending or _INTERESTING.search(data, start, end)):
            return
        for number, raw in enumerate(data[start:end].split(b"\n")[:-1], first_number):
            if self.pending or _INTERESTING.search(raw):
                self._general(number, raw)

    def _general(self, number: int, raw: bytes) -> None:
        text = prefix.clean(_text(raw))
        if self.pending and self._join(number, text):
            return
        self._flush_pending()
        for part in _records(text):
            self._one(number, part)

    def _one(self, number: int, text: str) -> None:
        rec = prefix.split(text)
        if rec is None:
            self._other(number, text)
            return
        if not text.count(" NCCL INFO "):
            self.nccl += 1
        if _INCOMPLETE.match(rec.msg):
            self.pending = (number, text)
            return
        facts.handle(self.state, rec, Evidence(self.name, number, text))

    def _join(self, number: int, text: str) -> bool:
        first, head = self.pending
        if prefix.split(text) is not None:
            return False
        self.pending = None
        joined = head + text if " via " in head + text else head + " " + text
        rec = prefix.split(joined)
        if rec is not None:
            facts.handle(self.state, rec, Evidence(self.name, first, joined))
        return True

    def _flush_pending(self) -> None:
        if self.pending:
            number, text = self.pending
            self.pending = None
            rec = prefix.split(text)
            if rec is not None:
                facts.handle(self.state, rec, Evidence(self.name, number, text))

    def _other(self, number: int, text: str) -> None:
        ev = Evidence(self.name, number, text.strip())
        tests = _TESTS_RANK.search(text)
        if tests:
            self.nccl += 1
            self.state.test_ranks.setdefault(int(tests[1]), (tests[3], int(tests[2]), ev))
        elif _APP_ERROR.search(text):
            self.nccl += 1
            facts.handle(self.state, prefix.Record(None, None, None, "ERROR", text.strip()), ev)


def _records(text: str) -> list[str]:
    """Split a physical line holding several NCCL records (interleaved output) into one per record."""
    if text.count(" NCCL ") < 2:
        return [text]
    starts = [m.start() for m in re.finditer(r"[^\s:\[\]|()]+:\d+:\d+ \[\d+\] ", text)]
    if len(starts) < 2:
        return [text]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")
