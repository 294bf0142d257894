"""The NCCL line prefix, and the launcher decorations in front of it.

NCCL prints ``HOST:PID:TID [CUDADEV] NCCL INFO <msg>`` (REFERENCE.md §1.1); WARN lines add
``FILE:LINE [(FUNC)]`` before ``NCCL WARN`` and, from 2.26, a ``[YYYY-MM-DD HH:MM:SS]`` timestamp;
NCCL 2.1 prints ``[0] INFO`` without ``NCCL``; aws-ofi-nccl's test binaries ``INFO: Function: f Line: n:
NET/OFI ...``; the version line may be bare; users paste lines with the
prefix trimmed (``NCCL INFO Using network IB``): a record with no host, pid or device. Launchers add their own
decoration in front: ``[rank3]:`` (torchrun), ``0: `` (``srun --label``), ``[1,7]<stdout>:`` (mpirun
``--tag-output``), ``host: `` (pdsh), ``(RayWorkerWrapper pid=..., ip=...)`` (Ray), CloudWatch
``| timestamp |`` columns, ISO/k8s timestamps, ANSI colours. :func:`split` finds the record wherever it
sits in the line and returns its parts; it never raises.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from topodoc.inputs import strip_ansi  # the one ANSI stripper

_LEAD_TIME = re.compile(
    r"^\s{0,64}(?:\|\s{0,64})?\d{4}-\d\d-\d\d[T ][\d:.,]{1,40}(?:Z|[+-]\d\d:?\d\d)?\s{0,64}(?:\|\s{0,64})?"
)
# Linear on any line: a host may only start where a run of host characters starts and a pid where a run
# of digits starts (the lookbehinds), so a 200k-character token is walked once, not once per position;
# the text between the prefix and the level is bounded.
_HOST = r"(?<![^\s:\[\]|()])(?P<host>[^\s:\[\]|()]{0,255}):"
_RECORD = re.compile(
    rf"(?:{_HOST})?(?<!\d)(?P<pid>\d{{1,12}}):(?P<tid>\d{{1,20}}) \[(?P<dev>\d{{1,6}})\] "
    r"(?P<mid>[^\n]{0,400}?)(?:NCCL )?(?P<level>INFO|WARN|TRACE|ABORT) ?(?P<msg>.*)"
)
_OLD_RECORD = re.compile(r"^\s*\[(?P<dev>\d{1,6})\] (?:NCCL )?(?P<level>INFO|WARN) (?P<msg>.*)")
# a record whose "host:pid:tid [dev]" prefix the user trimmed: "NCCL INFO ..." / "NCCL WARN ..." at the start
# of the line (after a launcher's rank label at most)
_TRIMMED = re.compile(
    r"^\s{0,16}(?:\[rank\d{1,6}\]:\s{0,4}|\d{1,6}:\s{1,4})?NCCL (?P<level>INFO|WARN) (?P<msg>.*)"
)
# aws-ofi-nccl's own test binaries (nccl_message_transfer, ring) print through their own logger
_OFI_TEST = re.compile(
    r"^\s{0,16}(?P<level>INFO|WARN): Function: \S{1,128} Line: \d{1,9}: (?P<msg>NET/OFI .*)"
)
_CALL = re.compile(rf"{_HOST}(?P<pid>\d{{1,12}}):(?P<tid>\d{{1,20}}) NCCL CALL (?P<msg>.*)")
_BARE_VERSION = re.compile(r"NCCL version \d+\.\d+\.\d+\S*\+cuda")
_RAY_IP = re.compile(r"\(\w{1,64} pid=\d{1,12}, ip=(?P<ip>[\d.]{1,64})(?:, [^)]{0,256})?\)")
_TAIL_DUP = re.compile(r" \| [^\s|:]{0,255}:\d{1,12}:\d{1,20} \[\d{1,6}\] ")


class Record(NamedTuple):
    """One NCCL record found in a physical line. ``host``/``pid`` are ``None`` when the line lacks them."""

    host: str | None
    pid: int | None
    dev: int | None
    level: str  # "INFO", "WARN", "TRACE", "CALL"
    msg: str
    origin: str = ""  # WARN's "file.cc:123 (func)" slot
    launcher_ip: str | None = None  # Ray's "ip=..." decoration


def who(tail: str) -> Record | None:
    """Parse the prefix in front of `` NCCL INFO `` (a cacheable unit): host, pid, dev, Ray's ip."""
    return split(clean(tail) + " NCCL INFO -")


def clean(text: str) -> str:
    """Drop ANSI colour codes, carriage returns and a leading ISO/CloudWatch timestamp."""
    if "\x1b" in text or "\r" in text:
        text = strip_ansi(text).replace("\r", "")
    if text[:1].isdigit() or text[:2].strip().startswith("|"):
        text = _LEAD_TIME.sub("", text, count=1)
    return text


def split(text: str) -> Record | None:
    """Find the NCCL record in ``text`` (already :func:`clean`-ed), or ``None`` when there is none."""
    match = _RECORD.search(text)
    if match is None:
        return _split_rare(text)
    mid = match["mid"]
    odd = len(mid) > 160 or (match["level"] == "INFO" and mid)
    if odd and "NCCL" not in text[match.start("mid") : match.start("level")]:
        return None  # "... [3] something INFO ..." is application text, not NCCL's INFO slot
    host = match["host"] or None
    msg = _TAIL_DUP.split(match["msg"], maxsplit=1)[0].rstrip()
    ray = _RAY_IP.search(text, 0, match.start())
    return Record(
        host=host, pid=int(match["pid"]), dev=int(match["dev"]), level=match["level"], msg=msg,
        origin=mid.strip(), launcher_ip=ray["ip"] if ray else None,
    )


def _split_rare(text: str) -> Record | None:
    call = _CALL.search(text)
    if call:
        return Record(call["host"] or None, int(call["pid"]), None, "CALL", call["msg"].rstrip())
    old = _OLD_RECORD.search(text)
    if old:
        return Record(None, None, int(old["dev"]), old["level"], old["msg"].rstrip())
    ofi = _OFI_TEST.match(text)
    if ofi:
        return Record(None, None, None, ofi["level"], ofi["msg"].rstrip())
    trimmed = _TRIMMED.match(text)
    if trimmed:
        return Record(None, None, None, trimmed["level"], trimmed["msg"].rstrip())
    bare = _BARE_VERSION.search(text)  # "+cuda" sets it apart from PyTorch's "..., NCCL version 2.20.5"
    if bare:
        return Record(None, None, None, "VERSION", text[bare.start() :].rstrip())
    return None


_HOST_STOP = re.compile(rb"[\s:\[\]|()\x1b]")


def plain_who(tail: bytes) -> Record | None:
    """``host:pid:tid [dev]`` with nothing around it, read without a pattern (the common case; the same
    answer :func:`who` gives, which reads every other shape)."""
    words = tail.split(b" ")
    if len(words) != 2:
        return None
    parts, dev = words[0].split(b":"), words[1]
    if len(parts) != 3 or not (dev[:1] == b"[" and dev[-1:] == b"]" and dev[1:-1].isdigit()):
        return None
    if len(dev) > 8:
        return None
    host, pid, tid = parts
    if not (pid.isdigit() and tid.isdigit() and len(pid) <= 12 and len(tid) <= 20 and 0 < len(host) <= 255):
        return None
    if host[:1].isdigit() or _HOST_STOP.search(host) or not host.isascii():
        return None  # a timestamp, decorations or odd bytes: the grammar decides
    return Record(host.decode(), int(pid), int(dev[1:-1]), "INFO", "-")
