"""Rules that join an NCCL log with the hardware snapshot of the machine it ran on.

The log's ranks are matched to the snapshot's GPUs by NVML index (``nvmlDev``) or PCI bus id, and
NCCL's net device indexes to NIC names through its ``NET/IB : Using [0]mlx5_0:1/IB ...`` line. Only
ranks on the recorded host are checked when the log names it; otherwise every node is assumed to be
wired like the recording (a homogeneous cluster), at lower confidence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.model import Gpu, KernelInfo, Nic, Snapshot
from topodoc.rules.common import kept_lines, log_line, shortlist, sysfs_evidence
from topodoc.rules.engine import Evidence, Hit, rule
from topodoc.rules.gpudirect import acs_off_commands, acs_redirect_bridges, acs_text
from topodoc.rules.machine import gpu_name, gpu_nic, nvlinked, port_active, rdma_nics, verbs_ports
from topodoc.rules.nccl import RDMA_TRANSPORTS
from topodoc.topology import Topology
from topodoc.topology.rails import RailPair, rail_pairs
from topodoc.topology.vocab import level_rank

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import Connection, LogAnalysis, RankInfo


def _ev(item) -> tuple[Evidence, ...]:
    e = getattr(item, "evidence", None)
    return (log_line(e),) if e else ()


def _local_ranks(snapshot: Snapshot, logs: LogAnalysis) -> tuple[list[RankInfo], float]:
    host = (snapshot.host.hostname or "").split(".")[0]
    mine = [r for r in logs.ranks if host and r.host == host]
    return (mine, 1.0) if mine else (list(logs.ranks), 0.7)


def _gpu_of(snapshot: Snapshot, rank: RankInfo) -> Gpu | None:
    for gpu in snapshot.gpus:
        if (rank.bus_id and gpu.pci_address == rank.bus_id) or (
            rank.bus_id is None and gpu.index == rank.nvml_dev
        ):
            return gpu
    return None


def _nic_names(logs: LogAnalysis, host: str | None) -> dict[int, str]:
    names: dict[int, str] = {}
    for device in logs.devices:
        if device.role == "hca" and device.index is not None and device.host in (host, None):
            names.setdefault(device.index, device.name)
    return names


@rule(
    "rail-mismatch", "warning", ("rdma", "topology", "log", "joined"),
    reads=("placement", "nics"),
    title="NCCL used a NIC that is not the nearest to the GPU",
    fix="let NCCL see the real topology (no NCCL_IB_HCA reordering, NCCL_CROSS_NIC=0/2, a correct "
    "NCCL_TOPO_FILE in VMs) so each GPU uses the NIC on its own PCIe switch",
)
def rail_mismatch(snapshot: Snapshot, topology: Topology, logs: LogAnalysis) -> Iterator[Hit]:
    nics = {nic.name: nic for nic in rdma_nics(snapshot)}
    best = {pair.gpu.index: pair for pair in rail_pairs(topology)}
    ranks, confidence = _local_ranks(snapshot, logs)
    reported: set[tuple[int, str]] = set()
    for rank in ranks:
        gpu = _gpu_of(snapshot, rank)
        if gpu is None or gpu.index not in best:
            continue
        for conn, used in _nics_used(logs, rank, nics):
            conn_used = gpu_nic(topology, gpu, used.name)
            path = (conn_used.pci_level if conn_used else None) or "SYS"
            if (gpu.index, used.name) not in reported and level_rank(path) > level_rank(best[gpu.index].path):
                reported.add((gpu.index, used.name))
                yield _off_rail(rank, gpu, conn, used, path, best[gpu.index], confidence)


def _nics_used(logs: LogAnalysis, rank: RankInfo, nics: dict[str, Nic]) -> Iterator[tuple[Connection, Nic]]:
    """The rank's network connections, each with the snapshot's NIC it went through.

    A PXN connection (``via NET/IB/0(5)``) is left out: its data crosses NVLink to the proxy rank's GPU and
    leaves through that GPU's own NIC, so a NIC far from the sending GPU is the design, not a mismatch."""
    names = _nic_names(logs, rank.host)
    for conn in logs.connections:
        used = nics.get(names.get(conn.nic, ""))
        if conn.rank == rank.rank and conn.host == rank.host and used is not None and conn.proxy_rank is None:
            yield conn, used


