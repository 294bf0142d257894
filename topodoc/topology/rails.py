"""Rails: which NICs serve the GPUs, and which NIC each GPU takes — one answer for rules and the model.

A *rail NIC* is a NIC nearest (by nvidia-smi's PCI class) to at least one GPU: a storage or management
NIC that no GPU has closest is not a rail; with no PCI placement known, every candidate counts.
A *rail pair* joins each GPU with the RDMA NIC NCCL gives it (:func:`nccl_pick`, NCCL's
``ncclTopoGetLocalNet`` for channel 0, 2.19 to 2.27): the GPU's *local* NICs are those at its best NCCL
path type (then nvidia-smi class); when several tie, the GPU's CUDA device number, bit-mirrored when the
tie count is a power of two, picks one of them (so GPU0 and GPU1 behind one switch with mlx5_0 and mlx5_1
take mlx5_0 and mlx5_1). ``topo``, ``fleet``, the diagram and the rules all show this one answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topodoc.topology.types import Connection, GpuEnd, NicEnd, Topology
from topodoc.topology.vocab import NCCL_PATHS, RDMA_KINDS, level_rank


@dataclass(frozen=True)
class RailPair:
    gpu: GpuEnd
    nic: NicEnd
    conn: Connection
    tied: tuple[str, ...] = ()  # the NICs equally near this GPU (devices), in NCCL's order

    @property
    def reason(self) -> str:
        """Why NCCL takes this NIC, for people: ``nearest (PXB)`` or ``GPU1 of 2 tied at PXB``."""
        if len(self.tied) <= 1:
            return f"nearest ({self.conn.nccl})"
        return (
            f"{len(self.tied)} NICs tie at {self.conn.nccl} ({', '.join(self.tied)}); NCCL takes this one "
            f"for CUDA device {self.gpu.index} on channel 0 (ncclTopoGetLocalNet)"
        )

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


def mirror_bits(value: int, pow2: int) -> int:
    """NCCL's ``mirrorBits``: the low log2(pow2) bits of ``value`` reversed."""
    out, low, high = 0, 1, pow2 >> 1
    while low < pow2:
        if value & low:
            out |= high
        low, high = low << 1, high >> 1
    return out


def nccl_pick(dev: int, tied: int) -> int:
    """Which of ``tied`` equally near NICs (in NCCL's device order) GPU ``dev`` takes on channel 0."""
    net = mirror_bits(dev, tied) if tied & (tied - 1) == 0 else dev
    return net % tied


def _rank(conn: Connection) -> tuple[int, int]:
    path = NCCL_PATHS.index(conn.nccl) if conn.nccl in NCCL_PATHS else len(NCCL_PATHS)
    return path, level_rank(conn.pci_level)


def rail_pairs(topology: Topology) -> list[RailPair]:
    """Each placed GPU with the RDMA NIC NCCL gives it (see the module doc), in GPU order."""
    nics = [n for n in rdma_nics(topology) if n.pci_address]  # NCCL's device order (natural name order)
    conns = {(c.a, c.b): c for c in topology.gpu_nic}
    out = []
    for gpu in (g for g in topology.gpus if g.pci_address):
        ranked = [(_rank(conns[gpu.name, n.name]), n) for n in nics if (gpu.name, n.name) in conns]
        ranked = [(rank, n) for rank, n in ranked if conns[gpu.name, n.name].pci_level]
        if not ranked:
            continue
        best = min(rank for rank, _n in ranked)
        tied = [n for rank, n in ranked if rank == best]
        nic = tied[nccl_pick(gpu.index, len(tied))]
        out.append(RailPair(gpu, nic, conns[gpu.name, nic.name], tuple(n.device for n in tied)))
    return out


def rail_names(pairs: Iterable[RailPair]) -> str:
    """``GPU0->mlx5_0, GPU1->mlx5_1``."""
    return ", ".join(f"{p.gpu.name}->{p.nic.device}" for p in pairs)
