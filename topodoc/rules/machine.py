"""Read-only helpers the hardware rules share: names, sysfs paths, lookups into the derived topology.

Paths, NVLink bonds, relays and rails are derived once, in :mod:`topodoc.topology` (``Topology``,
``topology.rails``); rules look them up here and never re-derive them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from topodoc.cpuset import CpuSet, CpuSetError
from topodoc.model import Gpu, GpuPair, Nic, NicPort, PciDevice, Snapshot
from topodoc.topology import pcitree, vocab
from topodoc.topology.types import Connection, GpuEnd, NicEnd, Topology

VERBS_KINDS = vocab.VERBS_KINDS  # RDMA NICs with verbs ports under /sys/class/infiniband


def sysfs(address: str, attr: str) -> str:
    return f"/sys/bus/pci/devices/{address}/{attr}"


def gpu_name(gpu: Gpu | GpuEnd) -> str:
    return f"GPU{gpu.index}"


def gpu_label(gpu: Gpu | GpuEnd) -> str:
    return f"GPU{gpu.index} ({gpu.pci_address})" if gpu.pci_address else f"GPU{gpu.index}"


def rdma_nics(snapshot: Snapshot) -> list[Nic]:
    return [nic for nic in snapshot.nics if nic.kind in vocab.RDMA_KINDS]


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


def connection(topology: Topology, a: Gpu | GpuEnd, b: Gpu | GpuEnd) -> Connection | None:
    """The derived connection between two GPUs (``Topology.connection`` by GPU name)."""
    return topology.connection(f"GPU{a.index}", f"GPU{b.index}")


def nic_end(topology: Topology, device: str) -> NicEnd | None:
    """The topology's NIC for a device name (``mlx5_0``)."""
    return next((n for n in topology.nics if n.device == device), None)


def gpu_nic(topology: Topology, gpu: Gpu | GpuEnd, device: str) -> Connection | None:
    """The derived connection between a GPU and the NIC named ``device``."""
    nic = nic_end(topology, device)
    return topology.connection(f"GPU{gpu.index}", nic.name) if nic else None


def nvlinked(topology: Topology, a: Gpu | GpuEnd, b: Gpu | GpuEnd) -> bool:
    """True when NVLink joins the pair (directly or through NVSwitch), as the topology derives it."""
    conn = connection(topology, a, b)
    return conn is not None and conn.nvlinks > 0


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