def _off_rail(
    rank: RankInfo, gpu: Gpu, conn: Connection, used: Nic, path: str, best: RailPair, confidence: float
) -> Hit:
    return Hit(
        subject=f"rank {rank.rank} ({gpu_name(gpu)})",
        message=f"rank {rank.rank} on {gpu_name(gpu)} {_verb(conn)} over {used.name} ({path} away) although "
        f"{best.nic.device} is {best.path}: traffic crosses the PCIe/socket fabric and leaves the rail it "
        "should use",
        evidence=_ev(conn) + _ev(rank),
        confidence=confidence,
    )


def _verb(conn: Connection) -> str:
    """What the connection line says the rank does over the NIC: ``[send]`` or ``[receive]``."""
    return {"send": "sends", "receive": "receives"}.get(conn.direction or "", "sends or receives")


@rule(
    "p2p-over-pcie-despite-nvlink", "warning", ("nvlink", "p2p", "log", "joined"),
    reads=("nvlinks",),
    title="Intra-node traffic between NVLink-connected GPUs went through SHM or the network",
    fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL and check that the job sees all GPUs of the NVLink domain "
    "(CUDA_VISIBLE_DEVICES, container device list)",
)
def p2p_over_pcie_despite_nvlink(snapshot: Snapshot, topology: Topology, logs: LogAnalysis) -> Iterator[Hit]:
    ranks, confidence = _local_ranks(snapshot, logs)
    by_rank = {(r.host, r.rank): r for r in ranks}
    for conn in logs.connections:
        if not conn.transport.startswith(("SHM", "NET")):
            continue
        mine, peer = by_rank.get((conn.host, conn.rank)), by_rank.get((conn.host, conn.peer))
        gpu_a = _gpu_of(snapshot, mine) if mine else None
        gpu_b = _gpu_of(snapshot, peer) if peer else None
        if gpu_a and gpu_b and gpu_a.index != gpu_b.index and nvlinked(topology, gpu_a, gpu_b):
            yield Hit(
                subject=f"ranks {conn.rank}-{conn.peer} ({gpu_name(gpu_a)}-{gpu_name(gpu_b)})",
                message=f"ranks on NVLink-connected {gpu_name(gpu_a)} and {gpu_name(gpu_b)} talk "
                f"via {conn.transport}: "
                "data bounces through host memory or the NIC instead of NVLink (tens of GB/s "
                "instead of hundreds)",
                evidence=_ev(conn),
                confidence=confidence,
            )
            return


@rule(
    "socket-despite-active-ib", "error", ("rdma", "network", "log", "joined"),
    reads=("nic_ports",),
    title="NCCL used sockets while the machine has ACTIVE RDMA ports",
    fix="check why NCCL skipped the HCAs: NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA filters, a missing "
    "libibverbs in the container, or /dev/infiniband not mounted",
)
def socket_despite_active_ib(snapshot: Snapshot, logs: LogAnalysis) -> Iterator[Hit]:
    if logs.summary.transport != "Socket":
        return
    active = [f"{nic.name}:{port.port}" for nic, port in verbs_ports(snapshot) if port_active(port)]
    if active:
        yield Hit(
            subject="job",
            message=f"the log's transport is Socket, but the machine has {len(active)} ACTIVE RDMA port(s) "
            f"({shortlist(active, 4, ' ...')}): the job ran on TCP for no hardware reason",
            evidence=kept_lines(logs.summary.evidence.get("transport", ()), 1)
            + (Evidence("sysfs", "/sys/class/infiniband/*/ports/*/state", f"{len(active)} x 4: ACTIVE"),),
        )


@rule(
    "gdr-unused-but-possible", "warning", ("gdr", "rdma", "log", "joined"),
    reads=("kernel", "placement", "nics"),
    title="GPUDirect RDMA unused although the hardware and kernel allow it",
    fix="look for NCCL_NET_GDR_LEVEL / NCCL_NET_GDR_READ overrides or a plugin without GDR support; check "
    "that the container sees nvidia-peermem or DMA-BUF",
)
def gdr_unused_but_possible(snapshot: Snapshot, topology: Topology, logs: LogAnalysis) -> Iterator[Hit]:
    if logs.summary.gdr is not False or logs.summary.transport not in RDMA_TRANSPORTS:
        return
    if logs.summary.gdr_mode == "asymmetric":
        return  # GDR is used on some nodes: the asymmetric-GDR log rule names the node without it
    kernel = snapshot.kernel
    pairs = rail_pairs(topology)
    if not (kernel.peermem_module or kernel.dmabuf_supported) or not pairs:
        return
    if all(level_rank(p.path) <= level_rank("PXB") for p in pairs):
        overrides = [s for s in logs.env if s.name.startswith("NCCL_NET_GDR")]
        yield Hit(
            subject="job",
            message="the log shows no GPUDirect RDMA, yet every GPU has a NIC within PXB and "
            f"{kernel.peermem_module or 'DMA-BUF'} is available"
            + (f"; {overrides[0].name}={overrides[0].value} is set" if overrides else ""),
            evidence=kept_lines(logs.summary.evidence.get("gdr", ()), 2) + _gdr_means(kernel),
        )


