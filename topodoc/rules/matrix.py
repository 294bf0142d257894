"""Rules comparing topodoc's derived topology with what the machine's own tools recorded."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.model import Snapshot
from topodoc.rules.common import shortlist
from topodoc.rules.engine import Evidence, Hit, rule
from topodoc.topology import Topology, compare, to_matrix


@rule(
    "smi-matrix-disagrees", "warning", ("topology", "nvidia-smi"),
    reads=("pcie_tree",),
    title="nvidia-smi topo -m disagrees with the topology derived from the PCIe tree and NVLink data",
    fix="compare `nvidia-smi topo -m` with `topodoc topo --from ...`: a cell that differs is a device or "
    "link one of them misreads (a BIOS that hides a switch, a VM's flattened tree, a GPU or NIC missing)",
)
def smi_matrix_disagrees(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    if snapshot.smi_topo is None:
        return
    diffs = compare(to_matrix(topology), snapshot.smi_topo)
    if not diffs:
        return
    cells = [f"{d.row}/{d.column}: nvidia-smi {d.printed or '(none)'}, derived {d.derived or '(none)'}"
             for d in diffs]
    yield Hit(
        subject=shortlist([f"{d.row}/{d.column}" for d in diffs], 6, f" (+{len(diffs) - 6} more)"),
        message=f"{len(diffs)} cell(s) of the recorded `nvidia-smi topo -m` differ from the matrix derived "
        f"from the PCIe tree and NVLink data ({shortlist(cells, 3, ' ...')}): one of them is wrong about "
        "this box, and NCCL builds its own topology the way topodoc derives it",
        evidence=tuple(Evidence("command", f"nvidia-smi topo -m {d.row}/{d.column}", str(d.printed),
                                key=f"smi:{d.row}") for d in diffs[:2])
        + tuple(Evidence("derived", f"topology {d.row}/{d.column}", str(d.derived)) for d in diffs[:2]),
    )


RULES = (smi_matrix_disagrees,)
