"""The PCIe tree of a snapshot: upstream chains, port kinds, nvidia-smi levels, NCCL levels, routes.

Port kinds come from ``PciDevice.port_type`` when the probe knew it, else from the tree's shape: a
bridge on a root bus is a root port, a bridge below a root port or a switch downstream port is a
switch upstream port, a bridge below an upstream port is a downstream port.

nvidia-smi counts *bridges* on the path between two devices, where the ports of one switch count
once: PIX = at most one, PXB = several, then PHB (same host bridge), NODE (other host bridge, same
NUMA node), SYS (other NUMA node). NCCL (``src/graph/xml.cc``) keeps only switches as PCI nodes (it
walks a device path two components at a time), hangs root-complex children off one CPU node per
NUMA id, and so folds NODE into PHB (REFERENCE.md §3.1).
"""

from __future__ import annotations

from topodoc import model
from topodoc.topology import rates
from topodoc.topology.types import (
    BRIDGE,
    DOWNSTREAM,
    HOST_BRIDGE,
    NUMA,
    PCIE,
    ROOT_PORT,
    SMP,
    UPSTREAM,
    Hop,
    Link,
    Route,
)

ENDPOINT = "endpoint"
_PORT_TYPES = {"root_port": ROOT_PORT, "upstream": UPSTREAM, "downstream": DOWNSTREAM, "endpoint": ENDPOINT,
               "pcie_to_pci_bridge": BRIDGE, "pci_to_pcie_bridge": BRIDGE}
_SWITCH_PORTS = (UPSTREAM, DOWNSTREAM)


def is_bridge(dev: model.PciDevice) -> bool:
    return dev.class_code is not None and dev.class_code >> 8 == 0x0604


def port_kind(pci: dict[str, model.PciDevice], address: str) -> str:
    dev = pci.get(address)
    if dev is None:
        return ENDPOINT
    if dev.port_type in _PORT_TYPES:
        return _PORT_TYPES[dev.port_type]
    if not is_bridge(dev):
        return ENDPOINT
    if dev.parent is None or dev.parent not in pci:
        return ROOT_PORT
    parent_kind = port_kind(pci, dev.parent)
    if parent_kind in (ROOT_PORT, DOWNSTREAM):
        return UPSTREAM
    return DOWNSTREAM if parent_kind == UPSTREAM else BRIDGE


def chain(pci: dict[str, model.PciDevice], address: str) -> list[str]:
    """``[address, parent, grandparent, ...]`` up to the device on the root bus."""
    out = [address]
    dev = pci.get(address)
    while dev is not None and dev.parent and dev.parent not in out:
        out.append(dev.parent)
        dev = pci.get(dev.parent)
    return out


def host_bridge(pci: dict[str, model.PciDevice], address: str) -> str | None:
    for addr in chain(pci, address):
        dev = pci.get(addr)
        if dev is not None and dev.host_bridge:
            return dev.host_bridge
    top = chain(pci, address)[-1]
    return f"pci{top[:7]}" if top in pci else None


def numa_of(pci: dict[str, model.PciDevice], address: str) -> int | None:
    for addr in chain(pci, address):
        dev = pci.get(addr)
        if dev is not None and dev.numa_node is not None:
            return dev.numa_node
    return None


def cpus_of(pci: dict[str, model.PciDevice], address: str) -> str | None:
    for addr in chain(pci, address):
        dev = pci.get(addr)
        if dev is not None and dev.local_cpulist:
            return dev.local_cpulist
    return None


def _switch_of(pci: dict[str, model.PciDevice], address: str) -> str:
    """The unit nvidia-smi counts once: a downstream port belongs to its switch's upstream port."""
    dev = pci.get(address)
    if port_kind(pci, address) == DOWNSTREAM and dev is not None and dev.parent:
        return dev.parent
    return address


def _bridges_between(pci: dict[str, model.PciDevice], a: str, b: str) -> list[str] | None:
    """Bridges on the path a -> lowest common ancestor -> b, or None when there is no common one."""
    ca, cb = chain(pci, a), chain(pci, b)
    common = next((x for x in ca if x in cb), None)
    if common is None:
        return None
    return ca[1 : ca.index(common) + 1] + cb[1 : cb.index(common)]


