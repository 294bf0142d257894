"""The streaming reader behind :func:`topodoc.parsers.nccl_log.analyze`: one input, block by block.

Speed comes from touching in Python only the lines that can teach something, found in C. Each block
(``CHUNK_BYTES`` of whole lines) is searched with **one** literal-led pattern, :data:`_NCCL`: every
``NCCL`` in the block except the INFO records with nothing to learn (trees, ring orders, patterns), which
the pattern's lookahead drops without making a Python object. For each hit:

- a connection line alone on its line (``Channel 02/1 : 3[3] -> 11[3] via NET/IB/1/GDRDMA``) only bumps
  a counter under its :mod:`.channel` key (channel number left out, so hundreds of thousands of lines fold
  into a few thousand keys); a key met for the first time is kept with its line as evidence;
- a collective call (``AllReduce: opCount 1f ...``, NCCL_DEBUG_SUBSYS=COLL) is folded per line prefix
  into a count and the last opCount, then once per block into ``LogState.colls`` per process;
- another INFO record is read by the grammar if its first word or the catalogue's literals make it worth
  it, once per distinct (prefix, message) (bounded caches); WARN, version and framework lines, lines that
  hold several records, torn and odd lines go to the full grammar (:meth:`Scanner._general`).

Lines without ``NCCL`` are read only where one of the catalogue's gates (:mod:`topodoc.catalogue.gates`:
error, fail, warn words and a few more) occurs, found with one ``bytes.find`` pass per gate. Lines are
numbered in C (``bytes.count`` between the lines visited), only for lines that become evidence. Memory is
bounded by the job's size, never by the log's. Benchmarks: ``benchmarks/logs_bench.py``.

The three loops over a block's bytes (the connection split, the record pass, the gate words) also exist in
C (``_scan.c``, an optional extension built by ``pip install .``): :data:`_C` is that module, or ``None``
where it was not built or ``TOPODOC_PURE=1`` is set; both give the same state (the Python loops below are
the C core's oracle, ``tests/test_nccl_log_cscan.py``). :func:`engine` names the one that runs.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from functools import partial
from itertools import accumulate
from operator import itemgetter
from typing import BinaryIO

from topodoc import catalogue
from topodoc.catalogue.gates import catalogue_literals, covered, scan_gates
from topodoc.logmodel import Evidence, InputStats
from topodoc.parsers.nccl_log import channel, errors, facts, prefix
from topodoc.parsers.nccl_log.state import LogState

CHUNK_BYTES = 1 << 20
CACHE_LIMIT = 16384
# the longest line the grammar sees: NCCL's own lines are far shorter (a 16-HCA device list is ~500
# characters); a longer line is read as its first and last LINE_LIMIT // 2 characters and counted in
# InputStats.long_lines, so no pattern ever walks an unbounded line and nothing is dropped silently
LINE_LIMIT = 4096  # also keeps every number below int()'s 4300-digit limit
CARRY_LIMIT = 1 << 20  # a line still open after this many bytes keeps only its two ends: memory and time
# stay linear on one endless line
_INFO = b" NCCL INFO "
_NL = b"\n"
# every "NCCL" except INFO records with nothing to learn: trees, ring orders ("Ring 00 : 3 -> 0 -> 1"),
# patterns, NVLS heads, and records that start with a space (ring listings); literal-led, so the engine
# jumps from one "NCCL" to the next in C
_NCCL = re.compile(
    rb"NCCL(?! INFO (?:Tree|Pattern |Ring \d{1,4} : \d{1,9} -> \d{1,9} -> |Channel \d|NVLS Head| ))"
)
# connection lines ("Channel 02/1 : 3[3] -> 11[3] via NET/IB/1/GDRDMA", and channel listings) are
# counted apart, see Scanner._connections; NCCL <= 2.6's "Ring 00 : 0[0] -> 1[1] via ..." connection lines
# are read one by one (old logs are small), its ring orders dropped with trees
_CHANNEL = b" NCCL INFO Channel "
_CONN_ANY = re.compile(rb"NCCL INFO Channel \d")

_CONN_HEADS = (b"Chan", b"Ring")
# collective calls logged with NCCL_DEBUG_SUBSYS=COLL ("AllReduce: opCount 3f sendbuff ...")
_COLL_HEADS = frozenset(
    (b"AllR", b"AllG", b"Redu", b"Broa", b"Send", b"Recv", b"AllT", b"Gath", b"Scat", b"Allt")
)
_OPCOUNT = b": opCount "
# INFO records worth the grammar by their first word; others only when a catalogue literal is in them
_WANTED_START = (
    b"NCCL", b"cudaDriverVersion", b"Using ", b"NET :", b"rank ", b"Bootstrap", b"NET/", b"Initialized",
    b"Assigned", b"Failed", b"P2P", b"GPU Direct", b"Connected", b"NVLS comm", b"NVLS Created", b"CollNet",
    b"comm ", b"nccl", b"[Rank", b"OFI_NCCL_", b"FI_", b"Could", b"Setting affinity", b"TUNER/", b"PROFILER/",
    b"ENV/", b"Plugin Path", b"No network plugin", b"Initializing network", b"Net/IB", b"CUDA Dev ",
)
_WANTED_ANYWHERE = re.compile(
    rb"^[^\s:]{1,255}:\d{1,9} -> \d|Affinity for GPU|[Tt]imed out|Connection closed"
)
# gates for lines that only pastes and the head of an output hold (connection lines quoted without their
# prefix; nccl-tests' rank rows, printed before its first NCCL init): looked for in an input's first
# PASTE_BYTES only, each gate being one more pass over every block of a big log
_PASTE_GATES = (b"] via ", b" Pid ", b"NET/OFI")  # the last: aws-ofi-nccl's test binaries (own prefix)
PASTE_BYTES = 8 << 20
# NCCL 2.1's "[0] INFO" / "[0] WARN" lines: searched for only while an input has shown no " NCCL INFO "
_OLD_GATES = (b"] INFO ", b"] WARN ")
# event kinds of the ordered walk over a block's visited lines
_GENERAL, _RECORD, _NEWCONN, _COLL, _HOST = 0, 1, 2, 3, 4
_TESTS_RANK = re.compile(
    r"#\s{1,64}Rank\s{1,64}(\d{1,9})\s{1,64}(?:Group\s{1,64}\d{1,9}\s{1,64})?Pid\s{1,64}(\d{1,12})\s{1,64}on\s{1,64}"
    r"(\S{1,255})\s{1,64}device\s{1,64}(\d{1,6})"
)
_APP_ERROR = re.compile(
    r"Watchdog caught|NCCL error in|DistBackendError|nccl\w*Error:|Cuda failure|CUDA error:|NCCL WARN"
    r"|Test (?:CUDA|NCCL) failure"
)
_LAST_ERROR = "Last error:"
# libmlx5's error CQE dump: "mlx5: <host>: got completion with error:" then four rows of four hex words
_CQE_HEADER = re.compile(r"mlx5: [^:\s]{1,255}: got completion with error:")
_CQE_ROW = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{8}(?: [0-9a-fA-F]{8}){3}(?![0-9a-fA-F])")
# mlx5 CQE syndromes (rdma-core providers/mlx5/mlx5dv.h, MLX5_CQE_SYNDROME_*)
_CQE_SYNDROMES = {
    0x01: "local length error", 0x02: "local QP operation error", 0x04: "local protection error",
    0x05: "work request flushed (a consequence of an earlier error on this QP)",
    0x06: "memory window bind error",
    0x10: "bad response error", 0x11: "local access error", 0x12: "remote invalid request error",
    0x13: "remote access error (the peer refused the memory access: its registration or rkey)",
    0x14: "remote operation error", 0x15: "transport retry counter exceeded (the peer never answered)",
    0x16: "RNR retry counter exceeded (the peer posted no receive)", 0x22: "remote aborted error",
}
_FRAMEWORK_ERROR = re.compile(r"NCCL error(?: in)?:")  # PyTorch's wrapper; its next line interprets the code
_INTERPRETATION = re.compile(r"^\s*nccl\w*Error: ")
_PREFIX = re.compile(r"(?<![^\s:\[\]|()])(?P<host>[^\s:\[\]|()]{1,255}):\d{1,12}:\d{1,20} \[\d{1,6}\] ")
_ORDER = itemgetter(0)


def _load_core():
    """The C core, or ``None`` (not built here, or ``TOPODOC_PURE=1``)."""
    if os.environ.get("TOPODOC_PURE", "") not in ("", "0"):
        return None
    try:
        from topodoc.parsers.nccl_log import _scan
    except ImportError:
        return None
    return _scan


_C = _load_core()


def engine() -> str:
    """Which scanner core runs: ``"C"`` (the compiled ``_scan``) or ``"Python"``."""
    if _C is not None:
        return "C"
    return "Python (TOPODOC_PURE=1)" if os.environ.get("TOPODOC_PURE", "") not in ("", "0") else "Python"


class Scanner:
    """Reads one input into a shared :class:`LogState`; :meth:`run` returns the input's statistics."""

    def __init__(self, state: LogState, name: str, extra_literals: Iterable[str] = ()) -> None:
        self.state, self.name = state, name
        self.lines = self.nccl = self.size = self.long_lines = 0
        self.seen_info = False  # a " NCCL INFO " record was seen: NCCL 2.1's "[0] INFO" form is off
        self.pending: tuple[int, str, str] | None = None  # a record that may continue on the next line
        self.whos: dict[bytes, prefix.Record | None] = {}
        self.places: dict[bytes, bytes] = {}  # line prefix -> channel.place()
        self.coll_procs: dict[bytes, tuple] = {}  # line prefix -> (host, pid) of a collective call
        self.repeats: set[tuple[bytes, bytes]] = set()
        self.wanted: dict[bytes, bool] = {}  # INFO message -> worth the grammar
        self.last_error_at = 0  # the line that holds the text announced by a bare "Last error:" line
        self.framework_error_at = -9  # the last PyTorch "NCCL error in:" line
        self.cqe: list | None = None  # [header line, rows read] of an mlx5 error CQE dump being read
        self.extra = tuple(dict.fromkeys(e.encode("utf-8") for e in extra_literals if e))
        self.extra_text = tuple(e.decode("utf-8") for e in self.extra)
        # the catalogue's gates, and the caller's own literals that no gate covers, searched everywhere
        own = tuple(e for e in self.extra if e not in catalogue_literals() and not covered(e.decode()))
        self.own_text = tuple(e.decode("utf-8") for e in self.extra if e not in catalogue_literals())
        self.gates = scan_gates() + own + (b"NET/OFI",)
        # connection lines folded in C and not yet added to the state (see _fold_conns)
        self.pair_keys: dict[tuple[bytes, bytes], tuple | None] = {}
        self.pair_lines: Counter = Counter()
        self.tail_lines: Counter = Counter()
        self.body_gates = tuple(g for g in self.gates if g not in _PASTE_GATES)
        self.core = _C

    def run(self, stream: BinaryIO) -> InputStats:
        """Read ``stream`` block by block (whole lines) and return the input's statistics."""
        for block, read in _read_blocks(stream, CHUNK_BYTES, self.core):
            self.size += read
            if block:
                self._block(block)
        self._flush_pending()
        self._flush_conns()
        self.state.info_seen = self.state.info_seen or self.seen_info
        return InputStats(
            name=self.name,
            lines=self.lines,
            nccl_lines=self.nccl,
            bytes=self.size,
            long_lines=self.long_lines,
        )

    # -- one block ------------------------------------------------------------------------------------

    def _block(self, block: bytes) -> None:
        events: list[tuple] = []
        self._connections(block, events)
        if self.core is not None:
            new: dict[tuple[bytes, bytes], list] = {}
            infos, colls = self.core.records(block, self.repeats, self.wanted, self._worth, self.whos,
                                             self._conn_line, new, events, self.coll_procs, self.state.colls)
            for key, (count, start) in new.items():
                events.append((start, _NEWCONN, (key, count)))
        else:
            infos, colls = block.count(_INFO), {}
            self._records(block, events, colls)
        self.nccl += infos
        gates = self.gates if self.size <= PASTE_BYTES else self.body_gates
        gated = self._gated if self.core is None or len(gates) > 256 else self.core.gated  # (C: 256 at most)
        gated(block, gates, len(block), events)
        if not self.seen_info:  # NCCL 2.1's form, up to the input's first " NCCL INFO " record
            first = block.find(_INFO)
            until = len(block) if first < 0 else block.rfind(_NL, 0, first) + 1
            gated(block, _OLD_GATES, until, events)
            self.seen_info = infos > 0
        self._fold_colls(colls, events)
        events.sort(key=_ORDER)
        self._walk(block, events)

    def _records(self, block: bytes, events: list, colls: dict) -> None:
        """One pass of :data:`_NCCL`: count connection lines and collective calls, list the rest."""
        repeats, wanted = self.repeats, self.wanted
        rfind, find = block.rfind, block.find
        new: dict[tuple[bytes, bytes], list] = {}
        size, line_end, start, info_at, long_line = len(block), -1, 0, -1, False
        for m in _NCCL.finditer(block):
            at = m.start()
            if at > line_end:  # the first hit of a line: its start, end and first INFO marker, once
                start = rfind(_NL, max(line_end, 0), at) + 1
                line_end = find(_NL, at)
                line_end = size if line_end < 0 else line_end
                info_at = find(_INFO, start, line_end)
                long_line = line_end - start > LINE_LIMIT
                if long_line:  # read once, by the grammar (its two ends), not once per record in it
                    events.append((start, _GENERAL, None))
            if long_line:
                continue
            if block[at + 4 : at + 10] != b" INFO " or at == start or block[at - 1] != 32:
                if info_at < 0 or info_at + 11 > at:  # not a word inside an INFO record's message
                    events.append((start, _GENERAL, None))  # WARN, version, framework, trimmed, odd lines
                continue
            end = line_end if line_end < size else -1
            msg, tail = block[at + 10 : end], block[start : at - 1]
            head = msg[:4]
            if head in _CONN_HEADS:
                self._conn_line(block, start, msg, tail, new, events)
                continue
            if head in _COLL_HEADS and msg.find(_OPCOUNT, 0, 40) > 0 and b"NCCL" not in tail:
                entry = colls.get(tail)
                if entry is None:
                    colls[tail] = [1, start, msg]
                else:
                    entry[0] += 1
                    entry[2] = msg
                continue
            if (tail, msg) in repeats:
                continue  # the same process said exactly this before (every communicator repeats its setup)
            worth = wanted.get(msg)
            if worth is None:
                worth = self._worth(msg)
            if worth or b"NCCL" in tail or b" NCCL " in msg:
                events.append((start, _RECORD, (tail, msg)))
            elif tail not in self.whos:  # a prefix not met yet: its host counts even if the line is dropped
                events.append((start, _HOST, tail))
        for key, (count, start) in new.items():
            events.append((start, _NEWCONN, (key, count)))

    def _connections(self, block: bytes, events: list) -> None:
        """The block's ``Channel`` lines, folded in C: the block split on the marker, each line's prefix
        (the end of the piece before) and text (the start of the piece after) paired and counted in a
        ``Counter``, then read once per distinct pair. A block holding a glued or torn one is read line by
        line instead (:meth:`_conn_line`)."""
        if self.core is not None:
            folded = self.core.channels(block)
            if folded is None:
                return
            counts, firsts, tails = folded
            if self._fold_conns(counts, events, lambda wanted: {p: firsts[p] for p in wanted}, tails):
                return
        else:
            if _CHANNEL not in block:
                return
            pieces = block.split(_CHANNEL)
            tails = [p[p.rfind(_NL) + 1 :] for p in pieces[:-1]]
            # the text after "NN/N : " (the channel number left out, so a rank's 32 channels to a peer
            # fold) (b"\0" where the line holds no " : " or goes on to another record: read line by line)
            rests = [p[i + 3 : j] if (j := p.find(_NL)) > (i := p.find(b" : ", 0, 16)) >= 0 else b"\0"
                     for p in pieces[1:]]
            split = (pieces, tails, rests)
            if self._fold_conns(Counter(zip(tails, rests, strict=True)), events,
                                lambda wanted: _first_lines(split, wanted), tails):
                return
        new: dict[tuple[bytes, bytes], list] = {}
        rfind, find = block.rfind, block.find
        line_end, start, long_line = -1, 0, False
        for m in _CONN_ANY.finditer(block):
            at = m.start()
            if at > line_end:  # a new line (its bounds found once: a line of many records stays linear)
                start = rfind(_NL, max(line_end, 0), at) + 1
                line_end = find(_NL, at)
                line_end = len(block) if line_end < 0 else line_end
                long_line = line_end - start > LINE_LIMIT
                if long_line:
                    events.append((start, _GENERAL, None))
            if at > start and block[at - 1] == 32 and not long_line:
                msg = block[at + 10 : line_end if line_end < len(block) else -1]
                self._conn_line(block, start, msg, block[start : at - 1], new, events)
        for key, (count, start) in new.items():
            events.append((start, _NEWCONN, (key, count)))

    def _fold_conns(self, counts, events: list, first, tails) -> bool:
        """Take the block's folded lines ``(prefix, text after "Channel NN/N : ")`` -> lines; ``False``
        (and nothing taken) when one of them needs the grammar: a line holding two records, a line cut
        before "via", a prefix-less or odd one. A pair met for the first time gets its key (and, when the
        key is new, its first line as evidence, in file order); the counts wait in ``Counter``s, added up
        in C block after block, and reach the state once per distinct pair (:meth:`_flush_conns`): a rank's
        lines spread over every block of a big interleaved log cost no Python work per block. ``first``:
        pairs -> where each one's first line starts; ``tails``: the lines' prefixes (a list, or prefix ->
        lines)."""
        for (tail, rest), _n in counts.items():
            if not tail or rest == b"\0" or b"NCCL" in tail or b" NCCL " in rest or _torn(rest):
                return False
        keys, conns, places = self.pair_keys, self.state.conn_raw, self.places
        new = [pair for pair in counts if pair not in keys]
        if len(keys) + len(new) > CACHE_LIMIT:
            self._flush_conns()
            keys.clear()
        firsts = []
        for pair in new:
            tail, rest = pair
            if channel.VIA not in rest:
                keys[pair] = None  # channel listings: nothing to learn
                continue
            place = places.get(tail)
            if place is None:
                if len(places) >= CACHE_LIMIT:
                    places.clear()
                place = places[tail] = channel.place(tail)
            key = keys[pair] = (place, rest[: channel.KEY_LIMIT])
            if key not in conns:
                firsts.append((pair, key))
        if firsts:
            starts = first({pair for pair, _key in firsts})
            events.extend((starts[pair], _NEWCONN, (key, 0)) for pair, key in dict(firsts).items())
        self.pair_lines.update(counts)
        self.tail_lines.update(tails)
        return True

    def _flush_conns(self) -> None:
        """Add the connection lines counted so far to the state: per key, and per process."""
        conns, keys = self.state.conn_raw, self.pair_keys
        for pair, lines in self.pair_lines.items():
            key = keys.get(pair)
            if key is None:
                continue
            entry = conns.get(key)
            if entry is not None:
                entry[0] += lines
            else:
                self.state.conns_dropped += lines  # past the table's limit
        for tail, lines in self.tail_lines.items():
            who = self._who(tail)
            if who is not None:
                facts.connection_lines(self.state, who, lines)
        self.pair_lines.clear()
        self.tail_lines.clear()

    def _conn_line(self, block: bytes, start: int, msg: bytes, tail: bytes, new: dict, events: list) -> None:
        """One connection record read on its own (its line start, message and prefix)."""
        if channel.VIA in msg and b"NCCL" not in tail and b" NCCL " not in msg:
            who = self._who(tail)
            if who is not None:
                facts.connection_lines(self.state, who, 1)
            place = self.places.get(tail)
            if place is None:
                if len(self.places) >= CACHE_LIMIT:
                    self.places.clear()
                place = self.places[tail] = channel.place(tail)
            key = (place, msg[msg.find(b" : ") + 3 :][: channel.KEY_LIMIT])
            entry = self.state.conn_raw.get(key)
            if entry is not None:
                entry[0] += 1
            elif key in new:
                new[key][0] += 1
            else:
                new[key] = [1, start]
        elif b"NCCL" in tail or b" NCCL " in msg or _torn(msg):
            events.append((start, _GENERAL, None))  # several records, a line cut before "via"

    def _worth(self, msg: bytes) -> bool:
        """Is an INFO message (not a connection line) worth the grammar? Cached per message."""
        worth = bool(
            msg.startswith(_WANTED_START) or _WANTED_ANYWHERE.search(msg) or any(e in msg for e in self.extra)
        )
        if len(self.wanted) >= CACHE_LIMIT:
            self.wanted.clear()
        self.wanted[msg] = worth
        return worth

    def _gated(self, block: bytes, gates: tuple[bytes, ...], until: int, events: list) -> None:
        """Lines before ``until`` without NCCL's INFO marker that hold a gate word (one ``bytes.find``
        pass per gate)."""
        find, rfind = block.find, block.rfind
        for gate in gates:
            at = find(gate, 0, until)
            while at >= 0:
                start = rfind(_NL, 0, at) + 1
                end = find(_NL, at)
                if find(_INFO, start, end) < 0:
                    events.append((start, _GENERAL, None))
                at = find(gate, end + 1, until)

    def _fold_colls(self, colls: dict, events: list) -> None:
        """Add the block's collective calls to ``LogState.colls``, per process (host, pid)."""
        table, procs = self.state.colls, self.coll_procs
        for tail, (count, start, last) in colls.items():
            proc = procs.get(tail)
            if proc is None:
                who = self._who(tail)
                proc = (who.host, who.pid) if who is not None else (None, None)
                if len(procs) >= CACHE_LIMIT:
                    procs.clear()
                procs[tail] = proc
            entry = table.get(proc)
            op = last if last.__class__ is int else _opcount(last)  # (the C core reads plain opCounts)
            if entry is None:
                events.append((start, _COLL, (proc, count, op)))
            else:
                entry[0] += count
                entry[2] = op if op is not None else entry[2]

    def _who(self, tail: bytes) -> prefix.Record | None:
        who = self.whos.get(tail, False)
        if who is False:
            if len(self.whos) >= CACHE_LIMIT:
                self.whos.clear()
            who = self.whos[tail] = prefix.plain_who(tail) or prefix.who(_text(tail))
        return who

    # -- the ordered walk -------------------------------------------------------------------------------

    def _walk(self, block: bytes, events: list) -> None:
        """Visit the listed lines in file order, numbering them in C, plus the lines a torn record or a
        bare ``Last error:`` line needs after it."""
        find = block.find
        count = block.count if self.core is None else partial(_count_nl, self.core.newlines, block)
        pos, number, done = 0, self.lines + 1, 0  # ``number``: the line at ``pos``; ``done``: first unread
        for start, kind, data in events:
            if start < done:
                if kind == _NEWCONN:  # its line was read by the grammar (a glued line): add its count
                    self._add_conn(data[0], max(data[1] - 1, 0), None)
                continue
            if self.pending or self.last_error_at or self.cqe:
                number += count(_NL, pos, done)
                pos = done
                if self._waiting(number):
                    pos, number = self._follow(block, pos, number, start)
            number += count(_NL, pos, start)
            pos = start
            end = find(_NL, start)
            self._visit(kind, data, number, block[start:end])
            done = end + 1
        if self.pending or self.last_error_at or self.cqe:
            number += count(_NL, pos, done)
            pos = done
            if self._waiting(number):
                pos, number = self._follow(block, pos, number, len(block))
        self.lines = number - 1 + count(_NL, pos)

    def _waiting(self, number: int) -> bool:
        """Line ``number`` must be read whatever it holds: a torn record's continuation, the text a bare
        ``Last error:`` announced, or a row of an mlx5 error CQE dump."""
        return bool(self.pending or self.last_error_at >= number or self.cqe)

    def _follow(self, block: bytes, pos: int, number: int, stop: int) -> tuple[int, int]:
        """Read the lines from ``pos`` on, up to ``stop``, while :meth:`_waiting`; returns where it stopped
        and that line's number."""
        while pos < stop and self._waiting(number):
            end = block.find(_NL, pos)
            raw = block[pos:end]
            if b"NCCL" in raw:  # a record of its own: the walk or the counters read it
                self._flush_pending()
                self.cqe = None
                break
            if not (self.cqe and self._cqe_row(number, raw)):
                self._general(number, raw)
            pos, number = end + 1, number + 1
        return pos, number

    def _cqe_row(self, number: int, raw: bytes) -> bool:
        """A hex row of the error CQE libmlx5 dumps after ``got completion with error:`` (four rows of
        four 32-bit words); the fourth row's second word ends in the vendor syndrome and the syndrome,
        which are added to the header line's explanation. ``False`` (and the dump given up) otherwise."""
        row = _CQE_ROW.search(raw.decode("ascii", "replace"))
        if row is None:
            self.cqe = None
            return False
        self.cqe[1].append((number, row.group(0).split()))
        if len(self.cqe[1]) == 4:
            self._cqe_explained(*self.cqe)
            self.cqe = None
        return True

    def _cqe_explained(self, header: int, rows: list) -> None:
        line, words = rows[3]
        word = int(words[1], 16)
        syndrome, vendor = word & 0xFF, (word >> 8) & 0xFF
        meaning = _CQE_SYNDROMES.get(syndrome, "a syndrome this table does not name")
        note = (f" This dump (lines {header}-{line}): syndrome 0x{syndrome:02x} = {meaning}, vendor syndrome "
                f"0x{vendor:02x} (fourth row, second word {words[1]}).")
        for entry in self.state.errors.values():
            first = (entry.evidence.file, entry.evidence.line) == (self.name, header)
            if first and note not in entry.explanation:
                entry.explanation += note

    def _visit(self, kind: int, data, number: int, raw: bytes) -> None:
        if self.pending and kind in (_NEWCONN, _COLL):
            self._flush_pending()
        if self.cqe and kind == _GENERAL:  # a CQE row that runs into a line worth reading (UCX's, glued)
            self._cqe_row(number, raw)
        if kind == _GENERAL or (kind == _RECORD and self.pending):
            self._general(number, raw)
        elif kind == _RECORD:
            self._info(number, data[0], data[1], raw)
        elif kind == _NEWCONN:
            self._add_conn(data[0], data[1], Evidence(self.name, number, _text(raw)))
        elif kind == _HOST:
            who = self._who(data)
            if who is not None and who.host not in self.state.host_lines:
                self.state.host_lines[who.host] = Evidence(self.name, number, _text(raw))
        else:
            proc, count, op = data
            entry = self.state.colls.get(proc)
            if entry is None:
                self.state.colls[proc] = [count, Evidence(self.name, number, _text(raw)), op]
            else:
                entry[0] += count
                entry[2] = op if op is not None else entry[2]

    def _add_conn(self, key: tuple[bytes, bytes], lines: int, ev: Evidence | None) -> None:
        entry = self.state.conn_raw.get(key)
        if entry is not None:
            entry[0] += lines
        elif ev is not None:  # (lines 0: a folded key, counted by _flush_conns)
            self.state.new_conn(key, lines, ev)

    def _info(self, number: int, tail: bytes, msg: bytes, raw: bytes) -> None:
        """An INFO record that is not a connection line or a collective call."""
        repeats = self.repeats
        if (tail, msg) in repeats:
            return  # read earlier in this block
        if len(repeats) >= CACHE_LIMIT:
            repeats.clear()
        repeats.add((tail, msg))
        who = self._who(tail)
        if who is None or b"\x1b" in msg or b" | " in msg or b"NCCL" in tail or b" NCCL " in msg \
                or len(raw) > LINE_LIMIT:
            self._general(number, raw)
            return
        text = _text(msg)
        if facts.repeat(self.state, who, text, lambda: Evidence(self.name, number, _text(raw))):
            return
        rec = prefix.Record(who.host, who.pid, who.dev, "INFO", text, "", who.launcher_ip)
        facts.handle(self.state, rec, Evidence(self.name, number, _text(raw)))

    # -- the full grammar -------------------------------------------------------------------------------

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
        elif _APP_ERROR.search(text) or self._catalogued(text):
            self.nccl += 1
            if _FRAMEWORK_ERROR.search(text):
                self.framework_error_at = number
            facts.handle(self.state, prefix.Record(None, None, None, "ERROR", text.strip()), ev)
            if _CQE_HEADER.search(text):
                self.cqe = [number, []]  # the next four lines are the CQE's hex rows

    def _catalogued(self, text: str) -> bool:
        """A line outside NCCL's records that holds one of the caller's own literals, or that a catalogue
        signature matches (holding a catalogue literal is not enough: ``# Out of bounds values : 0 OK``
        holds nccl-tests' literal and is no failure)."""
        if not self.extra_text or not any(e in text for e in self.extra_text):
            return False
        return any(e in text for e in self.own_text) or catalogue.match(text) is not None

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


