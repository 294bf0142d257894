"""The drawable graph of a machine: sockets, host bridges, root ports, switches, GPUs, NICs, NVLink.

Only the parts of the PCIe tree above a GPU or a NIC are drawn; a switch's downstream ports fold
into the switch. Each PCIe edge carries the trained link (``Gen4 x16``) and is marked degraded when
it trained below what both ends support. Labels use ``\\n`` between lines; renderers adapt it.
"""

from __future__ import annotations

from topodoc import model
from topodoc.topology import nvlink, pcitree
from topodoc.topology.types import (
    BRIDGE,
    C2C,
    DOWNSTREAM,
    NVLINK,
    NVSWITCH,
    PCIE,
    ROOT_PORT,
    SMP,
    UPSTREAM,
    Connection,
    Edge,
    GpuEnd,
    Graph,
    Link,
    NicEnd,
    Node,
)

_VENDORS = {0x10B5: "PLX/Broadcom", 0x1000: "Broadcom", 0x11F8: "Microchip", 0x10DE: "NVIDIA"}


class _Builder:
    def __init__(self, snapshot: model.Snapshot):
        self.pci = snapshot.pci
        self.numa_cpus = {n.node: n.cpulist for n in snapshot.numa}
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []

    def numa(self, address: str | None) -> str:
        node = pcitree.numa_of(self.pci, address) if address else None
        key = f"numa{node}" if node is not None and node >= 0 else "numa?"
        if key not in self.nodes:
            cpus = self.numa_cpus.get(node) if node is not None else None
            label = f"NUMA {node}" if key != "numa?" else "CPU (no NUMA node)"
            self.nodes[key] = Node(id=key, kind="numa", label=label + (f"\nCPUs {cpus}" if cpus else ""))
        return key

    def add(self, node: Node) -> None:
        self.nodes.setdefault(node.id, node)

    def hang(self, address: str, node: Node) -> None:
        """Add a device and everything drawn above it, with PCIe edges upwards."""
        self.add(node)
        child_id, child_addr = node.id, address
        for up in pcitree.chain(self.pci, address)[1:]:
            kind = pcitree.port_kind(self.pci, up)
            if kind == DOWNSTREAM:
                continue
            parent = self._port_node(up, kind, node.parent)
            self._edge(child_addr, child_id, parent.id)
            if parent.id in self.nodes:
                return
            self.add(parent)
            child_id, child_addr = parent.id, up
        bridge = pcitree.host_bridge(self.pci, address) or "pci?"
        self._edge(child_addr, child_id, bridge)
        if bridge not in self.nodes:
            self.add(Node(id=bridge, kind="host_bridge", label=f"host bridge\n{bridge}", parent=node.parent))
            if node.parent:
                self.edges.append(Edge(a=node.parent, b=bridge, kind="internal"))

    def _port_node(self, address: str, kind: str, parent: str | None) -> Node:
        dev = self.pci.get(address)
        vendor = _VENDORS.get(dev.vendor_id or 0, "") if dev else ""
        if kind == UPSTREAM:
            return Node(
                id=address,
                kind="switch",
                label=f"{vendor} PCIe switch".strip() + f"\n{address}",
                parent=parent,
            )
        if kind == ROOT_PORT:
            return Node(id=address, kind="root_port", label=f"root port\n{address}", parent=parent)
        return Node(id=address, kind=BRIDGE, label=f"bridge\n{address}", parent=parent)

    def _edge(self, child_addr: str, child_id: str, parent_id: str) -> None:
        if any(e.a == parent_id and e.b == child_id for e in self.edges):
            return
        link = pcitree.pcie_link(self.pci, child_addr, child_id, parent_id)
        self.edges.append(
            Edge(
                a=parent_id,
                b=child_id,
                kind=PCIE,
                label=_link_label(link),
                degraded=bool(link and link.degraded),
            )
        )


def _link_label(link: Link | None) -> str:
    if link is None or link.gen is None and link.width is None:
        return ""
    text = f"Gen{link.gen or '?'} x{link.width or '?'}"
    return text + (f" (max Gen{link.max_gen or '?'} x{link.max_width or '?'})" if link.degraded else "")


def build(snapshot: model.Snapshot, gpus: tuple[GpuEnd, ...], nics: tuple[NicEnd, ...],
          pairs: tuple[Connection, ...], links: dict[int, nvlink.GpuLinks]) -> Graph:
    b = _Builder(snapshot)
    for gpu in gpus:
        node = Node(
            id=gpu.name, kind="gpu", label=f"{gpu.name}\n{gpu.model or 'GPU'}", parent=b.numa(gpu.pci_address)
        )
        _place(b, gpu.pci_address, node)
    for nic in nics:
        node = Node(id=nic.name, kind="nic", label=f"{nic.name}\n{nic.device} ({nic.kind})",
                    parent=b.numa(nic.pci_address))
        _place(b, nic.pci_address, node)
    numas = sorted(n for n in b.nodes if b.nodes[n].kind == "numa")
    b.edges += [Edge(a=x, b=y, kind=SMP, label="CPU interconnect") for x, y in zip(numas, numas[1:],
                                                                                   strict=False)]
    b.edges += [Edge(a=g.name, b=b.numa(g.pci_address), kind=C2C,
                     label=f"NVLink-C2C x{g.c2c_links}") for g in gpus
                if g.c2c_links]  # Grace: the GPU's coherent link to its own CPU
    _add_nvlink(b, links, gpus, pairs)
    return Graph(tuple(b.nodes.values()), tuple(b.edges))


def _place(b: _Builder, address: str | None, node: Node) -> None:
    if address in b.pci:
        b.hang(address, node)
    else:
        b.add(node)


def _add_nvlink(b: _Builder, links: dict[int, nvlink.GpuLinks], gpus: tuple[GpuEnd, ...],
                pairs: tuple[Connection, ...]) -> None:
    switched = [g for g in gpus if g.nvswitch_links]
    if switched:
        chips = {s for info in links.values() for s in info.switches if s != NVSWITCH}
        detail = f"\n{len(chips)} chips" if chips else ""
        b.add(Node(id=NVSWITCH, kind="nvswitch", label="NVSwitch" + detail))
        b.edges += [Edge(a=g.name, b=NVSWITCH, kind=NVLINK, label=f"NV{g.nvswitch_links}") for g in switched]
    b.edges += [Edge(a=p.a, b=p.b, kind=NVLINK, label=f"NV{p.nvlinks}") for p in pairs
                if p.nvlinks and not p.through_nvswitch]
