"""The stand-in PCIe tree for ``nvidia-smi topo -m`` alone: no PCI addresses, only each pair's class.

The matrix's devices are clustered level by level (PIX, PXB, PHB, NODE: a and b together when the matrix
puts them at that level or closer, and at NODE also the same NUMA affinity) and hung on a tree of bridges
built so that every pair gets back the class the matrix printed: a root port per PXB group under a host
bridge per PHB group, a switch per PIX group below a shared switch. Bridges and devices without a real
address live in the unused PCI domain ``fffe`` (:data:`STAND_IN_DOMAIN`); a GPU or NIC whose bus id another
input gave keeps it. ``tests/test_text_inputs.py`` checks the classes against every matrix in fixtures/topo.
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoc.model import ConnectionMatrix, Gap, GapReason, PciDevice
from topodoc.topology.vocab import SMI_LEVELS

STAND_IN_DOMAIN = 0xFFFE
STAND_IN_NUMA = 1 << 16  # NUMA ids of stand-in groups whose node the matrix did not print


def legend_names(matrix: ConnectionMatrix) -> dict[str, str]:
    """NIC column -> device name from the legend; a name the legend gives twice keeps the column name."""
    counts: dict[str, int] = {}
    for n in matrix.nics:
        if n.device:
            counts[n.device] = counts.get(n.device, 0) + 1
    return {n.name: n.device if n.device and counts[n.device] == 1 else n.name for n in matrix.nics}


def gpu_number(name: str) -> int | None:
    m = re.fullmatch(r"GPU(\d+)", name)
    return int(m[1]) if m else None


def nic_kind_of_name(name: str) -> str:
    if name.startswith("efa"):
        return "efa"
    if name.startswith(("mlx", "ib", "hfi", "qib")):
        return "ib"
    if name.startswith(("bnxt_re", "irdma", "qedr", "rocep", "roce", "erdma", "ionic")):
        return "roce"
    return "unknown"


def matrix_lines(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        m = re.match(r"^\s*((?:GPU|NIC)\d+)\s", line)
        if m and m[1] not in out and not re.match(r"^\s*GPU0\s+GPU1", line):
            out[m[1]] = number
    return out


def place_from_matrix(b) -> None:
    """Place the matrix's GPUs and NICs on a stand-in tree when no input gave their PCI placement."""
    matrix = b.matrix
    if matrix is None or any(g.pci_address in b.pci for g in b.gpus.values()):
        return
    names = [g.name for g in matrix.gpus] + [n.name for n in matrix.nics]
    cell = {(r, c): v for r, cells in matrix.links.items() for c, v in cells.items()}
    numa = {g.name: g.numa_affinity for g in matrix.gpus}
    groups = {level: _clusters(names, cell, numa, level) for level in SMI_LEVELS[:-1]}
    alloc = _Alloc()
    nic_names = legend_names(matrix)
    addresses: dict[str, str] = {}
    for node_i, node in enumerate(_sorted_groups(groups["NODE"], names)):
        numa_id = _numa_id(node, numa, node_i)
        # the devices' own NUMA node only where the matrix printed one for the group; elsewhere the stand-in
        # bridges carry a made-up id (it keeps NODE and SYS apart) and the devices say "unknown"
        leaf_numa = numa_id if _numa_id(node, numa, None) is not None else None
        for hb in _sub(groups["PHB"], node, names):
            host_bridge = f"pci{STAND_IN_DOMAIN:04x}:{alloc.bus:02x}"
            for pxb in _sub(groups["PXB"], hb, names):
                root = alloc.bridge(b, None, host_bridge, numa_id, "root_port")
                pix_groups = _sub(groups["PIX"], pxb, names)
                top = alloc.bridge(b, root, None, numa_id, "upstream") if len(pxb) > 1 else root
                for pix in pix_groups:
                    parent = top
                    if len(pix_groups) > 1:  # each PIX group under its own switch, below the shared one
                        down = alloc.bridge(b, top, None, numa_id, "downstream")
                        parent = alloc.bridge(b, down, None, numa_id, "upstream")
                    for name in pix:
                        port = (
                            alloc.bridge(b, parent, None, numa_id, "downstream") if parent != root else root
                        )
                        addresses[name] = alloc.leaf(
                            b, port, leaf_numa, name, _known_address(b, name, nic_names)
                        )
    for name, address in addresses.items():
        label = f"{name}" + (f" ({nic_names[name]})" if name in nic_names and nic_names[name] != name else "")
        if address.startswith(f"{STAND_IN_DOMAIN:04x}:"):
            b.labels[address] = f"{label} [topo -m]"
        index = gpu_number(name)
        if index is not None and index in b.gpus:
            b.gpus[index] = replace(b.gpus[index], pci_address=address)
        elif name in nic_names and nic_names[name] in b.nics:
            b.nics[nic_names[name]] = replace(b.nics[nic_names[name]], pci_address=address)
        b.prov[address] = ("smi-topo", b.matrix_path)
    for address in list(b.pci):
        if address.startswith(f"{STAND_IN_DOMAIN:04x}:") and address not in b.labels:
            b.labels[address] = "a stand-in bridge [topo -m]"
    b.gaps.append(
        Gap(
            what="PCI placement",
            reason=GapReason.NOT_RECORDED,
            source=b.matrix_path,
            detail="from nvidia-smi topo -m classes: a stand-in PCIe tree (domain fffe) that reproduces them",
        )
    )
    b.facts.add("placement-from-matrix")


