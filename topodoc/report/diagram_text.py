"""The derived topology as text: the machine's shape, NCCL's path types, each GPU's way to its
nearest NIC hop by hop with the bottleneck link, and where nvidia-smi's own matrix disagrees."""

from __future__ import annotations

from topodoc.report.safe import human
from topodoc.topology.types import NCCL_PATHS, SMI_LEVELS, CellDiff, Connection, Link, NicEnd, Topology


def nccl_grid(topology: Topology) -> str:
    """NCCL path types, GPU rows by GPU and NIC columns, tab-separated like nvidia-smi."""
    gpus = [g.name for g in topology.gpus]
    cols = gpus + [n.name for n in topology.nics]
    lines = ["\t" + "\t".join(cols)]
    for row in gpus:
        cells = [" X " if col == row else _nccl(topology.connection(row, col)) for col in cols]
        lines.append("\t".join([row, *cells]))
    return "\n".join(lines) + "\n"


def _nccl(conn: Connection | None) -> str:
    if conn is None:
        return "N/A"
    return f"{conn.nccl}({conn.via})" if conn.via else conn.nccl


def link_text(link: Link | None) -> str:
    if link is None:
        return "unknown"
    if link.kind == "nvlink":
        text = f"NVLink x{link.nvlinks}"
    elif link.kind == "pcie":
        text = f"PCIe Gen{link.gen or '?'} x{link.width or '?'} {link.a} - {link.b}"
        if link.degraded:
            text += f" (trained below max Gen{link.max_gen or '?'} x{link.max_width or '?'})"
    elif link.kind == "c2c":
        text = f"NVLink-C2C x{link.c2c_links or '?'} {link.a} - {link.b}"
    else:
        text = f"CPU interconnect {link.a} - {link.b}"
    bw = f", {link.bandwidth_gbps:g} GB/s per direction" if link.bandwidth_gbps is not None else ""
    return text + bw


def nearest_nic(topology: Topology, gpu: str) -> Connection | None:
    """The NIC NCCL gives ``gpu`` (:func:`topodoc.topology.rails.nccl_nics`: the answer topo and fleet
    show); the nearest NIC of any kind when no RDMA NIC is placed."""
    from topodoc.topology.rails import nccl_nics

    for pair in nccl_nics(topology):
        if pair.gpu.name == gpu:
            return pair.conn
    conns = [c for c in topology.gpu_nic if c.a == gpu]
    smi = (*SMI_LEVELS, "N/A")
    return min(conns, key=lambda c: (NCCL_PATHS.index(c.nccl), smi.index(c.pci_level or "N/A"),
                                     len(c.route.hops)), default=None)


def paths(topology: Topology) -> str:
    lines = []
    for gpu in topology.gpus:
        conn = nearest_nic(topology, gpu.name)
        if conn is None:
            continue
        hops = " -> ".join(h.id for h in conn.route.hops) or "unknown"
        lines.append(f"  {gpu.name} -> {conn.b} ({conn.nccl}): {hops}")
        lines.append(f"      bottleneck: {link_text(conn.route.bottleneck)}")
    return "\n".join(lines) + ("\n" if lines else "")


def diffs_text(diffs: list[CellDiff] | None) -> str:
    if diffs is None:
        return "The source holds no nvidia-smi matrix to compare with.\n"
    if not diffs:
        return "nvidia-smi's own matrix agrees cell for cell.\n"
    lines = [f"nvidia-smi's own matrix differs in {len(diffs)} cell(s):"]
    lines += [f"  {d.row} / {d.column}: derived {d.derived or '-'}, nvidia-smi {d.printed or '-'}"
              for d in diffs]
    return "\n".join(lines) + "\n"


def _nic_line(nic: NicEnd) -> str:
    numa = f"NUMA {nic.numa_node}" if nic.numa_node is not None and nic.numa_node >= 0 else "no NUMA node"
    rate = f", {nic.rate_gbps:g} Gb/s" if nic.rate_gbps else ""
    down = f", {nic.ports_down} port(s) not active" if nic.ports_down else ""
    legend = "" if nic.in_smi_matrix else " (not in nvidia-smi's NIC legend)"
    return f"{nic.name}: {nic.device} ({nic.kind}) at {nic.pci_address}, {numa}{rate}{down}{legend}"


@human
def render_derived(topology: Topology, diffs: list[CellDiff] | None) -> str:
    parts = [f"Machine: {topology.shape.name}\n"]
    notes = topology.shape.notes + topology.notes
    if notes:
        parts.append("".join(f"  note: {n}\n" for n in notes))
    if topology.nics:
        parts.append("\nNICs:\n" + "".join(f"  {_nic_line(n)}\n" for n in topology.nics))
    if topology.gpus:
        parts.append("\nNCCL path types (NVB/PXN name the relay GPU):\n" + nccl_grid(topology))
    nic_paths = paths(topology)
    if nic_paths:
        heading = "Each GPU to the NIC NCCL takes (the nearest; ties as ncclTopoGetLocalNet breaks them):"
        parts.append(f"\n{heading}\n" + nic_paths)
    parts.append("\n" + diffs_text(diffs))
    return "".join(parts)
