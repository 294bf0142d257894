"""Output of the CUDA samples people run to test GPU peer-to-peer: ``p2pBandwidthLatencyTest``,
``simpleP2P`` and ``bandwidthTest``.

Schema (:class:`CudaSampleRun`, every element with its 1-based ``line``):

- ``programs``: which of the three printed their banner, in order;
- ``devices``: ``Device: N, NAME, pciBusID: b, pciDeviceID: d, pciDomainID:D`` (p2pBandwidthLatencyTest)
  and `` Device N: NAME`` (bandwidthTest), with the bus id spelled ``0000:0e:00.0`` when given;
- ``peer_access``: ``Device=0 CAN Access Peer Device=1`` and ``> Peer access from A (GPU0) -> B (GPU1) :
  Yes``: (source, destination, allowed);
- ``matrices``: each titled matrix (``P2P Connectivity Matrix``, ``Unidirectional P2P=Enabled Bandwidth
  (P2P Writes) Matrix (GB/s)``, ``P2P=Disabled Latency Matrix (us)``...): measure, P2P on/off, direction,
  mode, and rows of numbers (latency matrices hold a ``GPU`` and a ``CPU`` table);
- ``copies``: simpleP2P's ``cudaMemcpyPeer / cudaMemcpy between GPU0 and GPU1: 25.06GB/s``;
- ``transfers``: bandwidthTest's (direction, memory, size, GB/s) rows (older samples print MB/s: converted);
- ``problems``: verification errors (wrong data), CUDA errors, ``Test failed``, a waived test;
- ``finished``: the program's closing line was printed (the NOTE line, ``Test passed``/``failed``,
  ``Result = PASS``/``FAIL``); when not, ``stopped_after`` names the last step printed (a hang there,
  or a cut paste: the text cannot tell which);
- ``unknown``: every other non-blank line, kept with its number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class CudaSampleParseError(ValueError):
    """Not the output of p2pBandwidthLatencyTest, simpleP2P or bandwidthTest."""


@dataclass(frozen=True, kw_only=True)
class Device:
    index: int
    name: str
    bus_id: str | None = None  # "0000:0e:00.0"
    line: int


@dataclass(frozen=True, kw_only=True)
class PeerAccess:
    src: int
    dst: int
    allowed: bool
    line: int


@dataclass(frozen=True, kw_only=True)
class MatrixRow:
    table: str  # "D\\D", "GPU" or "CPU" (latency matrices print both)
    src: int
    values: tuple[float, ...]
    line: int


@dataclass(frozen=True, kw_only=True)
class Matrix:
    title: str
    measure: str  # "connectivity", "bandwidth", "latency"
    p2p: bool | None = None  # P2P=Enabled / Disabled
    direction: str | None = None  # "uni", "bi"
    mode: str | None = None  # "writes", "reads" (P2P=Enabled only, when printed)
    unit: str | None = None  # "GB/s", "us"
    columns: int = 0
    rows: tuple[MatrixRow, ...] = ()
    line: int

    def value(self, src: int, dst: int, table: str = "D\\D") -> float | None:
        for row in self.rows:
            if row.src == src and row.table in (table, "D\\D", "GPU") and dst < len(row.values):
                return row.values[dst]
        return None


@dataclass(frozen=True, kw_only=True)
class Copy:
    src: int
    dst: int
    gbps: float
    line: int


@dataclass(frozen=True, kw_only=True)
class Transfer:
    direction: str  # "Host to Device", "Device to Host", "Device to Device"
    memory: str | None = None  # "PINNED", "PAGEABLE"
    size_bytes: int
    gbps: float
    line: int


@dataclass(frozen=True, kw_only=True)
class Problem:
    kind: str  # "wrong_data", "cuda_error", "failed", "waived"
    text: str
    line: int


@dataclass(frozen=True, kw_only=True)
class CudaSampleRun:
    programs: tuple[str, ...] = ()
    devices: tuple[Device, ...] = ()
    peer_access: tuple[PeerAccess, ...] = ()
    matrices: tuple[Matrix, ...] = ()
    copies: tuple[Copy, ...] = ()
    transfers: tuple[Transfer, ...] = ()
    problems: tuple[Problem, ...] = ()
    finished: bool = False
    stopped_after: str | None = None
    last_line: int = 0
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


_BANNERS = (
    (re.compile(r"\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]"), "p2pBandwidthLatencyTest"),
    (re.compile(r"\[\S*simpleP2P\] - Starting"), "simpleP2P"),
    (re.compile(r"\[?CUDA Bandwidth Test\] - Starting"), "bandwidthTest"),
)
_DEVICE = re.compile(
    r"^Device: (\d{1,3}), (.{1,120}?), pciBusID: ([0-9a-fA-F]{1,2}), pciDeviceID: ([0-9a-fA-F]{1,2}), "
    r"pciDomainID:\s?([0-9a-fA-F]{1,8})"
)
_BW_DEVICE = re.compile(r"^\s+Device (\d{1,3}): (\S.{0,120}?)\s*$")
_CAN = re.compile(r"^Device=(\d{1,3}) (CAN|CANNOT) Access Peer Device=(\d{1,3})")
_PEER = re.compile(r"^> Peer access from .{0,120}?\(GPU(\d{1,3})\) -> .{0,120}?\(GPU(\d{1,3})\) : (Yes|No)")
_TITLE = re.compile(
    r"^(?:P2P Connectivity Matrix"
    r"|(?P<dir>Unidirectional|Bidirectional) P2P=(?P<p2p>Enabled|Disabled) Bandwidth "
    r"(?:\((?P<bmode>P2P Writes|P2P Reads)\) )?Matrix \((?P<bunit>GB/s)\)"
    r"|P2P=(?P<lp2p>Enabled|Disabled) Latency (?:\((?P<lmode>P2P Writes|P2P Reads)\) )?Matrix "
    r"\((?P<lunit>us)\))\s*$"
)
_HEAD = re.compile(r"^\s*(D\\D|GPU|CPU)((?:\s+\d{1,3}){1,64})\s*$")
_ROW = re.compile(r"^\s*(\d{1,3})((?:\s+-?\d{1,7}(?:\.\d{1,4})?){1,64})\s*$")
_COPY = re.compile(
    r"^cuda(?:MemcpyPeer|Memcpy) / cudaMemcpy between GPU(\d{1,3}) and GPU(\d{1,3}): ([\d.]{1,12}) ?GB/s"
)
_BW_DIR = re.compile(r"^\s*(Host to Device|Device to Host|Device to Device) Bandwidth")
_BW_MEM = re.compile(r"^\s*(PINNED|PAGEABLE) Memory Transfers")
_BW_UNIT = re.compile(r"^\s*Transfer Size \(Bytes\)\s+Bandwidth\((?P<unit>[GM]B/s)\)")
_BW_ROW = re.compile(r"^\s*(\d{1,14})\s+([\d.]{1,12})\s*$")
_WRONG = re.compile(r"Verification error @ element")
_CUDA_ERR = re.compile(r"\bcuda(?:Error\w*|\s+error|\s+failure)\b|\bCUDA error\b|code=\d+\(cuda\w+\)", re.I)
_FAILED = re.compile(r"^Test failed!?\s*$|^Result = FAIL\b|^&&&& \S+ FAILED")
_WAIVED = re.compile(r"waiving test|Two or more GPUs with Peer-to-Peer access capability are required")
_DONE = re.compile(
    r"NOTE: The CUDA Samples are not meant for performance measurements|^Test passed\s*$|^Test failed!?\s*$"
    r"|^Result = (?:PASS|FAIL)\b|waiving test"
)
# lines the programs print that carry nothing the model keeps (still "known": not reported as unknown)
_KNOWN = re.compile(
    r"^\*\*\*NOTE: In case a device doesn't have P2P access|^So you can see lesser Bandwidth"
    r"|^Checking for multiple GPUs|^CUDA-capable device count|^Checking GPU\(s\) for support"
    r"|^Enabling peer access|^Allocating buffers|^Creating event handles|^Preparing host buffer"
    r"|^Run kernel on GPU|^Copy data back to host|^Disabling peer access|^Shutting down|^Running on\.\.\."
    r"|^\s*(?:Quick|Range|Shmoo) Mode|^\s*Transfer Size \(Bytes\)|^Result = PASS|^Test passed"
)


_MARKS = re.compile(
    r"^(?:Run kernel on GPU\d|Copy data back to host from GPU\d|Verification error @ element \d"
    r"|cudaMemcpyPeer / cudaMemcpy between GPU\d)"
)


def looks_like(lines: list[str]) -> bool:
    """A banner of one of the three programs, or two lines of their own grammar."""
    marks = 0
    for line in lines:
        if any(b.search(line) for b, _name in _BANNERS):
            return True
        if any(p.match(line) for p in (_CAN, _PEER, _TITLE, _DEVICE, _MARKS)):
            marks += 1
            if marks >= 2:
                return True
    return False


def parse(text: str) -> CudaSampleRun:
    state = _State()
    for number, line in enumerate(text.split("\n"), start=1):
        state.read(number, line.rstrip())
    if not state.seen:
        raise CudaSampleParseError("no line of p2pBandwidthLatencyTest, simpleP2P or bandwidthTest output")
    return state.result()


class _State:
    def __init__(self) -> None:
        self.programs: list[str] = []
        self.devices: list[Device] = []
        self.access: list[PeerAccess] = []
        self.matrices: list[dict] = []
        self.copies: list[Copy] = []
        self.transfers: list[Transfer] = []
        self.problems: list[Problem] = []
        self.unknown: list[tuple[int, str]] = []
        self.matrix: dict | None = None
        self.table = "D\\D"
        self.bw_dir: str | None = None
        self.bw_mem: str | None = None
        self.bw_scale = 1.0
        self.finished = False
        self.last_step: str | None = None
        self.last_line = 0
        self.seen = False

    def read(self, number: int, line: str) -> None:
        if not line.strip():
            return
        self.last_line = number
        for banner, name in _BANNERS:
            if banner.search(line):
                self.programs.append(name)
                self._mark(name)
                return
        if self.matrix is not None and self._matrix_line(number, line):
            return
        self.matrix = None
        if self._element(number, line):
            self.seen = True
            return
        if _KNOWN.search(line):
            self._mark(line.strip())
            if _DONE.search(line):
                self.finished = True
            return
        self.unknown.append((number, line))

    def _mark(self, step: str) -> None:
        self.seen = True
        self.last_step = step

    def _matrix_line(self, number: int, line: str) -> bool:
        head = _HEAD.match(line)
        if head:
            self.table = head[1]
            self.matrix["columns"] = max(self.matrix["columns"], len(head[2].split()))
            return True
        row = _ROW.match(line)
        if row:
            values = tuple(float(v) for v in row[2].split())
            row = MatrixRow(table=self.table, src=int(row[1]), values=values, line=number)
            self.matrix["rows"].append(row)
            return True
        return False

    def _element(self, number: int, line: str) -> bool:
        return any(
            step(number, line)
            for step in (self._title, self._device, self._peer, self._copy, self._bandwidth, self._problem)
        )

    def _title(self, number: int, line: str) -> bool:
        m = _TITLE.match(line)
        if not m:
            return False
        p2p = m["p2p"] or m["lp2p"]
        mode = m["bmode"] or m["lmode"]
        measure = "bandwidth" if m["dir"] else "latency" if p2p else "connectivity"
        self.matrix = {
            "title": line.strip(),
            "measure": measure,
            "p2p": None if p2p is None else p2p == "Enabled",
            "direction": {"Unidirectional": "uni", "Bidirectional": "bi"}.get(m["dir"] or ""),
            "mode": mode.split()[1].lower() if mode else None,
            "unit": m["bunit"] or m["lunit"],
            "columns": 0,
            "rows": [],
            "line": number,
        }
        self.matrices.append(self.matrix)
        self.table = "D\\D"
        self._mark(line.strip())
        return True

    def _device(self, number: int, line: str) -> bool:
        m = _DEVICE.match(line)
        if m:
            bus = f"{int(m[5], 16):04x}:{int(m[3], 16):02x}:{int(m[4], 16):02x}.0"
            self.devices.append(Device(index=int(m[1]), name=m[2].strip(), bus_id=bus, line=number))
            return True
        m = _BW_DEVICE.match(line)
        if m and "bandwidthTest" in self.programs:
            self.devices.append(Device(index=int(m[1]), name=m[2], line=number))
            return True
        return False

    def _peer(self, number: int, line: str) -> bool:
        m = _CAN.match(line)
        if m:
            self.access.append(PeerAccess(src=int(m[1]), dst=int(m[3]), allowed=m[2] == "CAN", line=number))
            return True
        m = _PEER.match(line)
        if m:
            self.access.append(PeerAccess(src=int(m[1]), dst=int(m[2]), allowed=m[3] == "Yes", line=number))
            return True
        return False

    def _copy(self, number: int, line: str) -> bool:
        m = _COPY.match(line)
        if not m:
            return False
        self.copies.append(Copy(src=int(m[1]), dst=int(m[2]), gbps=float(m[3]), line=number))
        self._mark(line.strip())
        return True

    def _bandwidth(self, number: int, line: str) -> bool:
        m = _BW_DIR.match(line)
        if m:
            self.bw_dir, self.bw_mem = m[1], None
            self._mark(line.strip())
            return True
        m = _BW_MEM.match(line)
        if m and self.bw_dir:
            self.bw_mem = m[1]
            return True
        m = _BW_UNIT.match(line)
        if m:
            self.bw_scale = 0.001 if m["unit"] == "MB/s" else 1.0  # older samples print MB/s
            return True
        m = _BW_ROW.match(line)
        if m and self.bw_dir:
            self.transfers.append(
                Transfer(direction=self.bw_dir, memory=self.bw_mem, size_bytes=int(m[1]),
                         gbps=round(float(m[2]) * self.bw_scale, 4), line=number)
            )
            return True
        return False

    def _problem(self, number: int, line: str) -> bool:
        kind = (
            "wrong_data" if _WRONG.search(line)
            else "cuda_error" if _CUDA_ERR.search(line)
            else "failed" if _FAILED.search(line)
            else "waived" if _WAIVED.search(line)
            else None
        )
        if kind is None:
            return False
        self.problems.append(Problem(kind=kind, text=line.strip()[:300], line=number))
        if _DONE.search(line):
            self.finished = True
        self._mark(line.strip())
        return True

    def result(self) -> CudaSampleRun:
        matrices = tuple(
            Matrix(**{**m, "rows": tuple(m["rows"])}) for m in self.matrices
        )
        damaged = tuple(
            f"{m.title} (line {m.line}): cut ({len(_whole(m))} of {m.columns} whole rows)"
            for m in matrices
            if m.columns and len(_whole(m)) < m.columns
        )
        return CudaSampleRun(
            programs=tuple(self.programs),
            devices=tuple(self.devices),
            peer_access=tuple(self.access),
            matrices=matrices,
            copies=tuple(self.copies),
            transfers=tuple(self.transfers),
            problems=tuple(self.problems),
            finished=self.finished,
            stopped_after=None if self.finished else self.last_step,
            last_line=self.last_line,
            unknown=tuple(self.unknown),
            damaged=damaged,
        )


def _whole(matrix: Matrix) -> list[MatrixRow]:
    return [r for r in matrix.rows if r.table != "CPU" and len(r.values) == matrix.columns]
