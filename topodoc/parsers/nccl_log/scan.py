"""The streaming reader behind :func:`topodoc.parsers.nccl_log.analyze`: one input, block by block.

Speed comes from never making more than one Python object per NCCL record and no pattern per line: each
block (``CHUNK_BYTES`` of whole lines; measured here, 256 KiB beat 1 and 8 MiB and keeps RSS near 20 MB)
is split on the literal `` NCCL INFO `` (C), so Python sees one piece per INFO record. A
:class:`~topodoc.parsers.nccl_log.plan.Plan` sorts the pieces with a dict lookup on their first bytes:
collective calls (``AllReduce: opCount ...``), trees and ring orders are dropped, connection lines (the bulk
of a big log) only counted under their :mod:`.channel` key (channel number left out, so hundreds of
thousands of lines fold into a few thousand keys). The lines between records are searched in bulk for a
few keywords (``bytes.find``) and visited only where one hits. The records left go to the grammar with
their prefix parsed once per distinct prefix and each (prefix, message) read once (bounded caches).
Memory is bounded by the job's size, never by the log's. (Whole-block regular expressions -- one
literal-led pattern per family -- were measured slower than this split on this machine's Python ``re``.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import BinaryIO

from topodoc.logmodel import Evidence, InputStats
from topodoc.parsers.nccl_log import channel, errors, facts, prefix
from topodoc.parsers.nccl_log.plan import KEYWORDS as _KEYWORDS
from topodoc.parsers.nccl_log.plan import OLD_KEYWORDS as _OLD_KEYWORDS
from topodoc.parsers.nccl_log.plan import plan, read_blocks
from topodoc.parsers.nccl_log.state import LogState

CHUNK_BYTES = 1 << 18
CACHE_LIMIT = 16384
# the longest line the grammar sees: NCCL's own lines are far shorter (a 16-HCA device list is ~500
# characters); a longer line is read as its first and last LINE_LIMIT // 2 characters and counted in
# InputStats.long_lines, so no pattern ever walks an unbounded line and nothing is dropped silently
LINE_LIMIT = 4096  # also keeps every number below int()'s 4300-digit limit
_INFO = b" NCCL INFO "
_NL = b"\n"
_GRAPH_WORDS = (b"Ring ", b"Tree", b"Channel ", b"Pattern ", b" ", b"NVLS Head")
_WANTED_START = (
    b"NCCL", b"cudaDriverVersion", b"Using ", b"NET :", b"rank ", b"Bootstrap", b"NET/", b"Initialized",
    b"Assigned", b"Failed", b"P2P", b"GPU Direct", b"Connected", b"NVLS comm", b"NVLS Created", b"CollNet",
    b"comm ", b"nccl", b"[Rank", b"OFI_NCCL_", b"FI_", b"Could", b"Setting affinity", b"TUNER/", b"PROFILER/",
    b"ENV/", b"Plugin Path", b"No network plugin", b"Initializing network", b"Net/IB",
)
_WANTED_ANYWHERE = re.compile(
    rb"^[^\s:]{1,255}:\d{1,9} -> \d|Affinity for GPU|[Tt]imed out|Connection closed"
)
_TESTS_RANK = re.compile(
    r"#\s{1,64}Rank\s{1,64}(\d{1,9})\s{1,64}(?:Group\s{1,64}\d{1,9}\s{1,64})?Pid\s{1,64}(\d{1,12})\s{1,64}on\s{1,64}"
    r"(\S{1,255})\s{1,64}device\s{1,64}(\d{1,6})"
)
_APP_ERROR = re.compile(
    r"Watchdog caught|NCCL error in|DistBackendError|nccl\w*Error:|Cuda failure|CUDA error:|NCCL WARN"
)
_LAST_ERROR = "Last error:"
_FRAMEWORK_ERROR = re.compile(r"NCCL error(?: in)?:")  # PyTorch's wrapper; its next line interprets the code
_INTERPRETATION = re.compile(r"^\s*nccl\w*Error: ")
_PREFIX = re.compile(r"(?<![^\s:\[\]|()])(?P<host>[^\s:\[\]|()]{1,255}):\d{1,12}:\d{1,20} \[\d{1,6}\] ")


class Scanner:
    """Reads one input into a shared :class:`LogState`; :meth:`run` returns the input's statistics."""

    def __init__(self, state: LogState, name: str, extra_literals: Iterable[str] = ()) -> None:
        self.state, self.name = state, name
        self.lines = self.nccl = self.size = self.long_lines = 0
        self.seen_info = False  # a " NCCL INFO " record was seen: NCCL 2.1's "[0] INFO" form is off
        self.pending: tuple[int, str, str] | None = None  # a record that may continue on the next line
        self.whos: dict[bytes, prefix.Record | None] = {}
        self.repeats: set[tuple[bytes, bytes]] = set()
        self.last_error_at = 0  # the line that holds the text announced by a bare "Last error:" line
        self.framework_error_at = -9  # the last PyTorch "NCCL error in:" line
        self.all_extra = tuple(dict.fromkeys(e.encode("utf-8") for e in extra_literals if e))
        self._use_extra(self.all_extra)

    def _use_extra(self, extra: tuple[bytes, ...]) -> None:
        """The extra literals in force: those the current block holds (a literal never spans lines, and
        blocks are whole lines), so a block without any costs no per-record search for them."""
        self.keywords, self.old_keywords, self.extra = _KEYWORDS + extra, _OLD_KEYWORDS + extra, extra
        self.extra_text = tuple(e.decode("utf-8") for e in extra)

    def run(self, stream: BinaryIO) -> InputStats:
        """Read ``stream`` block by block (whole lines) and return the input's statistics."""
        for block, read in read_blocks(stream, CHUNK_BYTES):
            self.size += read
            if block:
                self._block(block)
        self._flush_pending()
        return InputStats(self.name, self.lines, self.nccl, self.size, self.long_lines)

    def _block(self, block: bytes) -> None:
        if self.all_extra:  # one pass per literal over the block instead of one per record
            present = tuple(e for e in self.all_extra if e in block)
            if present != self.extra:
                self._use_extra(present)
        old = not self.seen_info
        pieces = block.split(_INFO)
        made = plan(pieces, old, self.keywords, self.old_keywords)
        keywords = self.old_keywords if old else self.keywords
        self._between(pieces[0], 0, self.lines + 1, keywords, made.first_hit)
        self.nccl += len(pieces) - 1
        self.seen_info = self.seen_info or len(pieces) > 1
        counter = _LineCounter(pieces, self.lines)
        waiting = self._count(made.counted)  # connection keys first seen in this block, in order
        partial = None  # the first record of a line holding several
        for i in made.read:
            if waiting and waiting[-1][1][1] < i:
                self._add_new(pieces, counter, waiting, i)
            partial = self._record(pieces, i, counter, partial, made.hits)
        if waiting:
            self._add_new(pieces, counter, waiting, len(pieces))
        self.lines += block.count(_NL)

    def _count(self, counted: dict) -> list:
        """Add the block's counts of connection keys already known; return the new ones, first seen first."""
        conns, new = self.state.conn_raw, []
        for key, found in counted.items():
            entry = conns.get(key)
            if entry is None:
                new.append((key, found))
            else:
                entry[0] += found[0]
        new.reverse()  # popped from the end
        return new

    def _add_new(self, pieces: list[bytes], counter: _LineCounter, waiting: list, before: int) -> None:
        """Add the connection keys first seen before record ``before``, at the place the lines hold."""
        conns = self.state.conn_raw
        while waiting and waiting[-1][1][1] < before:
            key, (lines, i) = waiting.pop()
            entry = conns.get(key)
            if entry is not None:  # the long way met the same key first
                entry[0] += lines
                continue
            tail, msg = _tail(pieces[i - 1]), pieces[i][: pieces[i].find(_NL)]
            self.state.new_conn(key, lines, Evidence(self.name, counter.number(i), _text(tail + _INFO + msg)))

    def _record(self, pieces: list[bytes], i: int, counter: _LineCounter, partial: int | None,
                hits: dict[int, bool]) -> int | None:
        """Read record ``i`` of the block; returns the first record of a line still open, if any."""
        piece = pieces[i]
        nl = piece.find(_NL)
        if nl < 0:
            return i if partial is None else partial
        tail, msg = _tail(pieces[i - 1]), piece[:nl]
        if partial is not None:
            raw = _tail(pieces[partial - 1]) + _INFO + _INFO.join(pieces[partial:i]) + _INFO + msg
            self._general(counter.number(partial), raw)
        elif channel.is_connection(msg):  # one followed by other lines
            key = channel.key(tail, msg)
            conns = self.state.conn_raw
            entry = conns.get(key)
            if entry is None:
                self.state.new_conn(key, 1, Evidence(self.name, counter.number(i), _text(tail + _INFO + msg)))
            else:
                entry[0] += 1
        else:
            self._piece(counter, i, tail, msg)
        if i in hits:  # other lines follow
            self._between(piece, nl + 1, counter.number(i) + 1, self.keywords, hits[i])
        return None

    def _piece(self, counter: _LineCounter, i: int, tail: bytes, msg: bytes) -> None:
        """Record ``i`` of the block (its line number is counted only when it is needed)."""
        if not msg.startswith(_GRAPH_WORDS):
            self._info(counter, i, tail, msg)
        elif msg.startswith(channel.WORDS) and msg.count(b"->") == 1:
            self._general(counter.number(i), tail + _INFO + msg)  # a connection line cut before "via"

    def _info(self, counter: _LineCounter, i: int, tail: bytes, msg: bytes) -> None:
        """An INFO record that is not a graph/connection line: parse it if its shape can prove anything."""
        wanted = msg.startswith(_WANTED_START) or _WANTED_ANYWHERE.search(msg)
        if self.pending or not (wanted or (self.extra and any(e in msg for e in self.extra))):
            if self.pending:
                self._general(counter.number(i), tail + _INFO + msg)
            return
        if (tail, msg) in self.repeats:
            return  # the same process said exactly this before (every communicator repeats its setup)
        if len(self.repeats) >= CACHE_LIMIT:
            self.repeats.clear()
        self.repeats.add((tail, msg))
        who = self.whos.get(tail, False)
        if who is False:
            if len(self.whos) >= CACHE_LIMIT:
                self.whos.clear()
            who = self.whos[tail] = prefix.who(_text(tail))
        number = counter.number(i)
        if who is None or b"\x1b" in msg or b" | " in msg or len(msg) + len(tail) > LINE_LIMIT:
            self._general(number, tail + _INFO + msg)
            return
        rec = prefix.Record(who.host, who.pid, who.dev, "INFO", _text(msg), "", who.launcher_ip)
        facts.handle(self.state, rec, Evidence(self.name, number, _text(tail + _INFO + msg)))

    def _between(self, data: bytes, start: int, first_number: int, needles: tuple[bytes, ...],
                 hit: bool) -> None:
        """The lines of ``data`` from ``start`` on that hold no INFO record; ``hit``: one holds a needle."""
        end = data.rfind(_NL) + 1
        waiting = self.pending or self.last_error_at >= first_number
        if end <= start or not (waiting or hit):
            return
        hits = _line_starts(data, start, end, needles) if hit else []
        pos, number, next_hit = start, first_number, 0
        while pos < end:
            if self.pending or self.last_error_at >= number:  # every line counts until it is settled
                stop = data.find(_NL, pos)
                raw = data[pos:stop]
                if self.pending or number == self.last_error_at or any(k in raw for k in needles):
                    self._general(number, raw)
                pos, number = stop + 1, number + 1
                continue
            while next_hit < len(hits) and hits[next_hit] < pos:
                next_hit += 1
            if next_hit == len(hits):
                return
            number += data.count(_NL, pos, hits[next_hit])  # jump to the next line holding a needle
            pos = hits[next_hit]
            stop = data.find(_NL, pos)
            self._general(number, data[pos:stop])
            pos, number = stop + 1, number + 1

    def _general(self, number: int, raw: bytes) -> None:
        if len(raw) > LINE_LIMIT:
            self.long_lines += 1
        original = _text(raw)
        text = prefix.clean(original)
        if self.pending and self._join(text):
            return
        self._flush_pending()
        for part in _records(text, self.state.host_lines):
            self._one(number, part, original)

    def _one(self, number: int, text: str, original: str) -> None:
        rec = prefix.split(text)
        if rec is None:
            self._other(number, text)
        elif channel.INCOMPLETE.match(rec.msg):
            self.pending = (number, text, original)
        else:
            if " NCCL INFO " not in text:
                self.nccl += 1
            facts.handle(self.state, rec, Evidence(self.name, number, original))

    def _join(self, text: str) -> bool:
        number, head, original = self.pending
        if prefix.split(text) is not None or not text.lstrip().startswith(channel.CONTINUATIONS):
            return False
        self.pending = None
        joined = head + text if " via " in head + text else head + " " + text
        rec = prefix.split(joined)
        if rec is not None:
            facts.handle(self.state, rec, Evidence(self.name, number, _clip(original + "⏎" + text)))
        return True

    def _flush_pending(self) -> None:
        if self.pending:
            number, text, original = self.pending
            self.pending = None
            rec = prefix.split(text)
            if rec is not None:
                facts.handle(self.state, rec, Evidence(self.name, number, original))

    def _other(self, number: int, text: str) -> None:
        ev = Evidence(self.name, number, text.strip())
        tests = _TESTS_RANK.search(text)
        bare = channel.BARE_TEXT.match(text)
        if bare:  # "3[3d000] -> 11[3d000] [receive] via NET/IB/1/GDRDMA" quoted without its prefix
            self.nccl += 1
            facts.handle(self.state, prefix.Record(None, None, None, "INFO", text.strip()), ev)
        elif tests:
            self.nccl += 1
            self.state.test_ranks.setdefault(int(tests[1]), (tests[3], int(tests[2]), ev))
        elif number == self.last_error_at or _LAST_ERROR in text:
            self._last_error(number, text, ev)
        elif _INTERPRETATION.match(text) and number - self.framework_error_at <= 2:
            self.nccl += 1  # "ncclRemoteError: ..." only restates the wrapper line just above it
        elif _APP_ERROR.search(text) or (self.extra_text and any(e in text for e in self.extra_text)):
            self.nccl += 1
            if _FRAMEWORK_ERROR.search(text):
                self.framework_error_at = number
            facts.handle(self.state, prefix.Record(None, None, None, "ERROR", text.strip()), ev)

    def _last_error(self, number: int, text: str, ev: Evidence) -> None:
        """PyTorch's ``Last error:`` (the last NCCL WARN text), on the same line or on the next one."""
        self.nccl += 1
        reason = text.split(_LAST_ERROR, 1)[1].strip() if _LAST_ERROR in text else text.strip()
        if not reason:
            self.last_error_at = number + 1
            return
        self.last_error_at = 0
        category, explanation = errors.classify(reason) or ("other", "read it with the lines around it.")
        key = "last:" + re.sub(r"\d+", "N", reason)[:160]
        self.state.note_error(category, "ERROR", ev, errors.LAST_ERROR_NOTE + explanation, (None, None), key)