def _first_lines(split: tuple[list, list, list], wanted: set) -> dict:
    """Where the first line of each (prefix, text) pair in ``wanted`` starts in the block, from its split
    on the Channel marker (one pass over the pairs, offsets summed in C)."""
    pieces, tails, rests = split
    index: dict = {}
    for i, pair in enumerate(zip(tails, rests, strict=True)):
        if pair in wanted and pair not in index:
            index[pair] = i
            if len(index) == len(wanted):
                break
    ends = list(accumulate(map(len, pieces)))
    return {pair: ends[i] + i * len(_CHANNEL) - len(pair[0]) for pair, i in index.items()}


def _count_nl(newlines, block: bytes, _nl: bytes, start: int = 0, end: int = 1 << 62) -> int:
    """``block.count(b"\\n", start, end)`` by the C core."""
    return newlines(block, start, end)


def _torn(msg: bytes) -> bool:
    """A connection line cut before its transport (the rest follows on the next physical line)."""
    return channel.VIA not in msg and msg.count(b"->") == 1


def _opcount(msg: bytes) -> int | None:
    """The opCount of a collective-call line (hex), ``None`` when it cannot be read."""
    at = msg.find(_OPCOUNT)
    word = msg[at + len(_OPCOUNT) :].split(b" ", 1)[0][:16] if at > 0 else b""
    try:
        return int(word, 16)
    except ValueError:
        return None


