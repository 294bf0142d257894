"""Render a ConnectionMatrix as the text ``nvidia-smi topo -m`` (or ``topo -p2p``) prints.

Tab-separated like the driver's own output (driver 535+ layout: ``CPU Affinity``, ``NUMA Affinity``,
``GPU NUMA ID``), then the legend and, when NICs are named ``NIC<n>``, the ``NIC Legend``. The text
parses back to the same model with :func:`topodoc.parsers.smi_topo.parse`. A missing value prints as
``N/A``; a row's missing trailing cells are left off, as in a truncated paste.
"""

from __future__ import annotations

import re

from topodoc.model import ConnectionMatrix, MatrixGpu
from topodoc.report.safe import human

TOPO_LEGEND = (
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges"
    " within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
)
P2P_LEGEND = (
    "  X    = Self",
    "  OK   = Status Ok",
    "  CNS  = Chipset not supported",
    "  GNS  = GPU not supported",
    "  TNS  = Topology not supported",
    "  NS   = Not supported",
    "  DR   = Disabled by regkey",
    "  U    = Unknown",
)


@human
def render(matrix: ConnectionMatrix) -> str:
    """The matrix as nvidia-smi text, ending with a newline."""
    if matrix.kind == "p2p":
        return _render_p2p(matrix)
    names = _names(matrix)
    lines = ["\t" + "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    gpus = {gpu.name: gpu for gpu in matrix.gpus}
    for name in names:
        if name not in matrix.links:
            continue
        cells = [" X " if cell == "X" else cell for cell in _cells(matrix, name, names)]
        extras = _affinity(gpus[name]) if name in gpus and len(cells) == len(names) else []
        lines.append("\t".join([name, *cells, *extras]))
    lines += ["", "Legend:", "", *TOPO_LEGEND]
    lines += _nic_legend(matrix)
    return "\n".join(lines) + "\n"


def _render_p2p(matrix: ConnectionMatrix) -> str:
    names = _names(matrix)
    lines = [f"$ nvidia-smi topo -p2p {matrix.p2p_mode}"] if matrix.p2p_mode else []
    lines.append(" \t" + "".join(f"{name}\t" for name in names))
    for name in names:
        if name in matrix.links:
            lines.append(f" {name}\t" + "".join(f"{cell}\t" for cell in _cells(matrix, name, names)))
    lines += ["", "Legend:", "", *P2P_LEGEND]
    return "\n".join(lines) + "\n"


def _names(matrix: ConnectionMatrix) -> list[str]:
    return [gpu.name for gpu in matrix.gpus] + [nic.name for nic in matrix.nics]


def _cells(matrix: ConnectionMatrix, row: str, names: list[str]) -> list[str]:
    values = [matrix.links[row].get(col) for col in names]
    while values and values[-1] is None:
        values.pop()
    return ["N/A" if value is None else value for value in values]


def _affinity(gpu: MatrixGpu) -> list[str]:
    cpu, numa, gpu_numa = (value or "N/A" for value in (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id))
    return [cpu, numa, "", gpu_numa]


def _nic_legend(matrix: ConnectionMatrix) -> list[str]:
    named = [nic for nic in matrix.nics if re.fullmatch(r"NIC\d+", nic.name) and nic.device]
    if not named:
        return []
    return ["", "NIC Legend:", "", *(f"  {nic.name}: {nic.device}" for nic in named)]
