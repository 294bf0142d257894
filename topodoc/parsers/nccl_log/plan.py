"""Which records of a block the scanner must read, and the connection lines it only has to count.

Most of a big ``NCCL_DEBUG=INFO`` log is ring/tree lines and ``Channel ... via ...`` lines, repeated by
every rank for every communicator. :func:`plan` sorts a block's records (the pieces of
``block.split(b" NCCL INFO ")``) into three kinds: lines with nothing to learn (skipped), connection lines
alone on their line (counted under their key, with the index of the first one), and the rest (listed for
:class:`~topodoc.parsers.nccl_log.scan.Scanner` to read). Collective calls (``AllReduce: opCount ...``)
are dropped with tree and ring-order lines. (A second process that made the plans was measured to give
nothing on a busy 2-core machine: removed.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from topodoc.parsers.nccl_log import channel

INFO = b" NCCL INFO "
NL = b"\n"
# first four bytes of a record -> True: never a connection line; False: a connection only with one arrow
_HEADS = {b"Tree": True, b"Patt": True, b"Ring": False}
# collective calls logged with NCCL_DEBUG_SUBSYS=COLL ("AllReduce: opCount 3f sendbuff ..."): nothing to learn
_HEADS.update(dict.fromkeys(
    (b"AllR", b"AllG", b"Redu", b"Broa", b"Send", b"Recv", b"AllT", b"Gath", b"Scat", b"Allt"), True))
# what a line outside INFO records needs to be worth a look: NCCL WARN/CALL/version lines, PyTorch's
# ProcessGroupNCCL, "NCCL error", "ncclRemoteError:" and "Last error:" lines, nccl-tests' "Pid" lines; while
# an input has shown no " NCCL INFO " record yet, also NCCL 2.1's "[0] INFO" / "[0] WARN" (each needle costs
# a pass in C)
# "rror": ncclRemoteError:, Last error:; "] via ": a connection line quoted without its prefix
KEYWORDS = (b"NCCL", b" Pid ", b"rror", b"] via ")
OLD_KEYWORDS = (*KEYWORDS, b"] INFO ", b"] WARN ")


class Plan(NamedTuple):
    records: tuple[int, int]  # (bytes, pieces) of the block: checks that the plan was made for it
    read: list[int]  # records to read, in order
    counted: dict[tuple[bytes, bytes], list[int]]  # connection key -> [lines, first record], first seen first
    old: bool  # no record was seen before this block: the lines before the first one are searched for
    first_hit: bool  # OLD_KEYWORDS (else KEYWORDS), and one of them is there
    hits: dict[int, bool]  # record to read followed by other lines -> one of them holds one of KEYWORDS


def plan(pieces: list[bytes], old: bool, keywords: tuple[bytes, ...] = KEYWORDS,
         old_keywords: tuple[bytes, ...] = OLD_KEYWORDS) -> Plan:
    """Sort the records ``pieces[1:]`` of one block (``pieces[0]`` is the text before the first one);
    ``old``: no earlier block held a record; ``keywords``: what makes a line outside the records worth a
    look (:data:`KEYWORDS` and the scanner's extra literals)."""
    read: list[int] = []
    hits: dict[int, bool] = {}
    counted: dict[tuple[bytes, bytes], list[int]] = {}
    prefixes: dict[bytes, bytes] = {}  # line start in front of a connection line -> channel.place()
    partial = False  # the record before ended without a newline: this one continues its line
    for i in range(1, len(pieces)):
        piece = pieces[i]
        head = _HEADS.get(piece[:4])
        if head is not None and piece.count(NL) == 1 and (head or piece.count(b" -> ") == 2):
            continue  # tree/graph lines, and "Ring 00 : 3 -> 0 -> 1" (ring order): nothing to learn
        nl = piece.find(NL)
        more = nl >= 0 and piece.find(NL, nl + 1) >= 0  # other lines follow the record's own
        alone = nl > 0 and not (more or partial)  # the only record of its line, and a record follows
        if alone and piece.startswith(channel.WORDS) and piece.find(channel.VIA, 0, nl) > 0:
            prev = pieces[i - 1]
            tail = prev[prev.rfind(NL) + 1 :]
            front = prefixes.get(tail)
            if front is None:
                front = prefixes[tail] = channel.place(tail)
            key = (front, piece[piece.find(b" : ", 0, nl) + 3 : nl])
            entry = counted.get(key)
            if entry is None:
                counted[key] = [1, i]
            else:
                entry[0] += 1
            continue
        hit = more and has_keyword(piece, nl + 1, keywords)
        if head and more and not (partial or hit):
            continue  # a collective call or tree line followed by lines that hold nothing either
        partial = nl < 0
        read.append(i)
        if more:
            hits[i] = hit
    first = has_keyword(pieces[0], 0, old_keywords if old else keywords)
    size = sum(map(len, pieces)) + len(INFO) * (len(pieces) - 1)  # the block's length
    return Plan((size, len(pieces)), read, counted, old, first, hits)


def has_keyword(data: bytes, start: int, needles: tuple[bytes, ...]) -> bool:
    """One of ``needles`` is in the whole lines of ``data`` from ``start`` on."""
    end = data.rfind(NL) + 1
    return any(data.find(k, start, end) >= 0 for k in needles)


def read_blocks(stream: BinaryIO, chunk: int) -> Iterator[tuple[bytes, int]]:
    """(block of whole lines, bytes read for it); a last line without a newline gets one."""
    carry = b""
    while True:
        data = stream.read(chunk)
        if not data:
            break
        block = carry + data
        cut = block.rfind(NL) + 1
        carry = block[cut:]
        yield block[:cut], len(data)  # empty when no line has ended yet
    if carry:
        yield carry + NL, 0