def same_numa(pci: dict[str, model.PciDevice], a: str, b: str) -> bool:
    na, nb = numa_of(pci, a), numa_of(pci, b)
    if na is not None and nb is not None and na >= 0 and nb >= 0:
        return na == nb
    ca, cb = cpus_of(pci, a), cpus_of(pci, b)
    return ca is not None and ca == cb


def smi_level(pci: dict[str, model.PciDevice], a: str, b: str) -> str | None:
    """nvidia-smi's PCI class between two functions (PIX, PXB, PHB, NODE, SYS); None if unknown."""
    if a not in pci or b not in pci:
        return None
    bridges = _bridges_between(pci, a, b)
    if bridges is not None:
        return "PIX" if len({_switch_of(pci, x) for x in bridges}) <= 1 else "PXB"
    if host_bridge(pci, a) == host_bridge(pci, b):
        return "PHB"
    return "NODE" if same_numa(pci, a, b) else "SYS"


def nccl_level(pci: dict[str, model.PciDevice], a: str, b: str) -> str | None:
    """NCCL's PCI path type between two functions (PIX, PXB, PHB, SYS); None if unknown."""
    if a not in pci or b not in pci:
        return None
    bridges = _bridges_between(pci, a, b)
    switches = {_switch_of(pci, x) for x in bridges or () if port_kind(pci, x) in _SWITCH_PORTS}
    if switches:
        return "PIX" if len(switches) == 1 else "PXB"
    na, nb = numa_of(pci, a), numa_of(pci, b)
    return "PHB" if (na if na is not None else -1) == (nb if nb is not None else -1) else "SYS"


def nccl_hops(pci: dict[str, model.PciDevice], a: str, b: str) -> int:
    """Links on NCCL's graph path between two PCI endpoints (switches and CPUs are its nodes)."""
    bridges = _bridges_between(pci, a, b)
    if bridges is not None:
        switches = {_switch_of(pci, x) for x in bridges if port_kind(pci, x) in _SWITCH_PORTS}
        return len(switches) + 1 if switches else 2
    up = {_switch_of(pci, x) for x in chain(pci, a)[1:] + chain(pci, b)[1:]
          if port_kind(pci, x) in _SWITCH_PORTS}
    return len(up) + (3 if nccl_level(pci, a, b) == "SYS" else 2)


def pcie_link(pci: dict[str, model.PciDevice], child: str, child_id: str, parent_id: str) -> Link | None:
    """The physical link from ``child`` to its upstream neighbour, None for links inside a chip."""
    dev = pci.get(child)
    if dev is None or port_kind(pci, child) in (ROOT_PORT, DOWNSTREAM):
        return None
    gen, width = rates.gen_of(dev.link.speed_gts), dev.link.width
    if gen is None and width is None:
        return None
    max_gen, max_width = rates.gen_of(dev.link.max_speed_gts), dev.link.max_width
    up = pci.get(dev.parent) if dev.parent else None
    if up is not None:
        max_gen = _min(max_gen, rates.gen_of(up.link.max_speed_gts))
        max_width = _min(max_width, up.link.max_width)
    return Link(
        kind=PCIE,
        a=parent_id,
        b=child_id,
        gen=gen,
        width=width,
        max_gen=max_gen,
        max_width=max_width,
        bandwidth_gbps=rates.pcie_gbps(gen, width),
        max_bandwidth_gbps=rates.pcie_gbps(max_gen, max_width),
    )


def _min(x: int | None, y: int | None) -> int | None:
    return y if x is None else x if y is None else min(x, y)


def bottleneck(links: tuple[Link, ...]) -> Link | None:
    known = [link for link in links if link.bandwidth_gbps is not None]
    return min(known, key=lambda link: link.bandwidth_gbps) if known else None


