"""What one pass over a log costs in this Python, next to ``grep -c NCCL`` and the whole analyzer.

    python benchmarks/logs_passes.py [--shape all|own|coll256|init4096|files64|restart] [--scale 0.2]
                                     [--src DIR]

The analyzer's speed target is a ratio to grep, and in CPython every pass over a block that makes an
object per record costs a fixed share of that ratio whatever Python does with the objects afterwards. This
script measures, on the shapes of ``logs_bench.py``, the CPU seconds (``time.process_time``: the machine
is shared, wall time is noise) of the building blocks a scanner design is made of, each over the whole log
in 8 MiB blocks of whole lines, and prints each as a multiple of grep's CPU (the least of three runs):

- ``read``: reading the blocks; ``count``: ``block.count(b"NCCL")`` (one C pass, no objects);
- ``split``: ``block.split(b" NCCL INFO ")`` (one object per record: today's reader);
- ``findall-lit``: one literal-led ``findall`` of the connection lines' text (`` NCCL INFO Channel ...``);
  ``findall-N``: the same without the leading space (``re`` scans for a pattern's first byte, and a space
  is in every few bytes: a literal led by ``N`` is several times cheaper);
- ``findall-nl``: the same lines with their prefix, the pattern led by ``\\n`` (tried at every line start);
- ``reverse``: ``block[::-1]`` (what reading prefixes with a literal-led pattern on reversed text costs);
- today's scanner (:mod:`topodoc.parsers.nccl_log.scan`), pass by pass: ``gates`` (one ``bytes.find`` per
  gate word of :mod:`topodoc.catalogue.gates`), ``records`` (the one literal-led ``finditer`` over every
  ``NCCL`` but trees, ring orders and connection lines), ``channel-fold`` (connection lines: the block
  split on the marker, (prefix, text) pairs counted in a ``Counter``);
- ``C-bulk``: a sorting done by C passes only (the issue's prototype, completed with the prefixes the
  connection keys need): lines with two records counted by one ``findall``, trees/ring orders/collective
  calls cut by one ``subn``, connection lines counted by a ``Counter`` of (prefix, text) pairs -- the
  texts by a literal-led ``findall``, the prefixes by one on the reversed block;
- ``analyze``: the whole analyzer in this process (``--src`` picks the tree), without interpreter start.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs_bench  # noqa: E402  (the shapes)

BLOCK = 8 << 20
_CHANNEL_LIT = re.compile(rb" NCCL INFO Channel (?:\d{1,9}/\d{1,9} : )?([^\n]*)")
_CHANNEL_N = re.compile(rb"NCCL INFO Channel (?:\d{1,9}/\d{1,9} : )?([^\n]*)")
_LINE = re.compile(rb"NCCL INFO [^\n]*()")  # one shared empty bytes per line holding a record
_QUIET = re.compile(rb"NCCL INFO (?:(?:Tree|Patt|AllR|AllG|Redu|Broa|Send|Recv|AllT|Gath|Scat|Allt)[^\n]*"
                    rb"|Ring [^\n>]* -> [^\n>]* -> [^\n>]*(?=\n))")
_CHANNEL_TEXT = re.compile(rb"NCCL INFO Channel \d{1,9}/\d{1,9} : ([^\n]*)")
_CHANNEL_REVERSED = re.compile(rb"C OFNI LCCN (?<=lennahC OFNI LCCN )([^\n]*)")
_CHANNEL_CUT = re.compile(rb"NCCL INFO Channel [^\n]*")
_CHANNEL_NL = re.compile(rb"\n([^ \n]{1,255} \[\d{1,6}\]) NCCL INFO Channel \d{1,9}/\d{1,9} : ([^\n]*)")


def blocks(paths: list[str]):
    for path in paths:
        with open(path, "rb") as f:
            carry = b""
            while data := f.read(BLOCK):
                data = carry + data
                cut = data.rfind(b"\n") + 1
                carry = data[cut:]
                yield data[:cut]
            if carry:
                yield carry + b"\n"


def c_bulk(block: bytes) -> object:
    """The issue's prototype of a C-only sorting, completed with the prefixes connection keys need."""
    info = block.count(b" NCCL INFO ")
    if block.count(b"NCCL INFO ") != info or len(_LINE.findall(block)) != info:
        return None  # a line holding two records: the reader's way
    rest, _quiet = _QUIET.subn(b"", block)
    texts = _CHANNEL_TEXT.findall(rest)
    prefixes = _CHANNEL_REVERSED.findall(rest[::-1])
    if len(texts) != len(prefixes):
        return None
    return Counter(zip(reversed(prefixes), texts, strict=True))


