"""PCIe rules: link width and speed, GPU P2P paths through the CPU, P2P support, AER, lost GPUs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from topodoc.model import Gpu, PciDevice, Snapshot
from topodoc.rules.common import path_evidence, shortlist, sysfs_evidence
from topodoc.rules.engine import Evidence, Hit, Severity, rule
from topodoc.rules.machine import gpu_label, gpu_name, pair_names, rdma_nics
from topodoc.topology import Topology, pcitree
from topodoc.topology.rates import pcie_gbps
from topodoc.topology.types import UPSTREAM
from topodoc.topology.vocab import pcie_gen

IDLE_GTS = 2.5  # GPUs save power by dropping the link to Gen1 when idle


def _x16(gen: int | None) -> float:
    """Line rate of a x16 link of generation ``gen``, GB/s per direction (REFERENCE §6.1)."""
    return pcie_gbps(gen, 16) or 0.0


def _watched(snapshot: Snapshot) -> Iterator[tuple[str, PciDevice]]:
    """GPUs and RDMA NICs with their PCI function: the devices whose links carry training traffic."""
    for gpu in snapshot.gpus:
        if gpu.pci_address in snapshot.pci:
            yield gpu_label(gpu), snapshot.pci[gpu.pci_address]
    for nic in rdma_nics(snapshot):
        if nic.pci_address in snapshot.pci:
            yield f"{nic.name} ({nic.pci_address})", snapshot.pci[nic.pci_address]


def _gen(gts: float) -> str:
    """``16 GT/s (Gen4)``."""
    return f"{gts:g} GT/s (Gen{pcie_gen(gts) or '?'})"


def _nvml(gpu: Gpu, call: str, value: object) -> Evidence:
    """What an NVML per-GPU query returned, e.g. ``nvmlDeviceGetMaxPcieLinkWidth(3)`` -> ``16``."""
    return Evidence("nvml", f"{call}({gpu.index})", str(value), key=f"gpu{gpu.index}")


@rule(
    "pcie-width-reduced", "error", ("pcie", "hardware"),
    reads=("pcie_links",),
    title="PCIe link trained to fewer lanes than the device supports",
    fix="reseat the card or riser, check the slot's lane wiring and BIOS bifurcation, then reboot",
)
def pcie_width_reduced(snapshot: Snapshot) -> Iterator[Hit]:
    for label, dev in _watched(snapshot):
        width, max_width = dev.link.width, dev.link.max_width
        if width and max_width and width < max_width:
            yield Hit(
                subject=label,
                message=f"PCIe link runs at x{width} of x{max_width}: {width / max_width:.0%} of the lanes, "
                "so host, NIC and PCIe P2P bandwidth drop in proportion (unlike speed, width does not "
                "recover when the device is busy)",
                evidence=(
                    sysfs_evidence(dev.address, "current_link_width", str(width)),
                    sysfs_evidence(dev.address, "max_link_width", str(max_width)),
                ),
            )
    yield from _nvml_width(snapshot)
    for address, served in _uplinks(snapshot).items():
        dev, parent = snapshot.pci[address], snapshot.pci[snapshot.pci[address].parent or ""]
        top = min((w for w in (dev.link.max_width, parent.link.max_width) if w), default=0)
        if dev.link.width and top and dev.link.width < top:
            yield Hit(
                subject=f"{address} (switch uplink)",
                message=f"the PCIe switch's uplink to {parent.address} runs at x{dev.link.width} of x{top}: "
                f"{', '.join(served)} below it share {dev.link.width / top:.0%} of the lanes to the CPU "
                "(host copies, GPUDirect RDMA across the switch and P2P through the CPU all slow down)",
                evidence=(
                    sysfs_evidence(address, "current_link_width", str(dev.link.width)),
                    sysfs_evidence(address, "max_link_width", str(dev.link.max_width)),
                    sysfs_evidence(parent.address, "max_link_width", str(parent.link.max_width)),
                ),
            )


def _uplinks(snapshot: Snapshot) -> dict[str, list[str]]:
    """Switch upstream ports above a GPU or RDMA NIC -> the devices below them (their uplink carries all
    of those devices' traffic to the CPU); only those whose upstream neighbour is recorded."""
    served: dict[str, list[str]] = {}
    for label, dev in _watched(snapshot):
        for bridge in pcitree.chain(snapshot.pci, dev.address)[1:]:
            up = snapshot.pci[bridge].parent if bridge in snapshot.pci else None
            if pcitree.port_kind(snapshot.pci, bridge) == UPSTREAM and up in snapshot.pci:
                served.setdefault(bridge, []).append(label.split(" (")[0])
    return served


def _nvml_width(snapshot: Snapshot) -> Iterator[Hit]:
    for gpu in snapshot.gpus:
        dev = snapshot.pci.get(gpu.pci_address or "")
        if dev is not None and dev.link.width and dev.link.max_width:
            continue  # sysfs already judged it
        if gpu.pcie_width and gpu.pcie_max_width and gpu.pcie_width < gpu.pcie_max_width:
            yield Hit(
                subject=gpu_label(gpu),
                message=f"PCIe link runs at x{gpu.pcie_width} of x{gpu.pcie_max_width} (NVML)",
                evidence=(
                    _nvml(gpu, "nvmlDeviceGetCurrPcieLinkWidth", gpu.pcie_width),
                    _nvml(gpu, "nvmlDeviceGetMaxPcieLinkWidth", gpu.pcie_max_width),
                ),
            )


@rule(
    "pcie-speed-reduced", "warning", ("pcie", "hardware"),
    reads=("pcie_links",),
    title="PCIe link speed capped below the device's generation",
    fix="check BIOS PCIe generation settings, the riser/retimer and the slot; reseat and reboot",
)
def pcie_speed_reduced(snapshot: Snapshot) -> Iterator[Hit]:
    gpu_addresses = {gpu.pci_address for gpu in snapshot.gpus}
    peak = max((d.link.speed_gts or 0 for a, d in snapshot.pci.items() if a in gpu_addresses), default=0)
    seen = set()
    for label, dev in _watched(snapshot):
        hit = _capped_by_upstream(snapshot, label, dev)
        if hit is None and dev.address not in gpu_addresses:
            hit = _nic_below_capability(label, dev)
        elif hit is None:
            hit = _gpu_trained_low(snapshot, label, dev, peak)
        if hit is not None:
            seen.add(dev.address)
            yield hit
    for gpu in snapshot.gpus:
        capped = gpu.pcie_max_gen and gpu.pcie_gpu_max_gen and gpu.pcie_max_gen < gpu.pcie_gpu_max_gen
        if capped and gpu.pci_address not in seen:
            yield _slot_cap(gpu)
    for address, served in _uplinks(snapshot).items():
        hit = _uplink_slow(snapshot, address, served)
        if hit is not None:
            yield hit


def _uplink_slow(snapshot: Snapshot, address: str, served: list[str]) -> Hit | None:
    """A switch uplink trained below the speed both its ends support (above Gen1: a switch uplink does not
    idle down the way a GPU's own link does)."""
    dev = snapshot.pci[address]
    parent = snapshot.pci[dev.parent or ""]
    speed = dev.link.speed_gts
    tops = [t for t in (dev.link.max_speed_gts, parent.link.max_speed_gts) if t]
    if not speed or not tops or speed >= min(tops) or speed <= IDLE_GTS:
        return None
    top = min(tops)
    return Hit(
        subject=f"{address} (switch uplink)",
        message=f"the PCIe switch's uplink to {parent.address} trained at {_gen(speed)} of {_gen(top)}: "
        f"{', '.join(served)} below it share {speed / top:.0%} of the bandwidth to the CPU",
        evidence=(
            sysfs_evidence(address, "current_link_speed", f"{speed:g} GT/s PCIe"),
            sysfs_evidence(address, "max_link_speed", f"{dev.link.max_speed_gts or 0:g} GT/s PCIe"),
            sysfs_evidence(parent.address, "max_link_speed", f"{parent.link.max_speed_gts or 0:g} GT/s PCIe"),
        ),
        confidence=0.8,
    )


def _slot_cap(gpu: Gpu) -> Hit:
    return Hit(
        subject=gpu_label(gpu),
        message=f"the slot limits the GPU to Gen{gpu.pcie_max_gen} although it supports "
        f"Gen{gpu.pcie_gpu_max_gen}: x16 peaks at {_x16(gpu.pcie_max_gen):g} instead of "
        f"{_x16(gpu.pcie_gpu_max_gen):g} GB/s per direction",
        evidence=(
            _nvml(gpu, "nvmlDeviceGetMaxPcieLinkGeneration", gpu.pcie_max_gen),
            _nvml(gpu, "nvmlDeviceGetGpuMaxPcieLinkGeneration", gpu.pcie_gpu_max_gen),
        ),
    )


def _gpu_trained_low(snapshot: Snapshot, label: str, dev: PciDevice, peak: float) -> Hit | None:
    """A GPU link below its maximum, corroborated: not the idle floor (Gen1), and the upstream port reads
    the same speed (the link itself trained low). When every GPU sits at the same lower speed, a platform
    or BIOS cap is as likely as a bad link, and the finding says so."""
    speed, top = dev.link.speed_gts, dev.link.max_speed_gts
    parent = snapshot.pci.get(dev.parent or "")
    if not speed or not top or speed >= top or speed <= IDLE_GTS:
        return None
    if parent is None or parent.link.speed_gts != speed:
        return None
    peers = ("while its peer GPUs run at full speed" if peak >= top else
             "like every GPU in the box (a BIOS PCIe-generation setting or the platform caps them all)")
    return Hit(
        subject=label,
        message=f"link trained at {_gen(speed)} of {_gen(top)} {peers}; an "
        f"idle GPU drops to Gen1, not Gen{pcie_gen(speed) or '?'}: host and GPUDirect bandwidth are "
        f"{speed / top:.0%} of what they should be",
        evidence=(
            sysfs_evidence(dev.address, "current_link_speed", f"{speed:g} GT/s PCIe"),
            sysfs_evidence(dev.address, "max_link_speed", f"{top:g} GT/s PCIe"),
            sysfs_evidence(parent.address, "current_link_speed", f"{speed:g} GT/s PCIe"),
        ),
        confidence=0.8,
    )


def _capped_by_upstream(snapshot: Snapshot, label: str, dev: PciDevice) -> Hit | None:
    parent = snapshot.pci.get(dev.parent or "")
    own, up = dev.link.max_speed_gts, parent.link.max_speed_gts if parent else None
    if not own or not up or up >= own:
        return None
    return Hit(
        subject=label,
        message=f"the upstream port tops out at {_gen(up)} while the device supports {_gen(own)}: the link "
        "can never train faster",
        evidence=(
            sysfs_evidence(dev.address, "max_link_speed", f"{own:g} GT/s"),
            sysfs_evidence(parent.address, "max_link_speed", f"{up:g} GT/s"),
        ),
    )


def _nic_below_capability(label: str, dev: PciDevice) -> Hit | None:
    speed, top = dev.link.speed_gts, dev.link.max_speed_gts
    if not speed or not top or speed >= top:
        return None
    return Hit(
        subject=label,
        message=f"NIC link trained at {speed:g} GT/s of {top:g} GT/s; NICs do not downshift when idle "
        "the way GPUs do, so this is a real cap on network-to-host bandwidth",
        evidence=(
            sysfs_evidence(dev.address, "current_link_speed", f"{speed:g} GT/s"),
            sysfs_evidence(dev.address, "max_link_speed", f"{top:g} GT/s"),
        ),
        confidence=0.8,
    )


P2P_COST = {
    "PHB": "through the CPU root complex: GPU-to-GPU copies reach about half of what a shared PCIe switch "
    "gives{measured}",
    "NODE": "across host bridges inside one NUMA node: like PHB, every copy crosses the CPU's root complex",
    "SYS": "across sockets over UPI / Infinity Fabric: the slowest path in the box (NCCL models it at "
    "{bw}), with extra latency",
}


def _measured(topology: Topology) -> str:
    """The 23-29 vs 48-58 GB/s figures were measured on PCIe 5.0 x16; quote them only for such GPUs."""
    gens = {link.max_gen or link.gen for c in topology.gpu_pairs for link in (c.pcie.links if c.pcie else ())
            if link.kind == "pcie" and (link.a in _gpu_names(topology) or link.b in _gpu_names(topology))}
    if gens == {5}:
        return " (23-29 against 48-58 GB/s on PCIe 5.0 x16)"
    return ""


def _gpu_names(topology: Topology) -> set[str]:
    return {g.name for g in topology.gpus}


@rule(
    "gpu-p2p-via-cpu", "warning", ("pcie", "p2p", "topology"),
    reads=("placement", "nvlink_known"),
    title="GPU pairs whose P2P path goes through the CPU or across sockets",
    fix="keep tensor-parallel groups on GPUs under one PCIe switch (PIX) and within one socket",
)
def gpu_p2p_via_cpu(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    groups: dict[str, list[str]] = {}
    first: dict[str, Evidence] = {}
    address = {g.name: g.pci_address for g in topology.gpus}
    for conn in topology.gpu_pairs:
        path = conn.pci_level
        if path in P2P_COST and not conn.nvlinks and conn.nccl != "NVB":
            groups.setdefault(path, []).append(f"{conn.a}-{conn.b}")
            first.setdefault(path, path_evidence(address[conn.a], address[conn.b], path))
    vendor = snapshot.host.cpu_vendor
    inter_socket = ("16 GB/s per direction on AMD" if vendor == "AuthenticAMD"
                    else "6-40 GB/s per direction, by Intel generation" if vendor
                    else "6-40 GB/s per direction on Intel by generation, 16 on AMD")
    measured = _measured(topology)
    for path, pairs in groups.items():
        yield Hit(
            subject=shortlist(pairs, 6, f" (+{len(pairs) - 6} more)"),
            message=f"{len(pairs)} GPU pair(s) are {path} apart, "
            + P2P_COST[path].format(bw=inter_socket, measured=measured),
            evidence=(first[path],),
            severity=Severity.WARNING if path == "SYS" else Severity.INFO,
        )


BAD_P2P = {"CNS": "chipset", "GNS": "GPU", "TNS": "IOH topology", "NS": "platform", "DR": "registry key"}


@rule(
    "gpu-p2p-unsupported", "warning", ("pcie", "p2p"),
    reads=("p2p",),
    title="PCIe peer-to-peer between GPUs is not supported",
    fix="enable P2P/ACS-free routing in the BIOS; in a VM ask for a P2P-capable instance shape",
)
def gpu_p2p_unsupported(snapshot: Snapshot) -> Iterator[Hit]:
    bad = [p for p in snapshot.gpu_pairs if p.p2p_read in BAD_P2P and p.p2p_nvlink != "OK"]
    if bad:
        first = bad[0]
        yield Hit(
            subject=shortlist(pair_names(bad), 6, " ..."),
            message=f"{len(bad)} GPU pair(s) cannot do PCIe P2P (not supported by the "
            f"{BAD_P2P[first.p2p_read]}): NCCL falls back to SHM, staging every transfer through host memory",
            evidence=(
                Evidence("nvml", f"nvmlDeviceGetP2PStatus({first.a}, {first.b}, READ)", first.p2p_read,
                         key=f"pair{first.a}-{first.b}"),
            ),
        )


@rule(
    "pcie-aer-errors", "error", ("pcie", "hardware", "errors"),
    reads=("aer",),
    title="PCIe Advanced Error Reporting counters show link errors",
    fix="reseat the device and its riser/cable; if counters keep growing, replace the riser or the card",
)
def pcie_aer_errors(snapshot: Snapshot) -> Iterator[Hit]:
    for label, dev in _watched(snapshot):
        fatal = dev.aer.get("fatal", 0) + dev.aer.get("nonfatal", 0)
        correctable = dev.aer.get("correctable", 0)
        if fatal or correctable >= 1000:
            yield Hit(
                subject=label,
                message=f"{fatal} uncorrectable and {correctable} correctable PCIe errors recorded: the link "
                "is marginal (replays slow it down; uncorrectable errors can drop the device)",
                evidence=_aer_evidence(dev),
                severity=None if fatal else Severity.WARNING,
            )


# each AER counter file and the TOTAL line it ends with (linux Documentation/ABI/testing/
# sysfs-bus-pci-devices-aer_stats; REFERENCE.md §5)
AER_TOTALS = {
    "correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
    "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL"),
    "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
}


def _aer_evidence(dev: PciDevice) -> tuple[Evidence, ...]:
    """Each recorded AER counter file as the kernel writes its last line, e.g. ``TOTAL_ERR_COR 14``."""
    return tuple(
        sysfs_evidence(dev.address, name, f"{total} {dev.aer[kind]}")
        for kind, (name, total) in AER_TOTALS.items()
        if kind in dev.aer
    )


@rule(
    "gpu-lost", "critical", ("gpu", "hardware"),
    reads=("lost",),
    title="A GPU has fallen off the bus",
    fix="drain the node, collect nvidia-bug-report.sh, then reset the GPU or reboot; replace if it recurs",
)
def gpu_lost(snapshot: Snapshot) -> Iterator[Hit]:
    for gpu in snapshot.gpus:
        if gpu.lost:
            yield Hit(
                subject=gpu_label(gpu),
                message="NVML reports GPU_IS_LOST (usually Xid 79): every job using this GPU will "
                "hang or fail",
                evidence=(_lost_evidence(snapshot, gpu),),
            )


def _lost_evidence(snapshot: Snapshot, gpu: Gpu) -> Evidence:
    """The NVML call that answered GPU_IS_LOST, as the collector recorded it in the GPU's gap."""
    gap = next((g for g in snapshot.gaps if g.what == f"GPU {gpu.index}" and g.source.startswith("nvml:")),
               None)
    if gap is None:
        return Evidence("nvml", f"GPU {gpu.index}: the failing call was not recorded", "GPU_IS_LOST",
                        key=f"gpu{gpu.index}")
    call = f"{gap.source.removeprefix('nvml:')}({gpu.index})"
    return Evidence("nvml", call, "NVML_ERROR_GPU_IS_LOST (15)", key=f"gpu{gpu.index}")



# GeForce RTX 40- and 50-series (and the RTX 5090 D): NVIDIA's driver disables PCIe peer-to-peer on them
# (FAILURES.md #27); matched on the name NVML reports, never guessed from the PCI id.
_CONSUMER_NO_P2P = re.compile(r"\bGeForce RTX [45]0[0-9]0\b")


@rule(
    "gpu-consumer-p2p-disabled", "warning", ("gpu", "p2p", "hardware"),
    reads=("gpu_names",),
    title="GeForce RTX 40/50-series GPUs: PCIe peer-to-peer is disabled by the driver",
    fix="expect SHM (host memory) bandwidth between these GPUs; place ranks so that pairs do not share one "
        "PCIe switch uplink; data-center GPUs are needed for P2P (no NCCL setting turns it on)",
)
def gpu_consumer_p2p_disabled(snapshot: Snapshot) -> Iterator[Hit]:
    consumer = [g for g in snapshot.gpus if g.name and _CONSUMER_NO_P2P.search(g.name)]
    if len(consumer) < 2:
        return
    names = ", ".join(gpu_name(g) for g in consumer)
    yield Hit(
        subject=names,
        message=f"{len(consumer)} GeForce RTX 40/50-series GPUs ({consumer[0].name}): NVIDIA's driver does "
        "not allow PCIe peer-to-peer on them, so NCCL copies every intra-node transfer through host memory "
        "(SHM) instead of its P2P transport",
        evidence=tuple(_nvml(g, "nvmlDeviceGetName", g.name) for g in consumer[:4]),
    )

RULES = (
    pcie_width_reduced,
    pcie_speed_reduced,
    gpu_p2p_via_cpu,
    gpu_p2p_unsupported,
    gpu_consumer_p2p_disabled,
    pcie_aer_errors,
    gpu_lost,
)