PEERMEM_PATHS = {  # where each peer-memory module shows itself (NCCL's own checks, REFERENCE.md §1.12)
    "nvidia_peermem": "/sys/module/nvidia_peermem/version",
    "nv_peer_mem": "/sys/kernel/mm/memory_peers/nv_mem/version",
}


def _gdr_means(kernel: KernelInfo) -> tuple[Evidence, ...]:
    """What proved GPUDirect RDMA possible: the peer-memory module, or else what DMA-BUF rests on (the open
    NVIDIA kernel module on Linux >= 5.12)."""
    if kernel.peermem_module and kernel.peermem_version:
        where = PEERMEM_PATHS.get(kernel.peermem_module, f"/sys/module/{kernel.peermem_module}/version")
        return (Evidence("sysfs", where, kernel.peermem_version),)
    if kernel.peermem_module:
        return (Evidence("sysfs", f"/sys/module/{kernel.peermem_module}", "present"),)
    module = {True: "Open Kernel Module", False: "proprietary kernel module"}.get(
        kernel.nvidia_open_kernel_module, "(not recorded)"
    )
    driver = f"{module} {kernel.nvidia_driver_version or ''}".strip()
    return (
        Evidence("procfs", "/proc/sys/kernel/osrelease", kernel.release or "(not recorded)"),
        Evidence("procfs", "/proc/driver/nvidia/version", driver),
    )




@rule(
    "ib-local-protection-cause", "error", ("gdr", "rdma", "pcie", "log", "joined"),
    reads=("acs",),
    title="IB local protection errors in the log, explained by this machine",
    fix="remove the cause named in the finding (ACS redirect, IOMMU translation, missing peer memory), "
    "then rerun",
)
def ib_local_protection_cause(snapshot: Snapshot, topology: Topology, logs: LogAnalysis) -> Iterator[Hit]:
    errors = [e for e in logs.errors
              if e.category == "ib_completion_error" and e.ib_status == 4]
    if not errors:
        return
    causes = _protection_causes(snapshot, topology)
    if causes:
        message, evidence, fix = zip(*causes, strict=True)
        yield Hit(
            subject="job",
            message=f"the log's IB local protection error(s) (status 4, {sum(e.count for e in errors)} "
            f"line(s)) have a cause on this machine: {'; '.join(message)}",
            evidence=(log_line(errors[0]), *[e for group in evidence for e in group]),
            fix="; ".join(fix),
        )


def _protection_causes(snapshot: Snapshot, topology: Topology) -> list[tuple[str, tuple[Evidence, ...], str]]:
    """What on this machine makes a NIC's DMA into GPU memory fail (REFERENCE.md §1.14, §5)."""
    causes = []
    bridges = [] if snapshot.host.virtualized else acs_redirect_bridges(snapshot, topology)
    if bridges:
        evidence = tuple(
            sysfs_evidence(a, "config ACS ctrl", acs_text(snapshot.pci[a].acs_ctrl or 0)) for a in bridges[:2]
        )
        setpci = acs_off_commands(bridges, snapshot.source)
        causes.append((f"ACS P2P redirect on {', '.join(bridges)} sends the NIC's GPU-memory requests up "
                       "to the root complex, which refuses them", evidence, setpci))
    kernel = snapshot.kernel
    if kernel.iommu_mode == "translated":
        causes.append(("the IOMMU translates DMA, and peer-to-peer addresses are not mapped",
                       (Evidence("procfs", "/proc/cmdline", kernel.cmdline or "(IOMMU groups present)"),),
                       "boot with iommu=pt (or amd_iommu=off / intel_iommu=off on a dedicated host)"))
    if kernel.peermem_module is None and kernel.dmabuf_supported is False:
        causes.append(("neither nvidia_peermem nor DMA-BUF is available, so the NIC cannot register GPU "
                       "memory", (Evidence("sysfs", "/sys/module/nvidia_peermem", "absent"),),
                       "sudo modprobe nvidia-peermem"))
    return causes


RULES = (
    rail_mismatch,
    p2p_over_pcie_despite_nvlink,
    socket_despite_active_ib,
    gdr_unused_but_possible,
    ib_local_protection_cause,
)