class RouteBuilder:
    """Builds PCIe routes; ``names`` maps endpoint PCI addresses to hops (GPU0, NIC1)."""

    def __init__(self, snapshot: model.Snapshot, names: dict[str, Hop]):
        self.pci = snapshot.pci
        self.names = names
        self.numa_cpus = {n.node: n.cpulist for n in snapshot.numa}
        # Per device, computed once: a route between N² endpoint pairs walks the same few chains.
        self._chains: dict[str, list[str]] = {}
        self._hops: dict[str, Hop] = {}
        self._links: dict[tuple[str, str, str], Link | None] = {}
        self._cpu_side: dict[str, tuple[str, int | None]] = {}

    def chain(self, address: str) -> list[str]:
        """:func:`chain`, once per address (the list is shared: never change it)."""
        found = self._chains.get(address)
        if found is None:
            found = self._chains[address] = chain(self.pci, address)
        return found

    def hop(self, address: str) -> Hop:
        found = self._hops.get(address)
        if found is None:
            found = self._hops[address] = self._hop(address)
        return found

    def _hop(self, address: str) -> Hop:
        if address in self.names:
            return self.names[address]
        kind = port_kind(self.pci, address)
        dev = self.pci.get(address)
        vendor = f"{dev.vendor_id:04x}:{dev.device_id or 0:04x}" if dev and dev.vendor_id else ""
        label = {ROOT_PORT: "root port", UPSTREAM: "switch upstream port",
                 DOWNSTREAM: "switch downstream port"}.get(kind, "bridge")
        return Hop(kind if kind != ENDPOINT else BRIDGE, address, f"{label} {vendor}".strip())

    def numa_hop(self, node: int | None) -> Hop:
        if node is None or node < 0:
            return Hop(NUMA, "numa?", "CPU (no NUMA node reported)")
        cpus = self.numa_cpus.get(node)
        return Hop(NUMA, f"numa{node}", f"NUMA {node}" + (f" (CPUs {cpus})" if cpus else ""))

    def route(self, a: str, b: str) -> Route | None:
        if a not in self.pci or b not in self.pci:
            return None
        ca, cb = self.chain(a), self.chain(b)
        common = next((x for x in ca if x in cb), None)
        if common is not None:
            up, down, middle = ca[: ca.index(common)], cb[: cb.index(common)], [self.hop(common)]
        else:
            up, down, middle = ca, cb, self._through_cpu(a, b)
        return self._assemble(up, middle, down)

    def _through_cpu(self, a: str, b: str) -> list[Hop]:
        (hb_a, na), (hb_b, nb) = self._cpu_of(a), self._cpu_of(b)
        if hb_a == hb_b:
            return [Hop(HOST_BRIDGE, hb_a, "host bridge")]
        hops = [Hop(HOST_BRIDGE, hb_a, "host bridge"), self.numa_hop(na)]
        if not same_numa(self.pci, a, b):
            hops.append(self.numa_hop(nb))
        return hops + [Hop(HOST_BRIDGE, hb_b, "host bridge")]

    def _cpu_of(self, address: str) -> tuple[str, int | None]:
        """The device's host bridge ("pci?" when unknown) and NUMA node, once per address."""
        found = self._cpu_side.get(address)
        if found is None:
            found = (host_bridge(self.pci, address) or "pci?", numa_of(self.pci, address))
            self._cpu_side[address] = found
        return found

    def _link(self, child: str, child_id: str, parent_id: str) -> Link | None:
        key = (child, child_id, parent_id)
        if key not in self._links:
            self._links[key] = pcie_link(self.pci, child, child_id, parent_id)
        return self._links[key]

    def _assemble(self, up: list[str], middle: list[Hop], down: list[str]) -> Route:
        hops = [self.hop(x) for x in up] + middle + [self.hop(x) for x in reversed(down)]
        links: list[Link] = []
        for i, addr in enumerate(up):
            link = self._link(addr, hops[i].id, hops[i + 1].id)
            links += [link] if link else []
        links += [Link(kind=SMP, a=x.id, b=y.id) for x, y in zip(middle, middle[1:], strict=False)
                  if x.kind == NUMA and y.kind == NUMA]
        offset = len(up) + len(middle)
        for j, addr in enumerate(reversed(down)):
            link = self._link(addr, hops[offset + j].id, hops[offset + j - 1].id)
            links += [link] if link else []
        return Route(tuple(hops), tuple(links), bottleneck(tuple(links)))