class _LineCounter:
    """1-based line numbers of records in a split block, counted in C and only when a record needs one."""

    def __init__(self, pieces: list[bytes], lines_before: int) -> None:
        self.pieces, self.done, self.newlines = pieces, 0, lines_before

    def number(self, i: int) -> int:
        """The line on which record ``i`` (the text after the ``i``-th INFO marker) starts."""
        if i > self.done:
            self.newlines += b"".join(self.pieces[self.done : i]).count(_NL)
            self.done = i
        return self.newlines + 1


def _line_starts(data: bytes, start: int, end: int, needles: tuple[bytes, ...]) -> list[int]:
    """Where the lines of ``data[start:end]`` that hold one of ``needles`` start, in order (found with
    ``bytes.find``: Python work per hit, not per line)."""
    starts = set()
    for needle in needles:
        at = data.find(needle, start, end)
        while at >= 0:
            starts.add(max(start, data.rfind(_NL, start, at) + 1))
            stop = data.find(_NL, at)
            at = data.find(needle, stop + 1, end) if stop >= 0 else -1
    return sorted(starts)


def _tail(piece: bytes) -> bytes:
    return piece[piece.rfind(_NL) + 1 :]


def _records(text: str, hosts) -> list[str]:
    """Split a physical line holding several NCCL records (interleaved output) into one per record.

    Where two records are glued (``...via P2P/IPC/readnode-2:12:13 [1] NCCL INFO ...``) the second
    record's host is taken as the longest host name already seen that ends the glued word."""
    if text.count(" NCCL ") < 2:
        return [text]
    starts = [_host_start(text, m, hosts) for m in _PREFIX.finditer(text)]
    if len(starts) < 2:
        return [text]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


def _host_start(text: str, match: re.Match, hosts) -> int:
    word = match["host"]
    known = [h for h in hosts if h and word.endswith(h)]
    if not known or word in known:
        return match.start()
    return match.end("host") - len(max(known, key=len))


def _clip(text: str) -> str:
    """Evidence text of at most about LINE_LIMIT characters (a joined torn line keeps its two ends)."""
    if len(text) <= LINE_LIMIT:
        return text
    return text[: LINE_LIMIT // 2] + " … " + text[-(LINE_LIMIT // 2) :]


def _text(raw: bytes) -> str:
    """A line as text for the grammar and for evidence; an over-long one keeps only its two ends."""
    if len(raw) > LINE_LIMIT:
        half = LINE_LIMIT // 2
        raw = raw[:half] + " … ".encode() + raw[-half:]
    return raw.decode("utf-8", "replace").rstrip("\r\n")
