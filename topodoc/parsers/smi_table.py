"""The default ``nvidia-smi`` table and ``nvidia-smi -L``.

Schema (:class:`SmiTable`, every element with its 1-based ``line``):

- ``smi_version``, ``driver_version``, ``cuda_version``: the header line (``NVIDIA-SMI 535.216.01  Driver
  Version: 535.216.01  CUDA Version: 12.2``; drivers before 410 print no CUDA version);
- ``gpus``: one :class:`SmiGpu` per GPU block of the table: index, name as printed (``truncated`` when it
  ends in ``...``), persistence (On/Off), bus id (``0000:18:00.0``), display active, the ``Volatile
  Uncorr. ECC`` cell as printed (``0``, ``N/A``, ``On`` under MIG, a count), fan, temperature, perf state,
  power, memory used/total MiB, utilisation, compute mode, MIG mode (``MIG M.`` row, when printed);
- ``processes``: the ``Processes`` table: GPU, GI/CI ids (MIG), PID, type, name, memory;
- ``listed``: ``nvidia-smi -L`` lines: index, name, UUID, and the MIG devices under each GPU;
- ``failures``: what nvidia-smi printed instead of a table (``couldn't communicate with the NVIDIA
  driver``, ``No devices were found``, ``Driver/library version mismatch`` with the ``NVML library
  version`` line after it, other ``Failed to initialize NVML``, ``ERR!`` cells, ``GPU is lost``);
- ``unknown``: every other non-blank line outside the table's frame, kept with its number.

:meth:`SmiTable.model_gpus` gives the :class:`~topodoc.model.Gpu` entries (index, name unless truncated,
bus id, UUID from ``-L``, persistence, MIG) that ``diagnose FILE...`` adds to the text machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoc import pciaddr
from topodoc.model import Gpu


class SmiTableParseError(ValueError):
    """Neither the nvidia-smi table nor nvidia-smi -L output."""


@dataclass(frozen=True, kw_only=True)
class SmiGpu:
    index: int
    name: str
    truncated: bool = False
    persistence: str | None = None  # "On", "Off"
    bus_id: str | None = None  # "0000:18:00.0"
    display_active: str | None = None
    ecc_uncorrectable: str | None = None  # the cell as printed
    fan: str | None = None
    temperature: str | None = None
    perf: str | None = None
    power: str | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    utilization: str | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None  # "Enabled", "Disabled", "N/A"
    line: int

    @property
    def ecc_errors(self) -> int | None:
        """The volatile uncorrectable ECC count when the cell is a number."""
        return int(self.ecc_uncorrectable) if (self.ecc_uncorrectable or "").isdigit() else None


@dataclass(frozen=True, kw_only=True)
class SmiProcess:
    gpu: int
    gi: str | None = None
    ci: str | None = None
    pid: int
    type: str
    name: str
    memory: str | None = None
    line: int


@dataclass(frozen=True, kw_only=True)
class ListedGpu:
    index: int
    name: str
    uuid: str | None = None
    mig_devices: tuple[str, ...] = ()  # "MIG 1g.10gb Device 0 (MIG-...)"
    line: int


@dataclass(frozen=True, kw_only=True)
class SmiFailure:
    kind: str  # "no_driver", "no_devices", "version_mismatch", "no_nvml", "err_cell", "gpu_lost"
    text: str
    line: int


@dataclass(frozen=True, kw_only=True)
class SmiTable:
    smi_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    header_line: int = 0
    gpus: tuple[SmiGpu, ...] = ()
    processes: tuple[SmiProcess, ...] = ()
    listed: tuple[ListedGpu, ...] = ()
    failures: tuple[SmiFailure, ...] = ()
    nvml_library_version: str | None = None  # printed after "Driver/library version mismatch"
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()

    def model_gpus(self) -> tuple[Gpu, ...]:
        uuids = {g.index: g.uuid for g in self.listed}
        names = {g.index: g.name for g in self.listed}
        out = {}
        for g in self.gpus:
            out[g.index] = Gpu(
                index=g.index,
                name=names.get(g.index) or (None if g.truncated else g.name),
                uuid=uuids.get(g.index),
                pci_address=pciaddr.try_normalize(g.bus_id),
                persistence_mode={"On": True, "Off": False}.get(g.persistence or ""),
                mig_mode={"Enabled": True, "Disabled": False}.get(g.mig_mode or ""),
            )
        for g in self.listed:
            out.setdefault(g.index, Gpu(index=g.index, name=g.name, uuid=g.uuid))
        return tuple(out[i] for i in sorted(out))


_HEADER = re.compile(
    r"NVIDIA-SMI (?P<smi>[\d.]{1,20})\s+Driver Version: (?P<drv>[\d.]{1,20})"
    r"(?:\s+CUDA Version: (?P<cuda>[\d.]{1,10}|N/A))?"
)
_COLUMNS = re.compile(r"^\|\s*GPU\s+Name\s+(?:TCC/WDDM|Persistence-M)")
_FRAME = re.compile(r"^[+|][-=+| ]*$")
_ROW1_A = re.compile(r"^\s*(\d{1,3})\s+(.+?)\s+(On|Off|WDDM|TCC)\s*$")
_ROW1_B = re.compile(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(\S+)\s*$")
_ROW2_A = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(.*?)\s*$")
_ROW2_B = re.compile(r"^\s*(\d{1,9})MiB\s*/\s*(\d{1,9})MiB\s*$")
_ROW2_C = re.compile(r"^\s*(\S+)\s+(.+?)\s*$")
_PROC = re.compile(
    r"^\|\s+(\d{1,3})\s+(?:(N/A|\d{1,4})\s+(N/A|\d{1,4})\s+)?(\d{1,9})\s+(C\+G|C|G)\s+(.+?)\s+"
    r"(\d{1,9}MiB|N/A)\s*\|$"
)
_LISTED = re.compile(r"^GPU (\d{1,3}): (.+?) \(UUID: (GPU-[0-9a-fA-F-]{1,60})\)")
_LISTED_MIG = re.compile(r"^\s+(MIG \S+\s+Device\s+\d{1,3}): \(UUID: (MIG-[0-9a-fA-F/-]{1,80})\)")
_FAILURES = (
    (re.compile(r"couldn't communicate with the NVIDIA driver"), "no_driver"),
    (re.compile(r"^No devices were found"), "no_devices"),
    (re.compile(r"Driver/library version mismatch"), "version_mismatch"),
    (re.compile(r"^Failed to initialize NVML"), "no_nvml"),
    (re.compile(r"\bGPU is lost\b|Unable to determine the device handle"), "gpu_lost"),
)
_KNOWN = re.compile(
    r"^\|\s*(?:Fan\s+Temp|Processes:|GPU\s+(?:GI|PID)|ID\s+ID|MIG devices:|GPU\s+GI\s+CI)"
    r"|^\|\s+No running processes found|^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$|MIG M\.\s*\|\s*$"
    r"|(?:^|[$#] )nvidia-smi(?: -L)?\s*$"
)


_NVLINK = re.compile(r"^\s+Link \d{1,2}: ")
_OWN_FAILURE = re.compile(r"couldn't communicate with the NVIDIA driver|^Failed to initialize NVML: ")
_NVML_LIB = re.compile(r"^NVML library version: ([\d.]{1,20})\s*$")


def looks_like(lines: list[str]) -> bool:
    """The table's header and column lines, a GPU row of the table, two ``nvidia-smi -L`` lines, or
    nvidia-smi's own failure."""
    header = columns = listed = 0
    for line in lines:
        if _OWN_FAILURE.search(line) or _gpu_row(line):
            return True
        header += bool(_HEADER.search(line))
        columns += bool(_COLUMNS.match(line))
        listed += bool(_LISTED.match(line))
        if _NVLINK.match(line):
            return False  # nvidia-smi nvlink prints the same GPU lines, with its links under them
    return bool((header and columns) or listed >= 2 or (listed and header))


