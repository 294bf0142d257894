"""The derived topology as an ``nvidia-smi topo -m`` matrix, and a cell-by-cell comparison.

:func:`to_matrix` gives a :class:`topodoc.model.ConnectionMatrix` in the shape ``topodoc topo --json``
prints: GPU0.. and NIC0.. with a NIC legend of device names, CPU affinity from the GPU's local CPUs,
NUMA affinity and ``GPU NUMA ID`` (``Gpu.gpu_numa_id``, from nvmlDeviceGetNumaNodeId); like the parser,
a value nvidia-smi prints as ``N/A`` is ``None`` (NUMA affinity when firmware gave no node; GPU NUMA ID,
which only Grace/coherent systems fill).
nvidia-smi's NIC legend lists Mellanox/NVIDIA RDMA devices only; ``all_nics=True`` adds EFA, gVNIC
and the rest.

:func:`compare` matches GPUs by name and NICs by device name (old drivers head NIC columns with
``mlx5_0`` and print no legend), so it works across driver generations.
"""

from __future__ import annotations

from topodoc import model
from topodoc.cpuset import CpuSet, CpuSetError
from topodoc.topology.types import CellDiff, Topology

AFFINITY_COLUMNS = {
    "CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id",
}


def to_matrix(topology: Topology, *, all_nics: bool = False) -> model.ConnectionMatrix:
    nics = [n for n in topology.nics if all_nics or n.in_smi_matrix]
    names = [g.name for g in topology.gpus] + [n.name for n in nics]
    links: dict[str, dict[str, str]] = {row: {} for row in names}
    for conn in (*topology.gpu_pairs, *topology.gpu_nic, *topology.nic_pairs):
        if conn.a in links and conn.b in links:
            links[conn.a][conn.b] = conn.smi
            links[conn.b][conn.a] = conn.smi
    for row in names:
        links[row] = {col: "X" if col == row else links[row].get(col, "N/A") for col in names}
    gpus = tuple(
        model.MatrixGpu(
            name=g.name,
            cpu_affinity=g.cpu_affinity or None,
            numa_affinity=str(g.numa_node) if g.numa_node is not None and g.numa_node >= 0 else None,
            gpu_numa_id=str(g.gpu_numa_id) if g.gpu_numa_id is not None else None,
        )
        for g in topology.gpus
    )
    return model.ConnectionMatrix(kind="topo", gpus=gpus,
                                  nics=tuple(model.MatrixNic(n.name, n.device) for n in nics), links=links)


def _keys(matrix: model.ConnectionMatrix) -> dict[str, str]:
    """Row/column name -> identity: GPUs by name, NICs by their device (legend) name."""
    keys = {g.name: g.name for g in matrix.gpus}
    keys.update({n.name: n.device or n.name for n in matrix.nics})
    for row in matrix.links:
        keys.setdefault(row, row)
    return keys


def cpuset(text: str | None) -> CpuSet | str | None:
    """"0-31,64-95" -> the CPUs as bounded ranges (never expanded); text that is not a CPU list (or names
    CPUs no machine has) comes back stripped, compared as text."""
    if text is None:
        return None
    try:
        return CpuSet.parse(text.replace(" ", ""))
    except CpuSetError:
        return text.strip()


def compare(derived: model.ConnectionMatrix, printed: model.ConnectionMatrix) -> list[CellDiff]:
    """Every cell that differs, named as the printed matrix names it; affinity columns only where
    the printed matrix has them."""
    dk, pk = _keys(derived), _keys(printed)
    d_by = {dk[r]: r for r in derived.links}
    p_by = {pk[r]: r for r in printed.links}
    label = {**d_by, **p_by}
    order = list(dict.fromkeys([*p_by, *d_by]))
    diffs = []
    for row in order:
        for col in order:
            d = derived.links.get(d_by.get(row, ""), {}).get(d_by.get(col, ""))
            p = printed.links.get(p_by.get(row, ""), {}).get(p_by.get(col, ""))
            if d != p:
                diffs.append(CellDiff(row=label[row], column=label[col], derived=d, printed=p))
    return diffs + _affinity_diffs(derived, printed)


def _affinity_diffs(derived: model.ConnectionMatrix, printed: model.ConnectionMatrix) -> list[CellDiff]:
    ours = {g.name: g for g in derived.gpus}
    diffs = []
    for theirs in printed.gpus:
        mine = ours.get(theirs.name, model.MatrixGpu(name=theirs.name))
        for column, attr in AFFINITY_COLUMNS.items():
            p, d = getattr(theirs, attr), getattr(mine, attr)
            if p is None:
                continue
            same = cpuset(p) == cpuset(d) if attr == "cpu_affinity" else p == d
            if not same:
                diffs.append(CellDiff(row=theirs.name, column=column, derived=d, printed=p))
    return diffs