def _read_blocks(stream: BinaryIO, chunk: int, core=None):
    """(block of whole lines, bytes read for it); a last line without a newline gets one. With the C core
    and a stream whose ``readinto`` is known (files, gzip, the parallel reader's parts), each block is
    read in place into the object that becomes it (``_scan.block``): the loop below copies every block
    once more (the carry joined to the data), which costs as much CPU as reading it. ``core``: the C
    core, or ``None`` (this loop)."""
    if core is not None and _fills_in_place(stream):
        yield from _read_blocks_c(core.block, stream.readinto, chunk)
        return
    carry = b""
    while True:
        data = stream.read(chunk)
        if not data:
            break
        cut = data.rfind(_NL) + 1  # (the carry holds no newline: the block ends in data or is empty)
        if cut == 0:
            block, carry = b"", carry + data
        elif carry:
            block, carry = b"".join((carry, memoryview(data)[:cut])), data[cut:]  # one copy, not two
        else:
            block, carry = data if cut == len(data) else data[:cut], data[cut:]
        if len(carry) > CARRY_LIMIT:  # a line with no end in sight: keep its two ends (all the grammar reads)
            carry = carry[:LINE_LIMIT] + " … ".encode() + carry[-LINE_LIMIT:]
        yield block, len(data)  # empty when no line has ended yet
    if carry:
        yield carry + _NL, 0


def _fills_in_place(stream) -> bool:
    """Does ``stream`` have a ``readinto`` that fills the buffer it is given and keeps no hold on it?"""
    import gzip
    import io

    from topodoc.parsers.nccl_log.parallel import _Range

    return type(stream) in (io.BufferedReader, io.BytesIO, gzip.GzipFile, _Range)


def _read_blocks_c(step, readinto, chunk: int):
    """:func:`_read_blocks` by the C core's ``block`` (``step``), block for block the same."""
    carry = b""
    while True:
        block, carry, read = step(readinto, carry, chunk)
        if not read:
            break
        if len(carry) > CARRY_LIMIT:
            carry = carry[:LINE_LIMIT] + " … ".encode() + carry[-LINE_LIMIT:]
        yield block, read
    if carry:
        yield carry + _NL, 0


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
