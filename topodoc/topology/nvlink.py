"""NVLink as NVML reports it, per GPU: bonds to peer GPUs, links into NVSwitches, links down.

A link's far end is a GPU when its remote PCI address is one of this machine's GPUs; an NVSwitch
when NVML says ``switch``, when the address is an NVIDIA bridge-class function (``0x0680xx``, the
NVSwitch class NCCL keys on), or when the address is unknown here (NCCL makes the same assumption:
an invisible peer is an NVSwitch). ``ibmnpu`` ends (POWER CPUs) are not GPU paths.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from topodoc import model, pciaddr
from topodoc.topology import rates
from topodoc.topology.types import NVLINK, NVSWITCH, Hop, Link, Route

NVIDIA = 0x10DE


@dataclass(frozen=True)
class GpuLinks:
    index: int
    peers: dict[int, int] = field(default_factory=dict)  # peer GPU index -> active links
    switch_links: int = 0
    switches: tuple[str, ...] = ()  # NVSwitch PCI addresses seen on the far ends
    down: int = 0  # wired links that are not active
    version: int | None = None
    compute_capability: str | None = None

    @property
    def active(self) -> int:
        return sum(self.peers.values()) + self.switch_links


def _far_end(link: model.NvLink, gpu_at: dict[str, int], pci: dict[str, model.PciDevice]) -> str:
    address = pciaddr.try_normalize(link.remote_pci_address)
    if address in gpu_at and link.remote_type in (None, "gpu", "unknown"):
        return "gpu"
    if link.remote_type in ("switch", "gpu", "ibmnpu"):
        return link.remote_type
    dev = pci.get(address or "")
    if dev is None or (dev.vendor_id == NVIDIA and (dev.class_code or 0) >> 8 == 0x0680):
        return "switch"
    return "other"


# The most NVLinks one GPU has (Hopper and Blackwell: 18; REFERENCE.md §NVLink, NCCL probes 18 for sm>=90).
MAX_GPU_NVLINKS = 18


def from_matrix(snapshot: model.Snapshot) -> dict[int, GpuLinks]:
    """GPUs without per-link NVML data, read from the NV<n> cells a pasted ``nvidia-smi topo -m`` printed
    (``GpuPair.nvlink_count``). A GPU whose printed counts add up to more links than a GPU has
    (:data:`MAX_GPU_NVLINKS`) reaches its peers through NVSwitch: nvidia-smi then prints each pair the
    GPU's links into the switches (NV12 on DGX A100, NV18 on HGX H100); else the counts are direct bonds
    (bridges, DGX-1's hybrid cube mesh)."""
    counts: dict[int, dict[int, int]] = {}
    for pair in snapshot.gpu_pairs:
        if pair.nvlink_count:
            counts.setdefault(pair.a, {})[pair.b] = pair.nvlink_count
            counts.setdefault(pair.b, {})[pair.a] = pair.nvlink_count
    out = {}
    for index, peers in counts.items():
        if sum(peers.values()) > MAX_GPU_NVLINKS:
            out[index] = GpuLinks(index, {}, max(peers.values()), ("nvswitch",))
        else:
            out[index] = GpuLinks(index, dict(peers))
    return out


def gpu_links(snapshot: model.Snapshot) -> dict[int, GpuLinks]:
    gpu_at = {pciaddr.try_normalize(g.pci_address): g.index for g in snapshot.gpus if g.pci_address}
    printed = from_matrix(snapshot) if not any(g.nvlinks for g in snapshot.gpus) else {}
    out = {}
    for gpu in snapshot.gpus:
        if gpu.index in printed:
            out[gpu.index] = replace(printed[gpu.index], compute_capability=gpu.compute_capability)
            continue
        peers: Counter[int] = Counter()
        switches: list[str] = []
        versions: Counter[int | None] = Counter()
        inactive = [link for link in gpu.nvlinks if link.active is False]
        for link in gpu.nvlinks:
            if not link.active:
                continue
            versions[link.version] += 1
            end = _far_end(link, gpu_at, snapshot.pci)
            address = pciaddr.try_normalize(link.remote_pci_address)
            if end == "gpu" and address in gpu_at:
                peers[gpu_at[address]] += 1
            elif end == "switch":
                switches.append(address or "nvswitch")
        version = versions.most_common(1)[0][0] if versions else None
        # An inactive link counts as down when it is wired (NVML still names its far end) or when the
        # GPU sits on NVSwitch, where every link is wired; elsewhere it is a port with no bridge.
        down = sum(1 for link in inactive if link.remote_pci_address or switches)
        out[gpu.index] = GpuLinks(gpu.index, dict(peers), len(switches), tuple(sorted(set(switches))),
                                  down, version, gpu.compute_capability)
    return out


def bond(links: dict[int, GpuLinks], a: int, b: int) -> tuple[int, bool]:
    """(NVLinks between GPUs a and b, whether through NVSwitch), as nvidia-smi counts them."""
    la, lb = links.get(a), links.get(b)
    if la is None or lb is None:
        return 0, False
    direct = _direct(links, a, b)
    if direct:
        return direct, False
    if la.switch_links and lb.switch_links:
        return min(la.switch_links, lb.switch_links), True
    return 0, False


def _direct(links: dict[int, GpuLinks], x: int, y: int) -> int:
    lx, ly = links.get(x), links.get(y)
    return max(lx.peers.get(y, 0) if lx else 0, ly.peers.get(x, 0) if ly else 0)


def relay(links: dict[int, GpuLinks], a: int, b: int) -> int | None:
    """A GPU with direct NVLinks to both a and b (NCCL's NVB path), lowest index first: among a's NVLink
    neighbours (:func:`neighbours`), so every pair of a machine costs its GPUs' degree, not its GPU count."""
    near = neighbours(links)
    both = near.get(a, _NONE) & near.get(b, _NONE)
    found = [c for c in both if c not in (a, b) and c in links]
    return min(found) if found else None


_NONE: frozenset[int] = frozenset()
_NEAR: list = [None, {}]  # [the links dict last indexed, its index]


def neighbours(links: dict[int, GpuLinks]) -> dict[int, frozenset[int]]:
    """GPU -> the GPUs it has a direct NVLink bond with, either side reporting it (as :func:`_direct`
    reads them); computed once per ``links`` dict (the last one asked about is kept)."""
    if _NEAR[0] is links:
        return _NEAR[1]
    near: dict[int, set[int]] = {}
    for x, lx in links.items():
        for y, count in lx.peers.items():
            if count:
                near.setdefault(x, set()).add(y)
                near.setdefault(y, set()).add(x)
    index = {g: frozenset(peers) for g, peers in near.items()}
    _NEAR[0], _NEAR[1] = links, index
    return index


def _link(links: dict[int, GpuLinks], g: int, a_id: str, b_id: str, count: int) -> Link:
    info = links[g]
    return Link(kind=NVLINK, a=a_id, b=b_id, nvlinks=count, nvlink_version=info.version,
                bandwidth_gbps=rates.nvlink_gbps(count, info.version, info.compute_capability))


def route(links: dict[int, GpuLinks], hops: dict[int, Hop], a: int, b: int) -> Route | None:
    """The NVLink route a -> b: direct, through NVSwitch, or through a relay GPU; None without NVLink."""
    count, switched = bond(links, a, b)
    if switched:
        hub = Hop(NVSWITCH, NVSWITCH, "NVSwitch")
        parts = (_link(links, a, hops[a].id, hub.id, links[a].switch_links),
                 _link(links, b, hub.id, hops[b].id, links[b].switch_links))
        return _route((hops[a], hub, hops[b]), parts)
    if count:
        return _route((hops[a], hops[b]), (_link(links, a, hops[a].id, hops[b].id, count),))
    c = relay(links, a, b)
    if c is None:
        return None
    parts = (_link(links, a, hops[a].id, hops[c].id, bond(links, a, c)[0]),
             _link(links, c, hops[c].id, hops[b].id, bond(links, c, b)[0]))
    return _route((hops[a], hops[c], hops[b]), parts)


def _route(hops: tuple[Hop, ...], parts: tuple[Link, ...]) -> Route:
    known = [p for p in parts if p.bandwidth_gbps is not None]
    return Route(hops, parts, min(known, key=lambda p: p.bandwidth_gbps) if known else None)
