"""Name the machine: how its GPUs are joined by NVLink and how they hang off the PCIe tree.

NVLink: an NVLink fabric clique (NVL72-style: NVML's fabric state ``completed`` with a cluster UUID),
NVSwitch all-to-all, bridge pairs (every GPU bonded to at most one peer), the DGX-1 hybrid cube mesh
(8 GPUs, 4 NVLink peers each), a full mesh, a partial mesh, or none. PCIe: a flattened VM tree (GPUs
straight on root buses, no bridges visible; often no NUMA node either), GPUs behind PCIe switches,
GPUs straight on CPU root ports, mixed.
"""

from __future__ import annotations

from collections import Counter

from topodoc import model
from topodoc.topology import nvlink, pcitree
from topodoc.topology.types import DOWNSTREAM, ROOT_PORT, UPSTREAM, Connection, GpuEnd, MachineShape


def classify(snapshot: model.Snapshot, gpus: tuple[GpuEnd, ...], pairs: tuple[Connection, ...],
             links: dict[int, nvlink.GpuLinks]) -> MachineShape:
    nv_kind, nv_text = _nvlink_kind(gpus, pairs, links)
    pcie_kind, pcie_text = _pcie_kind(snapshot, gpus)
    sockets = _sockets(snapshot, gpus)
    parts = [nv_text, pcie_text, f"{sockets} socket{'s' * (sockets != 1)}", f"{len(gpus)} GPUs"]
    return MachineShape(
        nvlink=nv_kind,
        pcie=pcie_kind,
        gpus=len(gpus),
        sockets=sockets,
        name=" · ".join(parts),
        notes=_shape_notes(gpus, pairs, nv_kind),
    )


def _counts(pairs: tuple[Connection, ...]) -> str:
    values = sorted({p.nvlinks for p in pairs if p.nvlinks})
    return "/".join(f"NV{v}" for v in values)


def _nvlink_kind(gpus: tuple[GpuEnd, ...], pairs: tuple[Connection, ...],
                 links: dict[int, nvlink.GpuLinks]) -> tuple[str, str]:
    cliques = {g.clique for g in gpus if g.clique}
    if cliques:
        return "fabric-clique", f"NVLink fabric clique {', '.join(sorted(cliques))} ({_counts(pairs)})"
    if any(g.nvswitch_links for g in gpus):
        off = [g.name for g in gpus if not g.nvswitch_links]
        if off:  # not all-to-all: those GPUs reach the others over PCIe
            return "nvswitch", (f"NVSwitch ({_counts(pairs)}) with {len(off)} of {len(gpus)} GPUs off the "
                                f"fabric ({', '.join(off)})")
        return "nvswitch", f"NVSwitch all-to-all ({_counts(pairs)})"
    peers = {g.index: [p for p, n in links[g.index].peers.items() if n] for g in gpus}
    if not any(peers.values()):
        return "none", "no NVLink"
    if all(len(v) <= 1 for v in peers.values()):
        bonded = sorted({tuple(sorted((k, v[0]))) for k, v in peers.items() if v})
        text = ", ".join(f"{a}-{b}" for a, b in bonded)
        return "bridge-pairs", f"NVLink bridge pairs ({_counts(pairs)}): GPUs {text}"
    if all(len(v) == len(gpus) - 1 for v in peers.values()):
        return "full-mesh", f"NVLink full mesh ({_counts(pairs)})"
    if len(gpus) == 8 and all(len(v) == 4 for v in peers.values()):
        return "hybrid-cube-mesh", f"DGX-1 style hybrid cube mesh ({_counts(pairs)}, NVB between the rest)"
    return "partial-mesh", f"partial NVLink mesh ({_counts(pairs)})"


def _pcie_kind(snapshot: model.Snapshot, gpus: tuple[GpuEnd, ...]) -> tuple[str, str]:
    pci = snapshot.pci
    placed = [g for g in gpus if g.pci_address in pci]
    if not gpus:
        return "none", "no NVIDIA GPU found"
    if not placed:
        return "none", "GPUs' PCIe placement not recorded"
    kinds = Counter(_placement(pci, g.pci_address) for g in placed)
    if set(kinds) == {"root-bus"}:
        bridges = {pcitree.host_bridge(pci, g.pci_address) for g in placed}
        nodes = sorted({g.numa_node for g in placed if g.numa_node is not None and g.numa_node >= 0})
        numa = f"NUMA {', '.join(map(str, nodes))}" if nodes else "no NUMA node"
        plural = "s" * (len(bridges) > 1)
        return "flat-vm", f"flattened VM PCIe tree ({len(bridges)} host bridge{plural}, {numa})"
    if set(kinds) == {"switch"}:
        return "switches", "GPUs behind PCIe switches"
    if set(kinds) == {"root-port"}:
        return "root-ports", "GPUs on CPU root ports"
    return "mixed", "mixed PCIe placement (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"


def _placement(pci: dict[str, model.PciDevice], address: str) -> str:
    up = pcitree.chain(pci, address)[1:]
    if not up:
        return "root-bus"
    if any(pcitree.port_kind(pci, x) in (UPSTREAM, DOWNSTREAM) for x in up):
        return "switch"
    return "root-port" if pcitree.port_kind(pci, up[0]) == ROOT_PORT else "bridge"


def _sockets(snapshot: model.Snapshot, gpus: tuple[GpuEnd, ...]) -> int:
    if snapshot.host.sockets:
        return snapshot.host.sockets
    nodes = {n.node for n in snapshot.numa} or {g.numa_node for g in gpus if g.numa_node is not None}
    return max(1, len({n for n in nodes if n >= 0}))


def _shape_notes(gpus: tuple[GpuEnd, ...], pairs: tuple[Connection, ...], nv_kind: str) -> tuple[str, ...]:
    notes = [f"{g.name}: {g.nvlinks_down} NVLink(s) down" for g in gpus if g.nvlinks_down]
    if nv_kind in ("nvswitch", "fabric-clique"):
        notes += [f"{g.name}: no active NVLink into the NVSwitch fabric" for g in gpus
                  if not g.nvswitch_links]
        widths = Counter(g.nvswitch_links for g in gpus if g.nvswitch_links)
        if len(widths) > 1:
            usual = widths.most_common(1)[0][0]
            notes += [f"{g.name}: {g.nvswitch_links} NVSwitch links where its peers have {usual}"
                      for g in gpus if g.nvswitch_links and g.nvswitch_links != usual]
    if nv_kind == "hybrid-cube-mesh":
        nvb = sum(1 for p in pairs if p.nccl == "NVB")
        notes.append(f"{nvb} GPU pairs have no direct NVLink; NCCL relays them through a peer GPU (NVB)")
    return tuple(notes)
