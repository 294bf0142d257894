"""``topodoc probe`` for a person: host, GPUs and their PCIe paths, GPU pairs, NUMA, NICs, kernel,
and what could not be read and why. Plain text, one fact per line; the JSON form is
``codec.to_data(snapshot)``.
"""

from __future__ import annotations

import re
from collections import Counter

from topodoc.model import Gpu, Nic, NvLink, PciDevice, Snapshot
from topodoc.report.safe import human

NVIDIA = 0x10DE
CLASS_NAMES = {
    0x0300: "VGA",
    0x0302: "3D controller",
    0x0604: "PCI bridge",
    0x0200: "Ethernet",
    0x0207: "InfiniBand",
    0x0680: "bridge (other)",
    0x0600: "host bridge",
    0x0108: "NVMe",
}


@human
def render_probe(snap: Snapshot) -> str:
    sections = [
        _header(snap),
        _gpus(snap),
        _pairs(snap),
        _numa(snap),
        _pci(snap),
        _nics(snap),
        _kernel(snap),
        _gaps(snap),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"


def _header(snap: Snapshot) -> list[str]:
    h = snap.host
    cpu = ", ".join(
        filter(
            None,
            [
                h.cpu_model,
                f"{h.sockets} socket(s)" if h.sockets else None,
                f"{h.logical_cpus} logical CPUs" if h.logical_cpus else None,
                "virtual machine" if h.virtualized else None,
            ],
        )
    )
    return [
        f"Machine {h.hostname or '?'}  (source: {snap.source}, {snap.recorded_at or 'time unknown'})",
        f"  OS {h.os_name or '?'}, kernel {h.kernel or '?'}",
        f"  CPU {cpu or '?'}",
    ]


def _gpus(snap: Snapshot) -> list[str]:
    d = snap.driver
    if not d.nvml_available:
        on_bus = [p for p in snap.pci.values() if p.vendor_id == NVIDIA and (p.class_code or 0) >> 16 == 0x03]
        lines = ["GPUs: no NVIDIA GPU/driver found (NVML could not start; see 'Could not read')."]
        if on_bus:
            lines.append(
                f"  but {len(on_bus)} NVIDIA display function(s) are on the PCI bus: "
                + ", ".join(p.address for p in on_bus)
                + " -- is the driver loaded?"
            )
        return lines
    cuda = (
        f"{d.cuda_driver_version // 1000}.{d.cuda_driver_version % 1000 // 10}"
        if d.cuda_driver_version
        else "?"
    )
    lines = [
        f"GPUs: {len(snap.gpus)} (driver {d.driver_version or '?'}, CUDA {cuda}, "
        f"NVML {d.nvml_version or '?'})"
    ]
    for gpu in snap.gpus:
        lines.extend(_gpu_lines(snap, gpu))
    return lines


def _gpu_lines(snap: Snapshot, gpu: Gpu) -> list[str]:
    if gpu.lost:
        return [f"  GPU{gpu.index}: LOST (NVML says the GPU fell off the bus)"]
    link = (
        f"PCIe Gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'} (max Gen{gpu.pcie_max_gen or '?'} "
        f"x{gpu.pcie_max_width or '?'})"
    )
    lines = [
        f"  GPU{gpu.index}: {gpu.name or '?'} at {gpu.pci_address or '?'}, {link}, "
        f"NUMA {_or_q(gpu.numa_node)}, CPUs {gpu.cpu_affinity or '?'}"
    ]
    extras = [f"NVLink {_nvlink_summary(gpu.nvlinks)}" if gpu.nvlinks else "no NVLink"]
    if gpu.mig_mode is not None:
        extras.append(f"MIG {'on' if gpu.mig_mode else 'off'}")
    if gpu.persistence_mode is not None:
        extras.append(f"persistence {'on' if gpu.persistence_mode else 'off'}")
    if gpu.fabric and gpu.fabric.state != "not_supported":
        extras.append(f"fabric {gpu.fabric.state}, clique {gpu.fabric.clique_id}")
    lines.append("    " + ", ".join(extras))
    if gpu.health is not None:
        lines.append("    health: " + _health_text(gpu.health))
    errors = [f"link {n.link} " + " ".join(f"{k}={v}" for k, v in n.errors.items() if v)
              for n in gpu.nvlinks if any(n.errors.values())]
    if errors:
        lines.append("    NVLink errors since the driver loaded: " + "; ".join(errors))
    if gpu.pci_address:
        lines.append("    path: " + pci_path(snap, gpu.pci_address))
    return lines


def _health_text(h) -> str:
    """One line of what NVML said about the GPU's health; values it did not give are left out."""
    parts = []
    if h.ecc_enabled is not None:
        ecc = "ECC on" if h.ecc_enabled else "ECC off"
        if h.ecc_enabled and h.ecc_volatile_uncorrected is not None:
            ecc += (f" (uncorrected {h.ecc_volatile_uncorrected} since load / {h.ecc_aggregate_uncorrected} "
                    f"lifetime, corrected {h.ecc_volatile_corrected} / {h.ecc_aggregate_corrected})")
        parts.append(ecc)
    if h.remap_pending is not None:
        state = " FAILED" if h.remap_failed else " PENDING" if h.remap_pending else ""
        parts.append(f"rows remapped {h.remapped_rows_corrected} corrected + {h.remapped_rows_uncorrected} "
                     f"uncorrected{state}")
    if h.retired_pages_sbe is not None:
        pending = " PENDING" if h.retired_pages_pending else ""
        parts.append(f"pages retired {h.retired_pages_sbe} single-bit + {h.retired_pages_dbe} "
                     f"double-bit{pending}")
    if h.temperature_c is not None:
        slowdown = f" (slowdown {h.slowdown_temperature_c} C)" if h.slowdown_temperature_c else ""
        parts.append(f"{h.temperature_c} C{slowdown}")
    if h.power_w is not None:
        limit = f" of {h.power_limit_w:g} W" if h.power_limit_w else ""
        parts.append(f"{h.power_w:g} W{limit}")
    if h.clock_events is not None:
        parts.append("clocks " + ("/".join(h.clock_events) if h.clock_events else "not held"))
    return ", ".join(parts) or "not read"


def _nvlink_summary(links: tuple[NvLink, ...]) -> str:
    active = [link for link in links if link.active]
    peers = Counter(link.remote_type or "?" for link in active)
    to = ", ".join(f"{n} to {kind}" for kind, n in sorted(peers.items()))
    return f"{len(active)}/{len(links)} active" + (f" ({to})" if to else "")


def pci_path(snap: Snapshot, address: str) -> str:
    """``pci0000:15 > 0000:15:01.0 root_port > ... > 0000:1a:00.0``, from the parent links."""
    chain: list[PciDevice] = []
    current = snap.pci.get(address)
    while current is not None and len(chain) < 32:
        chain.append(current)
        current = snap.pci.get(current.parent) if current.parent else None
    if not chain:
        return f"{address} (not in the PCI tree)"
    steps = [
        f"{d.address} {d.port_type}" if d.port_type and d.port_type != "endpoint" else d.address
        for d in reversed(chain)
    ]
    return " > ".join([chain[-1].host_bridge or "?"] + steps)


def _pairs(snap: Snapshot) -> list[str]:
    """One line per distinct answer, naming its pairs; the biggest group is "the other N pairs"."""
    if not snap.gpu_pairs:
        return []
    groups: dict[str, list[str]] = {}
    for pair in snap.gpu_pairs:
        answer = (
            f"{pair.common_ancestor or '?'}, P2P read {pair.p2p_read or '?'}, "
            f"NVLink P2P {pair.p2p_nvlink or '?'}"
        )
        groups.setdefault(answer, []).append(f"GPU{pair.a}-GPU{pair.b}")
    biggest = max(groups, key=lambda answer: len(groups[answer]))
    lines = ["GPU pairs (NVML common ancestor / P2P read / NVLink P2P):"]
    for answer, names in groups.items():
        if answer != biggest:
            lines.append(f"  {answer}: {', '.join(names)}")
    count = len(groups[biggest])
    every = "all" if len(groups) == 1 else "the other"
    lines.append(f"  {biggest}: {every} {count} pair{'s' if count > 1 else ''}")
    return lines


def _numa(snap: Snapshot) -> list[str]:
    lines = [f"NUMA: {len(snap.numa)} node(s); this process may run on CPUs {snap.process_cpuset or '?'}"]
    for node in snap.numa:
        memory = f"{node.memory_total_kb / 1048576:.1f} GiB" if node.memory_total_kb else "? GiB"
        lines.append(
            f"  node{node.node}: CPUs {node.cpulist or '?'}, {memory}, distances "
            f"{' '.join(map(str, node.distances)) or '?'}"
        )
    return lines


def _pci(snap: Snapshot) -> list[str]:
    devices = list(snap.pci.values())
    bridges = [d for d in devices if (d.class_code or 0) >> 8 == 0x0604]
    roots = sorted({d.host_bridge for d in devices if d.host_bridge})
    lines = [
        f"PCIe: {len(devices)} functions, {len(bridges)} bridges/ports, "
        f"host bridges {', '.join(roots) or '?'}"
    ]
    for device in sorted(devices, key=lambda d: d.address):
        lines.append("  " + _pci_line(device))
    return lines


def _pci_line(d: PciDevice) -> str:
    kind = CLASS_NAMES.get(
        (d.class_code or 0) >> 8, f"class {d.class_code:06x}" if d.class_code is not None else "?"
    )
    if d.vendor_id == NVIDIA and (d.class_code or 0) >> 8 == 0x0680:
        kind = "NVSwitch"  # NVIDIA's "other bridge" functions are NVSwitch chips (how NCCL spots them)
    ids = (
        f"{d.vendor_id:04x}:{d.device_id:04x}" if d.vendor_id is not None and d.device_id is not None else "?"
    )
    link = ""
    if d.link.width is not None:
        link = (
            f", {d.link.speed_gts or '?'} GT/s x{d.link.width} (max {d.link.max_speed_gts or '?'} x"
            f"{d.link.max_width or '?'})"
        )
    return (
        f"{d.address} {kind} [{ids}] {d.port_type or ''} driver={d.driver or '-'} "
        f"numa={_or_q(d.numa_node)}{link}"
    ).replace("  ", " ")


def _nics(snap: Snapshot) -> list[str]:
    lines = [f"NICs: {len(snap.nics)}" if snap.nics else "NICs: none on the PCI bus"]
    speeds = {i.name: i for i in snap.net}
    lines.extend("  " + _nic_line(nic, speeds) for nic in snap.nics)
    virtual = [i.name for i in snap.net if i.virtual]
    if virtual:
        lines.append(f"  virtual interfaces: {', '.join(virtual)}")
    return lines


def _nic_line(nic: Nic, net: dict) -> str:
    ports = "; ".join(_port_text(p) for p in nic.ports)
    if not ports:  # no RDMA ports: the netdev's own link (sysfs speed, operstate)
        ports = "; ".join(_netdev_text(net[name]) for name in nic.netdevs if name in net)
    netdevs = f" netdevs {','.join(nic.netdevs)}" if nic.netdevs else ""
    return f"{nic.name} [{nic.kind}] at {nic.pci_address or '?'} driver={nic.driver or '-'}{netdevs}" + (
        f": {ports}" if ports else ""
    )


def _netdev_text(iface) -> str:
    speed = f"{iface.speed_mbps / 1000:g} Gb/s" if iface.speed_mbps and iface.speed_mbps > 0 else None
    words = [iface.name, iface.operstate, speed, f"MTU {iface.mtu}" if iface.mtu else None]
    return " ".join(w for w in words if w)


def _port_text(p) -> str:
    words = [f"port {p.port}", p.state or "?", p.rate_text, p.link_layer, f"({len(p.gids)} GIDs)"]
    errors = [f"{k}={v}" for k, v in p.counters.items() if v]
    if errors:
        words.append("errors " + " ".join(errors))
    return " ".join(w for w in words if w)


def _kernel(snap: Snapshot) -> list[str]:
    k = snap.kernel
    peer = f"{k.peermem_module} {k.peermem_version or ''}".strip() if k.peermem_module else "not loaded"
    return [
        f"Kernel: {k.release or '?'}, IOMMU {k.iommu_mode or '?'} ({k.iommu_groups or 0} groups)",
        f"  NVIDIA kernel driver {k.nvidia_driver_version or 'absent'}"
        + (" (open module)" if k.nvidia_open_kernel_module else ""),
        f"  GPUDirect RDMA: peermem {peer}, DMA-BUF {_yes_no(k.dmabuf_supported)}",
    ]


_PER_GPU = re.compile(r"(.*) of GPU (\d+)")


def _gaps(snap: Snapshot) -> list[str]:
    """One line per value, reason and detail; the GPUs it applies to are listed together."""
    if not snap.gaps:
        return ["Everything the probe looks for could be read."]
    groups: dict[tuple[str, str, str], list[int]] = {}
    for gap in snap.gaps:
        match = _PER_GPU.fullmatch(gap.what)
        what = match.group(1) if match else gap.what
        indexes = groups.setdefault((what, gap.reason.value, gap.detail), [])
        if match:
            indexes.append(int(match.group(2)))
    lines = [f"Could not read ({len(snap.gaps)}):"]
    for (what, reason, detail), indexes in groups.items():
        detail = f" -- {detail}" if detail else ""
        lines.append(f"  {what}{_of_gpus(indexes)}: {reason}{detail}")
    return lines


def _of_gpus(indexes: list[int]) -> str:
    if not indexes:
        return ""
    if len(indexes) == 1:
        return f" of GPU {indexes[0]}"
    return f" of GPUs {index_ranges(indexes)}"


def index_ranges(indexes: list[int]) -> str:
    """``[0, 1, 2, 3, 5]`` -> ``"0-3,5"`` (sorted, duplicates dropped)."""
    runs: list[list[int]] = []
    for n in sorted(set(indexes)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _or_q(value) -> str:
    return "?" if value is None else str(value)


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else ("possible" if value else "no")
