"""GPUDirect rules: peermem/DMA-BUF, GPU-to-NIC distance, ACS on P2P paths, IOMMU translation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.model import Snapshot
from topodoc.rules.common import log_line, path_evidence, sysfs_evidence
from topodoc.rules.engine import Evidence, Hit, MissingFacts, Severity, rule
from topodoc.rules.machine import VERBS_KINDS, ancestors, rdma_nics
from topodoc.topology import Topology, nccl_policy, rails
from topodoc.topology.rails import RailPair, rail_names, rail_pairs
from topodoc.topology.vocab import SMI_LEVELS, level_rank

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import EnvSetting, LogAnalysis

ACS_REDIRECT = 0x04 | 0x08  # ReqRedir | CmpltRedir: P2P requests/completions sent up to the root complex
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


def acs_text(value: int) -> str:
    return (
        f"0x{value:04x} ("
        + " ".join(f"{n}{'+' if value >> i & 1 else '-'}" for i, n in enumerate(ACS_BITS))
        + ")"
    )


@rule(
    "gdr-prereq-missing", "error", ("gdr", "rdma", "kernel"),
    reads=("kernel",),
    title="GPUDirect RDMA prerequisites missing (no peermem, no DMA-BUF)",
    fix="sudo modprobe nvidia-peermem (and list it in /etc/modules-load.d/), or use the open GPU "
    "kernel module on a kernel with DMA-BUF support",
)
def gdr_prereq_missing(snapshot: Snapshot) -> Iterator[Hit]:
    # EFA is left out on purpose: its kernel driver pins GPU memory itself (NVIDIA's p2p interface, or the
    # efa_nv_peermem module with the open GPU driver), so the absence of nvidia_peermem/nv_peer_mem says
    # nothing about GPUDirect RDMA over EFA; the log rules judge it (aws-ofi-nccl's "GDR disabled" warning,
    # no /GDRDMA). See docs/gdr-prereq-missing.md.
    nics = [nic for nic in rdma_nics(snapshot) if nic.kind in VERBS_KINDS]
    kernel = snapshot.kernel
    if not nics or not snapshot.gpus or kernel.peermem_module or kernel.dmabuf_supported:
        return
    if any("peermem" in gap.what for gap in snapshot.gaps):
        raise MissingFacts("the peermem module state was not readable in this snapshot")
    yield Hit(
        subject="host",
        message=f"{len(nics)} RDMA NIC(s) but neither nvidia_peermem/nv_peer_mem is loaded nor DMA-BUF "
        "available: NCCL cannot register GPU memory with the NIC, so GPUDirect RDMA is off and every "
        "network transfer is staged through host memory",
        evidence=(
            Evidence("sysfs", "/sys/module/nvidia_peermem/version", "absent"),
            Evidence("sysfs", "/sys/kernel/mm/memory_peers/nv_mem/version", "absent"),
            Evidence("derived", "DMA-BUF support", str(kernel.dmabuf_supported)),
        ),
        confidence=1.0 if kernel.dmabuf_supported is False else 0.8,
    )


@rule(
    "gpu-nic-far", "warning", ("gdr", "rdma", "topology"),
    reads=("placement", "nics"),
    title="A GPU's nearest RDMA NIC is farther than PXB (GPUDirect RDMA off by default)",
    fix="put each GPU's NIC under its PCIe switch; if the platform handles it, raise NCCL_NET_GDR_LEVEL "
    "(e.g. PHB); in a VM, give NCCL the real topology with NCCL_TOPO_FILE",
)
def gpu_nic_far(snapshot: Snapshot, topology: Topology, logs: LogAnalysis | None = None) -> Iterator[Hit]:
    pairs = rail_pairs(topology)
    limit, override = _gdr_limit(logs)
    c2c_ok = nccl_policy.gdr_c2c(logs.summary.nccl_version if logs else None, _env(logs))
    # a Grace GPU reaching its NIC over NVLink-C2C (P2C) keeps GPUDirect RDMA unless NCCL is known to
    # lack or disable NCCL_NET_GDR_C2C (default on from 2.27)
    # a GPU with its own NUMA node (coherent memory: a Grace GPU) whose C2C links nobody reported (a pasted
    # matrix) may reach the NIC over C2C: whether GPUDirect RDMA is off is unknown, so no claim is made
    far = [pair for pair in pairs if not nccl_policy.within(pair.path, limit)
           and not (pair.conn.nccl == "P2C" and c2c_ok is not False)
           and not (pair.gpu.gpu_numa_id is not None and pair.gpu.c2c_links == 0
                    and snapshot.gpus and all(g.c2c_links is None for g in snapshot.gpus))]
    for path in SMI_LEVELS:
        group = [pair for pair in far if pair.path == path]
        if group:
            alternatives = _shared_alternatives(topology, group, pairs)
            yield _far_hit(group, path, bool(snapshot.host.virtualized), alternatives, override)


def _env(logs: LogAnalysis | None) -> dict[str, str]:
    return {s.name: s.value for s in logs.env} if logs is not None else {}


def _gdr_limit(logs: LogAnalysis | None) -> tuple[str, EnvSetting | None]:
    """The GPU-NIC path type up to which NCCL uses GPUDirect RDMA: an NCCL_NET_GDR_LEVEL (or its old name
    NCCL_IB_GDR_LEVEL) the log shows, else NCCL's default PXB."""
    for setting in logs.env if logs is not None else ():
        found = nccl_policy.level(setting.value)
        if setting.name in ("NCCL_NET_GDR_LEVEL", "NCCL_IB_GDR_LEVEL") and found:
            return found, setting
    return nccl_policy.GDR_DEFAULT, None


