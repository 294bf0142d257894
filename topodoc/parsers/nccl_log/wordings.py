"""NCCL release fingerprints: messages whose wording changed between releases, and the releases each fits.

The one table of wordings (:data:`WORDINGS`). Each record names the message's first word (the dispatch key:
one dict lookup per record), a bounded pattern on the message (the text after ``NCCL INFO`` / ``NCCL WARN``),
the first and last release (``major.minor``, inclusive; ``None`` = open) that print it in that form, and
its source: the REFERENCE.md section, and the real log that corrected the reference where one did. A
host's releases are the intersection of the ranges of the wordings it printed
(:func:`host_ranges`). Lines a net plugin printed (its own source file in the WARN, ``ib_plugin.c``) say
nothing about NCCL's release and are not read. Two hosts whose intersections do not overlap run different
NCCL builds, whether
or not they print their version. ``tests/test_nccl_log_wordings.py`` checks every record against every
real log in ``fixtures/logs/real/`` that prints its version.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from topodoc.logmodel import Evidence

Version = tuple[int, int]


@dataclass(frozen=True)
class Wording:
    id: str
    word: str  # the message's first word, as facts.handle sees it (trailing ':' removed)
    pattern: re.Pattern
    first: Version | None
    last: Version | None
    source: str


def _w(id: str, word: str, pattern: str, first: str | None, last: str | None, source: str) -> Wording:
    def version(text: str | None) -> Version | None:
        return tuple(int(p) for p in text.split(".")) if text else None  # type: ignore[return-value]

    return Wording(id, word, re.compile(pattern), version(first), version(last), source)


WORDINGS: tuple[Wording, ...] = (
    _w(
        "bootstrap-spaced",
        "Bootstrap",
        r"^Bootstrap : Using ",
        None,
        "2.23",
        "REFERENCE.md §1.6 (<=2.22, and 2.23 under the BOOTSTRAP subsystem)",
    ),
    _w(
        "bootstrap-unspaced",
        "Bootstrap",
        r"^Bootstrap: Using ",
        "2.24",
        None,
        "REFERENCE.md §1.6 says 2.26+; real 2.24.3 and 2.25.1 logs already print it "
        "(fixtures/logs/real/ibext-sharp-prefix-trimmed-2-24.log, "
        "fixtures/logs/real/rtx5090-maxsharedmem-ib-2-25.log)",
    ),
    _w("assigned-net-plugin", "Assigned", r"^Assigned NET plugin ", "2.27", None, "REFERENCE.md §1.4"),
    _w(
        "initialized-net-plugin",
        "Initialized",
        r"^Initialized NET plugin ",
        "2.27",
        None,
        "REFERENCE.md §1.4",
    ),
    _w(
        "any-net-plugin-failed",
        "Failed",
        r"^Failed to initialize any NET plugin",
        "2.27",
        None,
        "REFERENCE.md §1.4",
    ),
    _w("network-not-found", "Error", r"^Error: network \S+ not found", None, "2.26", "REFERENCE.md §1.4"),
    _w(
        "plugin-none-found-spaced",
        "NET/Plugin",
        r"^NET/Plugin : No plugin found \(",
        "2.4",
        "2.16",
        "REFERENCE.md §1.7 (2.4, 2.7-2.16 rows)",
    ),
    _w(
        "plugin-dlerror",
        "NET/Plugin",
        r"^NET/Plugin : dlerror=",
        "2.19",
        "2.20",
        "REFERENCE.md §1.7 (2.19-2.20)",
    ),
    _w(
        "plugin-none-found-unspaced",
        "NET/Plugin",
        r"^NET/Plugin: No plugin found \(",
        "2.21",
        "2.22",
        "REFERENCE.md §1.7 (2.21)",
    ),
    _w(
        "plugin-internal-network",
        "NET/Plugin",
        r"^NET/Plugin: Could not find: .{1,400}Using internal network plugin",
        "2.22",
        "2.25",
        "REFERENCE.md §1.7 (2.23-2.25); 2.22.3 in fixtures/logs/real/"
        "ib-single-node-2-22-sendrecv-p2p-read (nccl-tests#331)",
    ),
    _w(
        "plugin-internal-net",
        "NET/Plugin",
        r"^NET/Plugin: Could not find: .{1,400}Using internal net plugin",
        "2.26",
        "2.26",
        "REFERENCE.md §1.7 (2.26)",
    ),
    _w(
        "plugin-could-not-find-bare",
        "NET/Plugin",
        r"^NET/Plugin: Could not find: \S{1,200}\s?$",
        "2.27",
        None,
        "REFERENCE.md §1.7 (2.27, 2.28-2.30)",
    ),
    _w(
        "init-busid-no-commid",
        "comm",
        r"^comm \S{1,40} rank \d{1,9} nranks \d{1,9} cudaDev \d{1,6} busId \w{1,20} - Init COMPLETE",
        "2.6",
        "2.15",
        "REFERENCE.md §1.13 (2.7-2.12 row; 2.16 adds commId); 2.6.4 in fixtures/logs/real/"
        "efa-2-6-eks-p3dn-two-nodes (aws-efa-eks)",
    ),
    _w(
        "init-busid-commid",
        "comm",
        r"^comm \S{1,40} rank \d{1,9} nranks \d{1,9} cudaDev \d{1,6} busId \w{1,20} commId 0x\w{1,20} - Init",
        "2.16",
        "2.17",
        "REFERENCE.md §1.13 (2.16 row; 2.18 adds nvmlDev)",
    ),
    _w(
        "init-plain-comm",
        "comm",
        r"^comm \S{1,40} rank \d{1,9} nranks \d{1,9} cudaDev \d{1,6} nvmlDev \d{1,6} busId \w{1,20} commId "
        r"0x\w{1,20} - Init (?:START|COMPLETE)",
        "2.18",
        "2.20",
        "REFERENCE.md §1.13 (2.18-2.20 row)",
    ),
    _w(
        "init-api-comm",
        "ncclCommInitRank",
        r"^ncclCommInitRank comm \S{1,40} rank ",
        "2.21",
        None,
        "REFERENCE.md §1.13 (<api> comm ..., 2.21+)",
    ),
    _w(
        "init-api-config-comm",
        "ncclCommInitRankConfig",
        r"^ncclCommInitRankConfig comm ",
        "2.21",
        None,
        "REFERENCE.md §1.13 (<api> comm ..., 2.21+)",
    ),
    _w(
        "init-rank-tag",
        "[Rank",
        r"^\[Rank \d{1,9}\] nccl\w{1,40} comm ",
        "2.29",
        None,
        "REFERENCE.md §1.13 ([Rank N] <api> comm ..., 2.30); 2.29.2 in fixtures/logs/real/"
        "socket-p2p-shm-disabled-af-unix-2-29-ungrouped-sendrecv (nccl#2057)",
    ),
    _w(
        "comm-mnnvl",
        "comm",
        r"^comm \S{1,40} rank \d{1,9} nRanks \d{1,9} nNodes \d{1,9} .{0,80}MNNVL \d",
        "2.20",
        None,
        "REFERENCE.md §1.13 (comm ... nNodes ... MNNVL, 2.20+)",
    ),
    _w(
        "rings-pxn-gdr",
        "Connected",
        r"^Connected all rings, use ring PXN \d GDR \d",
        "2.24",
        None,
        "REFERENCE.md §1.12 (2.24+)",
    ),
    _w(
        "rings-plain",
        "Connected",
        r"^Connected all rings\s?$",
        None,
        "2.23",
        "REFERENCE.md §1.12 (before 2.24)",
    ),
    _w("closed-net", "Net", r"^Net : Connection closed by remote peer", "2.7", "2.18", "REFERENCE.md §1.14"),
    _w(
        "closed-socketprogress",
        "socketProgress",
        r"^socketProgress: Connection closed by remote peer",
        "2.19",
        None,
        "REFERENCE.md §1.14",
    ),
    _w(
        "cqe-no-peer", "NET/IB", r"^NET/IB : Got completion with error \d", None, "2.11", "REFERENCE.md §1.14"
    ),
    _w(
        "cqe-error-number",
        "NET/IB",
        r"^NET/IB ?: Got completion from peer \S{1,80} with error \d",
        "2.12",
        "2.19",
        "REFERENCE.md §1.14 (2.12, 2.19 rows)",
    ),
    _w(
        "cqe-status-number",
        "NET/IB",
        r"^NET/IB ?: Got completion from peer \S{1,80} with status=\d",
        "2.20",
        "2.29",
        "REFERENCE.md §1.14 says 2.23-2.29; NCCL 2.20.3 already prints it (transport/net_ib.cc:1696 in "
        "NVIDIA/nccl#1524, fixtures/logs/real/roce-lav-mtu-2-20-fe80-gids.log)",
    ),
    _w(
        "cqe-status-symbolic",
        "NET/IB",
        r"^NET/IB ?: Got completion from peer \S{1,80} with status=IBV_",
        "2.30",
        None,
        "REFERENCE.md §1.14",
    ),
    _w("git-version", "NCCL", r"^NCCL git version ", "2.29", None, "REFERENCE.md §1.2"),
    _w(
        "gdr-mode",
        "GPU",
        r"^GPU Direct RDMA (?:Enabled|Disabled) for GPU \d{1,9} .{1,120} mode \w{1,16}\s?$",
        "2.26",
        "2.28",
        "REFERENCE.md §1.12 (2.26-2.28)",
    ),
    _w(
        "gdr-gpu-slash",
        "GPU",
        r"^GPU Direct RDMA (?:Enabled|Disabled) for GPU/",
        "2.29",
        "2.29",
        "REFERENCE.md §1.12 (2.29; TRACE from 2.30)",
    ),
)
_BY_WORD: dict[str, tuple[Wording, ...]] = {}
for _item in WORDINGS:
    _BY_WORD[_item.word] = _BY_WORD.get(_item.word, ()) + (_item,)
BY_ID = {w.id: w for w in WORDINGS}


TRIES = 16  # records of one first word tried per host: a release's wordings show in a host's first lines


def match(msg: str, tries: Counter | None = None, host: str | None = None) -> Wording | None:
    """The wording record ``msg`` (an NCCL message, prefix removed) fits, or ``None``. With ``tries``
    (a counter kept across calls), each host's records of one first word are tried :data:`TRIES` times at
    most, so a log of thousands of Init lines costs a constant here."""
    word = msg.split(" ", 1)[0].rstrip(":")
    if word.startswith("[Rank"):
        word = "[Rank"
    items = _BY_WORD.get(word, ())
    if items and tries is not None:
        tries[(host, word)] += 1
        if tries[(host, word)] > TRIES:
            return None
    for item in items:
        if item.pattern.match(msg[:600]):
            return item
    return None


def text(version: Version | None) -> str | None:
    return ".".join(str(p) for p in version) if version else None


def parse(version: str) -> Version | None:
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def fits(wording: Wording, version: Version) -> bool:
    low, high = wording.first, wording.last
    return (low is None or version >= low) and (high is None or version <= high)


def intersect(ids: list[str]) -> tuple[Version | None, Version | None]:
    """The releases every wording of ``ids`` fits: (first, last); first > last when they conflict."""
    lows = [BY_ID[i].first for i in ids if BY_ID[i].first is not None]
    highs = [BY_ID[i].last for i in ids if BY_ID[i].last is not None]
    return (max(lows) if lows else None), (min(highs) if highs else None)


def host_ranges(seen: dict[tuple, Evidence]) -> dict[str | None, tuple[Version | None, Version | None, list]]:
    """Per host: (first, last, [(wording id, first line)...]) from ``LogState.wordings``."""
    by_host: dict[str | None, list] = {}
    for (host, wid), ev in seen.items():
        by_host.setdefault(host, []).append((wid, ev))
    out = {}
    for host, items in by_host.items():
        items.sort(key=lambda item: (item[1].file, item[1].line))
        first, last = intersect([wid for wid, _ev in items])
        out[host] = (first, last, items)
    return out


def overlap(a: tuple[Version | None, Version | None], b: tuple[Version | None, Version | None]) -> bool:
    low = max((v for v in (a[0], b[0]) if v is not None), default=None)
    high = min((v for v in (a[1], b[1]) if v is not None), default=None)
    return low is None or high is None or low <= high