def _gpu_row(line: str) -> tuple[re.Match, re.Match, str] | None:
    """``|   0  NAME  On  | 00000000:18:00.0 Off |  0 |``: (index/name/persistence, bus id/display, ECC)."""
    if not line.startswith("|") or line.count("|") != 4:
        return None
    cells = line.strip().strip("|").split("|")
    a, b = _ROW1_A.match(cells[0]), _ROW1_B.match(cells[1])
    return (a, b, cells[2]) if a and b else None


def parse(text: str) -> SmiTable:
    state = _State()
    for number, line in enumerate(text.split("\n"), start=1):
        state.read(number, line.rstrip())
    if not (state.head or state.gpus or state.listed or state.failures):
        raise SmiTableParseError("no nvidia-smi header, GPU row or nvidia-smi -L line")
    return state.result()


class _State:
    def __init__(self) -> None:
        self.head: dict = {}
        self.gpus: list[dict] = []
        self.processes: list[SmiProcess] = []
        self.listed: list[dict] = []
        self.failures: list[SmiFailure] = []
        self.unknown: list[tuple[int, str]] = []
        self.row = 0  # which line of the current GPU block comes next (1, 2, 3)
        self.mig_section = False
        self.nvml_lib: str | None = None

    def read(self, number: int, line: str) -> None:
        if not line.strip():
            return
        for pattern, kind in _FAILURES:
            if pattern.search(line):
                self.failures.append(SmiFailure(kind=kind, text=line.strip()[:300], line=number))
                return
        m = _NVML_LIB.match(line)
        if m:
            self.nvml_lib = m[1]
            return
        m = _HEADER.search(line)
        if m:
            self.head = {"smi_version": m["smi"], "driver_version": m["drv"], "cuda_version": m["cuda"],
                         "header_line": number}
            return
        if self._listed(number, line):
            return
        if _FRAME.match(line):
            self.row = 0 if self.row in (2, 3) else self.row  # an old table has no MIG M. row
            return
        if _COLUMNS.match(line):
            self.row, self.mig_section = 1, False
            return
        if "MIG devices:" in line:
            self.mig_section, self.row = True, 0
            return
        if line.startswith("|") and self._table_line(number, line):
            return
        if _KNOWN.search(line) or (self.mig_section and line.startswith("|")):
            return
        self.unknown.append((number, line))

    def _listed(self, number: int, line: str) -> bool:
        m = _LISTED.match(line)
        if m:
            self.listed.append({"index": int(m[1]), "name": m[2].strip(), "uuid": m[3], "mig": [],
                                "line": number})
            return True
        m = _LISTED_MIG.match(line)
        if m and self.listed:
            self.listed[-1]["mig"].append(f"{' '.join(m[1].split())} ({m[2]})")
            return True
        return False

    def _table_line(self, number: int, line: str) -> bool:
        proc = _PROC.match(line)
        if proc:
            self.processes.append(
                SmiProcess(gpu=int(proc[1]), gi=proc[2], ci=proc[3], pid=int(proc[4]), type=proc[5],
                           name=proc[6], memory=proc[7], line=number)
            )
            return True
        if "ERR!" in line:
            self.failures.append(SmiFailure(kind="err_cell", text=line.strip()[:300], line=number))
        cells = line.strip().strip("|").split("|")
        if len(cells) != 3 or self.mig_section:
            return False
        row = _gpu_row(line)
        if row:
            a, b, _ecc = row
            name = a[2].strip()
            short = name.removesuffix("...").rstrip()
            self.gpus.append({
                "index": int(a[1]), "name": short, "truncated": short != name,
                "persistence": a[3], "bus_id": pciaddr.try_normalize(b[1]) or b[1].lower(),
                "display_active": b[2], "ecc_uncorrectable": cells[2].strip() or None, "line": number,
            })
            self.row = 2
            return True
        if self.row == 2 and self.gpus:
            return self._row2(cells)
        if self.row == 3 and self.gpus and not cells[0].strip() and not cells[1].strip():
            self.gpus[-1]["mig_mode"] = cells[2].strip() or None
            self.row = 0
            return True
        return False

    def _row2(self, cells: list[str]) -> bool:
        a, b, c = _ROW2_A.match(cells[0]), _ROW2_B.match(cells[1]), _ROW2_C.match(cells[2])
        if not b:
            return False
        gpu = self.gpus[-1]
        if a:
            gpu.update(fan=a[1], temperature=a[2], perf=a[3], power=a[4] or None)
        gpu.update(memory_used_mib=int(b[1]), memory_total_mib=int(b[2]))
        if c:
            gpu.update(utilization=c[1], compute_mode=c[2])
        self.row = 3
        return True

    def result(self) -> SmiTable:
        listed = tuple(
            ListedGpu(index=g["index"], name=g["name"], uuid=g["uuid"], mig_devices=tuple(g["mig"]),
                      line=g["line"])
            for g in self.listed
        )
        damaged = ()
        if self.head and not self.gpus and not self.failures:
            damaged = (f"the table header (line {self.head['header_line']}) is followed by no GPU row",)
        return SmiTable(
            **self.head,
            gpus=tuple(SmiGpu(**g) for g in self.gpus),
            processes=tuple(self.processes),
            listed=listed,
            failures=tuple(self.failures),
            nvml_library_version=self.nvml_lib,
            unknown=tuple(self.unknown),
            damaged=damaged,
        )