def _shared_alternatives(topology: Topology, group: list[RailPair], pairs: list[RailPair]) -> list[str]:
    """For GPUs whose own rail NIC is far: a NIC within PXB that another GPU's rail already uses."""
    owner = {p.nic.name: p.gpu.name for p in pairs}
    notes = []
    for pair in group:
        near = [n for n in rails.rdma_nics(topology)
                if n.name != pair.nic.name and _within_pxb(topology, pair.gpu.name, n.name)]
        if near:
            shared = f", shared with {owner[near[0].name]}" if near[0].name in owner else ""
            notes.append(f"{pair.gpu.name} can reach {near[0].device} within PXB{shared}")
    return notes


def _within_pxb(topology: Topology, gpu: str, nic: str) -> bool:
    conn = topology.connection(gpu, nic)
    return conn is not None and level_rank(conn.pci_level or "SYS") <= level_rank("PXB")


def _far_hit(group: list[RailPair], path: str, virtualized: bool, alternatives: list[str],
             override: EnvSetting | None) -> Hit:
    names = rail_names(group)
    evidence = tuple(path_evidence(p.gpu.pci_address, p.nic.pci_address, path) for p in group[:4])
    level = (f"the log's {override.name}={override.value}" if override is not None
             else "NCCL's default NCCL_NET_GDR_LEVEL=PXB")
    if override is not None:
        evidence += (log_line(override.evidence),)
    message = (
        f"{len(group)} GPU(s) reach their own rail NIC only through {path}: {level} turns GPUDirect RDMA "
        "off on that path, so network traffic through it is staged through host memory (lower bandwidth, "
        "more CPU and PCIe load)"
    )
    if alternatives:
        message += (f"; {'; '.join(alternatives)}: NCCL may pick that NIC instead, halving each GPU's "
                    "network bandwidth on the shared rail")
    if not virtualized:
        return Hit(names, message, evidence)
    return Hit(
        names,
        message + "; in this VM the hypervisor flattens the PCIe tree, so the distance may be an artefact: "
        "NCCL needs the provider's topology file to see the real switches",
        evidence,
        fix="set NCCL_TOPO_FILE to the provider's topology XML (aws-ofi-nccl and the cloud images ship one) "
        "and check for /GDRDMA in an NCCL_DEBUG=INFO log",
        severity=Severity.INFO,
        confidence=0.6,
    )


def _between(snapshot: Snapshot, a: str | None, b: str | None) -> list[str]:
    """Bridges P2P traffic between a and b passes below their common switch (none via the CPU)."""
    up_a, up_b = ancestors(snapshot, a), ancestors(snapshot, b)
    common = next((bridge for bridge in up_a if bridge in up_b), None)
    if common is None:
        return []
    return up_a[: up_a.index(common)] + up_b[: up_b.index(common)]


# ACS P2P Request/Completion Redirect is implemented by root ports and switch downstream ports (PCIe Base
# spec, ACS Extended Capability; linux drivers/pci/pci.c pci_acs_enabled); a switch upstream port has no
# ACS capability at all, so its absent ACS control is not an unreadable one.
NO_ACS_PORTS = ("upstream",)


def _on_path_bridges(snapshot: Snapshot, topology: Topology) -> set[str]:
    """Bridges that could redirect P2P on a GPU-GPU path not covered by NVLink, or on a GPU-NIC path."""
    return {b for b in _bridges_between(snapshot, topology) if snapshot.pci[b].port_type not in NO_ACS_PORTS}


def _bridges_between(snapshot: Snapshot, topology: Topology) -> set[str]:
    address = {end.name: end.pci_address for end in (*topology.gpus, *topology.nics)}
    rdma = {nic.name for nic in rails.rdma_nics(topology)}
    conns = [c for c in topology.gpu_pairs if not c.nvlinks]
    conns += [c for c in topology.gpu_nic if c.b in rdma]
    return {bridge for c in conns for bridge in _between(snapshot, address[c.a], address[c.b])}