def _known_address(b, name: str, nic_names: dict[str, str]) -> str | None:
    """A real bus id another input gave (an NCCL log's rank line, ibdev2netdev's netdev name)."""
    index = gpu_number(name)
    if index is not None and index in b.gpus:
        return b.gpus[index].pci_address
    nic = b.nics.get(nic_names.get(name, name))
    return nic.pci_address if nic else None


class _Alloc:
    def __init__(self) -> None:
        self.bus = 1

    def _next(self) -> str:
        address = f"{STAND_IN_DOMAIN:04x}:{self.bus:02x}:00.0"
        self.bus = (self.bus + 1) % 256
        return address

    def bridge(self, b, parent: str | None, host_bridge: str | None, numa: int, port: str) -> str:
        address = self._next()
        b.pci[address] = PciDevice(
            address=address,
            class_code=0x060400,
            parent=parent,
            host_bridge=host_bridge,
            numa_node=numa,
            port_type=port,
        )
        return address

    def leaf(self, b, parent: str, numa: int | None, name: str, known: str | None) -> str:
        address = known or self._next()
        cls = 0x030200 if name.startswith("GPU") else 0x020700
        b.pci[address] = PciDevice(
            address=address, class_code=cls, parent=parent, numa_node=numa, port_type="endpoint"
        )
        return address


def _clusters(names: list[str], cell: dict, numa: dict, level: str) -> list[set[str]]:
    """Union-find: a and b together when the matrix puts them at ``level`` or closer (for NODE, also the
    same NUMA affinity); NV# cells say nothing about PCIe and join nothing."""
    parent = {n: n for n in names}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    rank = SMI_LEVELS.index(level)
    for (a, c), v in cell.items():
        if a in parent and c in parent and v in SMI_LEVELS and SMI_LEVELS.index(v) <= rank:
            parent[find(a)] = find(c)
    if level == "NODE":
        by_numa: dict[str, str] = {}
        for name, node in numa.items():
            if node and node not in ("N/A",):
                if node in by_numa:
                    parent[find(name)] = find(by_numa[node])
                by_numa.setdefault(node, name)
    groups: dict[str, set[str]] = {}
    for n in names:
        groups.setdefault(find(n), set()).add(n)
    return list(groups.values())


def _order(names: list[str]):
    return lambda group: min(names.index(n) for n in group)


def _sorted_groups(groups: list[set[str]], names: list[str]) -> list[list[str]]:
    return [sorted(g, key=names.index) for g in sorted(groups, key=_order(names))]


def _sub(groups: list[set[str]], within: list[str] | set[str], names: list[str]) -> list[list[str]]:
    inside = set(within)
    return _sorted_groups([g & inside for g in groups if g & inside], names)


def _numa_id(node: list[str], numa: dict, fallback: int | None) -> int | None:
    for name in node:
        value = numa.get(name)
        if value and value.isdigit():
            return int(value)
    # no device of the group printed its NUMA node: an id no real node has, so that the group is never
    # taken for a printed node (the devices themselves say "unknown")
    return None if fallback is None else STAND_IN_NUMA + fallback
