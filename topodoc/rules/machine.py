"""Read-only helpers the hardware rules share: names, PCI paths, GPU-to-NIC pairing, cpulists.

Path classes follow ``nvidia-smi topo -m`` (PIX, PXB, PHB, NODE, SYS) as derived by
:mod:`topodoc.topology.pcitree`; NVML's own answer for a GPU pair wins when it was recorded.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from topodoc.cpuset import CpuSet, CpuSetError
from topodoc.model import Gpu, GpuPair, Nic, NicPort, PciDevice, Snapshot
from topodoc.topology import pcitree

PATH_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
RDMA_KINDS = ("ib", "roce", "efa")
VERBS_KINDS = ("ib", "roce")  # RDMA NICs with verbs ports under /sys/class/infiniband


def sysfs(address: str, attr: str) -> str:
    return f"/sys/bus/pci/devices/{address}/{attr}"


def gpu_name(gpu: Gpu) -> str:
    return f"GPU{gpu.index}"


def gpu_label(gpu: Gpu) -> str:
    return f"GPU{gpu.index} ({gpu.pci_address})" if gpu.pci_address else f"GPU{gpu.index}"


def path_rank(path_class: str) -> int:
    return PATH_ORDER.index(path_class) if path_class in PATH_ORDER else len(PATH_ORDER)


def rdma_nics(snapshot: Snapshot) -> list[Nic]:
    return [nic for nic in snapshot.nics if nic.kind in RDMA_KINDS]


def rail_nics(snapshot: Snapshot) -> list[Nic]:
    """The RDMA NICs nearest (by PCIe class) to at least one GPU: the rails. A storage or management NIC
    that no GPU has closest is left out; with no PCI placement known, every RDMA NIC counts."""
    nics = [n for n in rdma_nics(snapshot) if n.pci_address in snapshot.pci]
    nearest: set[str] = set()
    for gpu in snapshot.gpus:
        ranked = [(path_rank(pci_class(snapshot, gpu.pci_address, n.pci_address) or "SYS"), n.name)
                  for n in nics]
        best = min((rank for rank, _ in ranked), default=None)
        nearest |= {name for rank, name in ranked if rank == best}
    return [n for n in rdma_nics(snapshot) if n.name in nearest] or rdma_nics(snapshot)


def verbs_ports(snapshot: Snapshot) -> Iterator[tuple[Nic, NicPort]]:
    for nic in rdma_nics(snapshot):
        if nic.kind in VERBS_KINDS:
            for port in nic.ports:
                yield nic, port


def port_active(port: NicPort) -> bool:
    return (port.state or "").upper() == "ACTIVE"


def gpu_combinations(snapshot: Snapshot) -> Iterator[tuple[Gpu, Gpu]]:
    """Every unordered GPU pair, lower position first."""
    return itertools.combinations(snapshot.gpus, 2)


def pair_names(pairs: Iterable[GpuPair]) -> list[str]:
    return [f"GPU{p.a}-GPU{p.b}" for p in pairs]


def ancestors(snapshot: Snapshot, address: str | None) -> list[str]:
    """Upstream bridges of ``address``, nearest first."""
    return pcitree.chain(snapshot.pci, address)[1:] if address in snapshot.pci else []


def pci_class(snapshot: Snapshot, a: str | None, b: str | None) -> str | None:
    """The nvidia-smi class of the PCI path between two functions, or None when unknown."""
    return pcitree.smi_level(snapshot.pci, a or "", b or "")


def gpu_pair_class(snapshot: Snapshot, a: Gpu, b: Gpu) -> tuple[str | None, str]:
    """The pair's PCI class and where it comes from: NVML's common ancestor when recorded ("nvml"),
    else the PCI-tree derivation ("derived")."""
    lo, hi = sorted((a.index, b.index))
    for pair in snapshot.gpu_pairs:
        if (pair.a, pair.b) == (lo, hi) and pair.common_ancestor:
            return ("PIX" if pair.common_ancestor == "INTERNAL" else pair.common_ancestor), "nvml"
    return pci_class(snapshot, a.pci_address, b.pci_address), "derived"


@dataclass(frozen=True)
class RailPair:
    gpu: Gpu
    nic: Nic
    path: str  # nvidia-smi class of the GPU-NIC path


def rail_names(pairs: Iterable[RailPair]) -> str:
    """``GPU0->mlx5_0, GPU1->mlx5_1``."""
    return ", ".join(f"{gpu_name(p.gpu)}->{p.nic.name}" for p in pairs)


def rail_pairs(snapshot: Snapshot) -> list[RailPair]:
    """Pair each GPU with one RDMA NIC: nearest first, ties to the rail-aligned NIC (GPU i with the i-th
    NIC, as rail-optimized servers are cabled); a NIC is reused only when NICs run out."""
    nics = sorted(
        (n for n in rdma_nics(snapshot) if n.pci_address in snapshot.pci), key=lambda n: _natural(n.name)
    )
    gpus = [gpu for gpu in snapshot.gpus if gpu.pci_address in snapshot.pci]
    paths = {
        (g.index, i): pci_class(snapshot, g.pci_address, n.pci_address) or "SYS"
        for g in gpus
        for i, n in enumerate(nics)
    }
    candidates = sorted(
        (path_rank(paths[g.index, i]), abs(pos * len(nics) - i * len(gpus)), pos, i)
        for pos, g in enumerate(gpus)
        for i in range(len(nics))
    )
    chosen: dict[int, RailPair] = {}
    used: set[int] = set()
    for reuse in (False, True):
        for _rank, _skew, pos, nic_i in candidates:
            gpu = gpus[pos]
            if gpu.index in chosen or (nic_i in used and not reuse):
                continue
            chosen[gpu.index] = RailPair(gpu, nics[nic_i], paths[gpu.index, nic_i])
            used.add(nic_i)
    return [chosen[i] for i in sorted(chosen)]


def _natural(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def parse_cpulist(text: str | None) -> CpuSet:
    """``"0-3,8,10-11"`` as CPU ranges (never expanded); empty, None or invalid -> no CPU."""
    try:
        return CpuSet.parse(text or "")
    except CpuSetError:
        return CpuSet()


def gpu_device(snapshot: Snapshot, gpu: Gpu) -> PciDevice | None:
    return snapshot.pci.get(gpu.pci_address or "")


def multi_numa(snapshot: Snapshot) -> bool:
    return len(snapshot.numa) > 1 or (snapshot.host.sockets or 1) > 1


def nvlink_targets(gpu: Gpu) -> tuple[set[str], bool]:
    """Peer GPU addresses reached over active NVLinks, and whether any active link goes to a switch."""
    peers: set[str] = set()
    switch = False
    for link in gpu.nvlinks:
        if link.active is False:
            continue
        if link.remote_type == "switch":
            switch = True
        elif link.remote_pci_address:
            peers.add(link.remote_pci_address)
    return peers, switch


def nvlink_relay(snapshot: Snapshot, a: Gpu, b: Gpu) -> Gpu | None:
    """A GPU NVLinked to both ``a`` and ``b``: NCCL then moves their P2P traffic over NVLink through it
    (path type NVB, e.g. the DGX-1 hybrid cube mesh) instead of over PCIe."""
    others = (g for g in snapshot.gpus if g.index not in (a.index, b.index))
    return next((g for g in others if nvlinked(snapshot, a, g) and nvlinked(snapshot, g, b)), None)


def nvlinked(snapshot: Snapshot, a: Gpu, b: Gpu) -> bool:
    """True when NVLink joins the pair (directly, or both through NVSwitch, or NVML says so)."""
    lo, hi = sorted((a.index, b.index))
    if any((p.a, p.b) == (lo, hi) and p.p2p_nvlink == "OK" for p in snapshot.gpu_pairs):
        return True
    peers_a, switch_a = nvlink_targets(a)
    _peers_b, switch_b = nvlink_targets(b)
    return (switch_a and switch_b) or (b.pci_address in peers_a)