def _channel_fold(block: bytes) -> Counter:
    """Today's scanner's connection fold (scan.Scanner._connections): split on the marker, pair each
    line's prefix with its text after the channel number, count the pairs."""
    pieces = block.split(b" NCCL INFO Channel ")
    tails = [p[p.rfind(b"\n") + 1 :] for p in pieces[:-1]]
    rests = [p[p.find(b" : ", 0, 16) + 3 : p.find(b"\n")] for p in pieces[1:]]
    return Counter(zip(tails, rests, strict=True))


def cpu(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def grep_cpu(paths: list[str], out: str) -> float:
    runs = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out, "wb") as sink:  # a file: grep stops early on /dev/null
            subprocess.run(["grep", "-c", "NCCL", *paths], stdout=sink, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return max(min(runs), 1e-3)


def passes(paths: list[str]) -> dict[str, float]:
    def each(fn) -> Callable[[], None]:
        return lambda: [fn(b) for b in blocks(paths)]

    out = {"read": cpu(each(len))}
    out["count"] = cpu(each(lambda b: b.count(b"NCCL"))) - out["read"]
    out["split"] = cpu(each(lambda b: b.split(b" NCCL INFO "))) - out["read"]
    out["findall-lit"] = cpu(each(_CHANNEL_LIT.findall)) - out["read"]
    out["findall-N"] = cpu(each(_CHANNEL_N.findall)) - out["read"]
    out["findall-nl"] = cpu(each(_CHANNEL_NL.findall)) - out["read"]
    out["reverse"] = cpu(each(lambda b: b[::-1])) - out["read"]
    from topodoc.catalogue.gates import scan_gates
    from topodoc.parsers.nccl_log import scan

    gates = scan_gates()
    out["gates"] = cpu(each(lambda b: [b.find(g) for g in gates])) - out["read"]
    out["records"] = cpu(each(lambda b: [m.start() for m in scan._NCCL.finditer(b)])) - out["read"]
    out["channel-fold"] = cpu(each(_channel_fold)) - out["read"]
    out["C-bulk"] = cpu(each(c_bulk)) - out["read"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="all", choices=["all", *logs_bench.SHAPES])
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--src", help="the topodoc source tree whose analyzer is timed")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    from topodoc.parsers.nccl_log import analyze

    folder = tempfile.mkdtemp(prefix="logs-passes-")
    print(f"scale {args.scale}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; CPU seconds (x grep)")
    try:
        for name in logs_bench.SHAPES if args.shape == "all" else [args.shape]:
            paths = logs_bench.SHAPES[name](folder, args.scale)
            grep = grep_cpu(paths, os.path.join(folder, "grep.out"))
            found = passes(paths)
            found["analyze"] = cpu(lambda paths=paths: analyze(paths))
            mb = sum(os.path.getsize(p) for p in paths) / 1e6
            cells = " | ".join(f"{k} {v:5.2f} ({v / grep:4.1f}x)" for k, v in found.items())
            print(f"{name:9} {mb:6.1f} MB grep {grep:5.3f} | {cells}", flush=True)
            for p in paths:
                os.unlink(p)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
