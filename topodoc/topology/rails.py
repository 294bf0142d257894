"""Rails: which NICs serve the GPUs, and which NIC each GPU takes — one answer for rules and the model.

A *rail NIC* is a NIC nearest (by nvidia-smi's PCI class) to at least one GPU: a storage or management
NIC that no GPU has closest is not a rail; with no PCI placement known, every candidate counts.
*NCCL's NIC* for a GPU (:func:`nccl_nics`) is the one ``ncclTopoGetLocalNet`` gives it on channel 0
(NCCL 2.19 to 2.27): the GPU's *local* NICs are those at its best NCCL path type (then nvidia-smi
class); when several tie, the GPU's CUDA device number, bit-mirrored when the tie count is a power of two,
picks one (:func:`nccl_pick`: GPU0 and GPU1 behind one switch with mlx5_0 and mlx5_1 take mlx5_0 and
mlx5_1). ``topo``, ``fleet`` and the diagram show it, with the tie as the reason. Assumed, and said
here because no snapshot proves it: NCCL's NIC order is the natural name order (``ibv_get_device_list``
lists mlx5_0, mlx5_1, ... on the machines we know), and the CUDA device number is the NVML index (true
without ``CUDA_VISIBLE_DEVICES`` renumbering; an NCCL log's ``NET/IB : Using [i]name`` settles both).
A *rail pair* (:func:`rail_pairs`, what the rules judge) joins each GPU with one RDMA NIC: nearest first,
ties to NCCL's NIC, a NIC reused only when NICs run out; where every GPU has its own nearest NIC the two
answers are the same (a test holds the bundled examples to it).
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
        if self.tied and self.nic.device not in self.tied:
            return f"rail pairing, one NIC per GPU while NICs last (NCCL's nearest: {', '.join(self.tied)})"
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


def nccl_nics(topology: Topology) -> list[RailPair]:
    """Each placed GPU with the RDMA NIC NCCL gives it on channel 0 (see the module doc), in GPU order."""
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


def rail_pairs(topology: Topology) -> list[RailPair]:
    """Each placed GPU with its rail NIC, in GPU order: nearest first, each NIC once while NICs last; among
    equally near NICs the one NCCL takes (:func:`nccl_nics`), so on a machine whose GPUs each have their
    own NICs the rail pairs are NCCL's choice."""
    nics = [n for n in rdma_nics(topology) if n.pci_address]
    gpus = [g for g in topology.gpus if g.pci_address]
    conns = {(c.a, c.b): c for c in topology.gpu_nic}
    choice = {p.gpu.name: p for p in nccl_nics(topology)}
    level = {(pos, i): conns[g.name, n.name].pci_level for pos, g in enumerate(gpus)
             for i, n in enumerate(nics) if (g.name, n.name) in conns}
    candidates = sorted(
        (level_rank(path), _not_nccls(choice.get(gpus[pos].name), nics[i]),
         abs(pos * len(nics) - i * len(gpus)), pos, i)
        for (pos, i), path in level.items() if path
    )
    chosen: dict[int, RailPair] = {}
    used: set[int] = set()
    for reuse in (False, True):
        for _level, _nccl, _skew, pos, nic_i in candidates:
            gpu = gpus[pos]
            if gpu.index in chosen or (nic_i in used and not reuse):
                continue
            pick = choice.get(gpu.name)
            tied = pick.tied if pick is not None else ()
            chosen[gpu.index] = RailPair(gpu, nics[nic_i], conns[gpu.name, nics[nic_i].name], tied)
            used.add(nic_i)
    return [chosen[i] for i in sorted(chosen)]


def _not_nccls(pick: RailPair | None, nic: NicEnd) -> int:
    return 0 if pick is not None and pick.nic.name == nic.name else 1


def rail_names(pairs: Iterable[RailPair]) -> str:
    """``GPU0->mlx5_0, GPU1->mlx5_1``."""
    return ", ".join(f"{p.gpu.name}->{p.nic.device}" for p in pairs)