@rule(
    "acs-on-p2p-path", "error", ("pcie", "acs", "gdr", "p2p"),
    reads=("placement", "acs"),
    title="ACS redirect enabled on a bridge on a GPU-GPU or GPU-NIC path",
    fix="disable ACS in the BIOS, or at runtime clear only ReqRedir and CmpltRedir on each listed bridge: "
    "`sudo setpci -s <BDF> ECAP_ACS+0x6.w=0000:000c` (bare metal only)",
)
def acs_on_p2p_path(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    on_path = sorted(_on_path_bridges(snapshot, topology))
    unreadable = [addr for addr in on_path if snapshot.pci[addr].acs_ctrl is None]
    enabled = acs_redirect_bridges(snapshot, topology)
    if not enabled and unreadable:
        raise MissingFacts(f"ACS control is unreadable on {len(unreadable)} on-path bridge(s) (needs root)")
    if not enabled:
        return
    evidence = tuple(
        sysfs_evidence(addr, "config ACS ctrl", acs_text(snapshot.pci[addr].acs_ctrl or 0))
        for addr in enabled[:4]
    )
    if snapshot.host.virtualized:
        yield _acs_in_vm(enabled, evidence)
    else:
        yield _acs_on_bare_metal(enabled, evidence, snapshot.source)


def acs_off_commands(bridges: list[str], source: str = "live") -> str:
    """The runtime fix for ACS redirect (bare metal only): clear ReqRedir and CmpltRedir, and nothing else,
    in each bridge's ACS control word (ECAP_ACS+0x6). setpci's ``value:mask`` form reads the word, changes
    only the bits set in the mask and writes it back, so SrcValid, TransBlk, UpstreamFwd, EgressCtrl and
    DirectTrans keep their values. For a recording (``source`` is not ``live``) the addresses are the
    recorded machine's, and the text says so."""
    commands = " ; ".join(f"sudo setpci -s {addr} ECAP_ACS+0x6.w=0000:{ACS_REDIRECT:04x}" for addr in bridges)
    if source == "live":
        return commands
    return f"on the machine recorded in {source} (the PCI addresses are that machine's): {commands}"


def acs_redirect_bridges(snapshot: Snapshot, topology: Topology) -> list[str]:
    """Bridges on a GPU-GPU or GPU-NIC P2P path whose ACS control redirects P2P to the root complex."""
    on_path = sorted(_on_path_bridges(snapshot, topology))
    return [addr for addr in on_path if (snapshot.pci[addr].acs_ctrl or 0) & ACS_REDIRECT]


def _acs_in_vm(enabled: list[str], evidence: tuple[Evidence, ...]) -> Hit:
    return Hit(
        subject=", ".join(enabled),
        message="ACS redirect is on along GPU/NIC P2P paths; in a VM this is expected (the hypervisor "
        "needs it for isolation), so check that ATS is enabled on the GPUs and NICs instead",
        evidence=evidence,
        fix="check `lspci -vvv | grep -i ATSCtl` shows Enable+ on GPUs and NICs; ask the provider for ATS",
        severity=Severity.INFO,
    )


def _acs_on_bare_metal(enabled: list[str], evidence: tuple[Evidence, ...], source: str) -> Hit:
    return Hit(
        subject=", ".join(enabled),
        message=f"ACS P2P redirect is enabled on {len(enabled)} switch port(s) between GPUs/NICs: P2P and "
        "GPUDirect RDMA traffic is forced up to the root complex (much slower, or failing with IB local "
        "protection errors)",
        evidence=evidence,
        fix=acs_off_commands(enabled[:4], source) + " (or disable ACS in the BIOS)",
    )


@rule(
    "iommu-translated", "warning", ("iommu", "kernel", "gdr", "p2p"),
    reads=("kernel",),
    title="IOMMU in translation mode on bare metal",
    fix="boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt), or disable the IOMMU",
)
def iommu_translated(snapshot: Snapshot) -> Iterator[Hit]:
    kernel = snapshot.kernel
    if kernel.iommu_mode != "translated" or snapshot.host.virtualized:
        return
    yield Hit(
        subject="host",
        message="the IOMMU translates DMA addresses: PCIe P2P and GPUDirect RDMA either go through "
        "translation (slower) or fail, and NCCL's P2P/GDR paths are affected",
        evidence=(
            Evidence("procfs", "/proc/cmdline", kernel.cmdline or "(not recorded)"),
            Evidence("sysfs", "/sys/kernel/iommu_groups/*/type", "DMA (translated)"),
        ),
    )


RULES = (gdr_prereq_missing, gpu_nic_far, acs_on_p2p_path, iommu_translated)
