"""The test programs of NCCL 1.x (``test/single/*_test``, ``test/mpi`` of NVIDIA/nccl v1.2-v1.3.4, 2016-17),
recognized so that they are named as what they are: NCCL 1.x, which topodoc does not read (nccl-tests for NCCL
2 replaced them).

The lines come from the tests' own ``printf`` formats (NVIDIA/nccl ``test/single/all_reduce_test.cu`` at
v1.3.4-1): ``#   Rank %2d uses device %2d [0x%02x] %s``, the ``bytes N type op`` header, and `` Out of
bounds values : %d OK|FAILED``. Schema (:class:`Nccl1Run`): ``devices`` (rank, device, bus, name, line),
``rows`` (how many result lines), ``failed`` (the out-of-bounds check said FAILED), ``damaged`` (the
"not supported" note the report shows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOT_SUPPORTED = (
    "NCCL 1.x test output, not supported: topodoc reads nccl-tests (github.com/NVIDIA/nccl-tests) run "
    "against NCCL 2; NCCL 1.x has no network transport and no NCCL_DEBUG logging to diagnose"
)


class Nccl1ParseError(ValueError):
    """Not NCCL 1.x test output."""


@dataclass(frozen=True, kw_only=True)
class Nccl1Device:
    rank: int
    device: int
    bus: str
    name: str
    line: int


@dataclass(frozen=True, kw_only=True)
class Nccl1Run:
    devices: tuple[Nccl1Device, ...] = ()
    rows: int = 0
    failed: bool = False
    damaged: tuple[str, ...] = (NOT_SUPPORTED,)


_DEVICE = re.compile(r"^#\s+Rank\s+(\d{1,4}) uses device\s+(\d{1,3}) \[(0x[0-9a-fA-F]{2})\] (.{1,120})$")
_HEADER = re.compile(r"^#\s+bytes\s+N\s+type\s+op\s+time\s+algbw\s+busbw\s+res\b")
_ROW = re.compile(r"^\s*\d{1,14}\s+\d{1,14}\s+\w{1,10}\s+\w{1,6}\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\S+")
_BOUNDS = re.compile(r"^\s*Out of bounds values : \d+ (OK|FAILED)")


def looks_like(lines: list[str]) -> bool:
    return any(_DEVICE.match(line) or _HEADER.match(line) for line in lines)


def parse(text: str) -> Nccl1Run:
    devices, rows, failed = [], 0, False
    for number, line in enumerate(text.split("\n"), start=1):
        m = _DEVICE.match(line.rstrip())
        if m:
            devices.append(Nccl1Device(rank=int(m[1]), device=int(m[2]), bus=m[3], name=m[4].strip(),
                                       line=number))
        elif _ROW.match(line):
            rows += 1
        bounds = _BOUNDS.match(line)
        if bounds:
            failed = failed or bounds[1] == "FAILED"
    if not devices and not rows:
        raise Nccl1ParseError("no NCCL 1.x test line")
    return Nccl1Run(devices=tuple(devices), rows=rows, failed=failed)
