"""Rails: which NICs serve the GPUs, and which NIC each GPU takes — one answer for rules and the model.

A *rail NIC* is a NIC nearest (by nvidia-smi's PCI class) to at least one GPU: a storage or management
NIC that no GPU has closest is not a rail; with no PCI placement known, every candidate counts.
A *rail pair* joins each GPU with one RDMA NIC: nearest first, ties to the rail-aligned NIC (GPU i with
the i-th NIC, as rail-optimized servers are cabled); a NIC is reused only when NICs run out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topodoc.topology.types import Connection, GpuEnd, NicEnd, Topology
from topodoc.topology.vocab import RDMA_KINDS, level_rank


@dataclass(frozen=True)
class RailPair:
    gpu: GpuEnd
    nic: NicEnd
    conn: Connection

    @property
    def path(self) -> str:
        """nvidia-smi's PCI class of the GPU-NIC path (SYS when unknown)."""
        return self.conn.pci_level or "SYS"


def rdma_nics(topology: Topology) -> list[NicEnd]:
    return [nic for nic in topology.nics if nic.kind in RDMA_KINDS]


def rail_nics(topology: Topology, pool: Iterable[NicEnd] | None = None) -> list[NicEnd]:
    """The NICs of ``pool`` (default: the RDMA NICs) nearest to at least one GPU; all of them if none is."""
    pool = list(rdma_nics(topology) if pool is None else pool)
    names = {n.name for n in pool}
    nearest: set[str] = set()
    for gpu in topology.gpus:
        conns = [c for c in topology.gpu_nic if c.a == gpu.name and c.b in names and c.pci_level]
        best = min((level_rank(c.pci_level) for c in conns), default=None)
        nearest |= {c.b for c in conns if level_rank(c.pci_level) == best}
    return [n for n in pool if n.name in nearest] or pool


def rail_pairs(topology: Topology) -> list[RailPair]:
    """Each placed GPU with its rail NIC (see the module doc), in GPU order."""
    nics = [n for n in rdma_nics(topology) if n.pci_address]
    gpus = [g for g in topology.gpus if g.pci_address]
    conns = {(c.a, c.b): c for c in topology.gpu_nic}
    level = {(pos, i): conns[g.name, n.name].pci_level for pos, g in enumerate(gpus)
             for i, n in enumerate(nics) if (g.name, n.name) in conns}
    candidates = sorted(
        (level_rank(path), abs(pos * len(nics) - i * len(gpus)), pos, i)
        for (pos, i), path in level.items() if path
    )
    chosen: dict[int, RailPair] = {}
    used: set[int] = set()
    for reuse in (False, True):
        for _rank, _skew, pos, nic_i in candidates:
            gpu = gpus[pos]
            if gpu.index in chosen or (nic_i in used and not reuse):
                continue
            chosen[gpu.index] = RailPair(gpu, nics[nic_i], conns[gpu.name, nics[nic_i].name])
            used.add(nic_i)
    return [chosen[i] for i in sorted(chosen)]


def rail_names(pairs: Iterable[RailPair]) -> str:
    """``GPU0->mlx5_0, GPU1->mlx5_1``."""
    return ", ".join(f"{p.gpu.name}->{p.nic.device}" for p in pairs)
