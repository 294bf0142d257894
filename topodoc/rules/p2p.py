"""P2P blocked on a PCIe machine: the first collective never finishes inside one node (an nccl-tests run
that stops before its first size, a hang the log analyzer infers inside one node) or NCCL_P2P_DISABLE=1
is set on one node, on GPUs whose peer-to-peer traffic crosses PCIe. The usual cause is P2P DMA blocked
by ACS redirect on a bridge or by IOMMU translation (FAILURES.md 11 and 29). With the ACS or IOMMU
evidence at hand (a snapshot, a pasted `lspci -vvv`, kernel-log DMAR / AMD-Vi faults) the finding names
it; without it, it gives the outputs that settle it, ranked, and the fixes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from topodoc import pciaddr
from topodoc.rules.bandwidth import NcclTestsInput
from topodoc.rules.common import log_line, texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule
from topodoc.rules.gpudirect import acs_off_commands, acs_redirect_bridges
from topodoc.topology.vocab import SMI_LEVELS

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import LogAnalysis
    from topodoc.model import Snapshot
    from topodoc.topology import Topology

SETTLE = (
    "1. `sudo lspci -vvv | grep -i acsctl` (ReqRedir+ or CmpltRedir+ on a bridge between the GPUs: ACS "
    "redirect); 2. `sudo dmesg | grep -e DMAR -e AMD-Vi` (DMAR faults or IO_PAGE_FAULT on the GPUs: the "
    "IOMMU translates); 3. `cat /proc/cmdline` (intel_iommu=on / amd_iommu=on without iommu=pt); a quick "
    "test: the same run with NCCL_P2P_DISABLE=1 (it passes: P2P is blocked), or the CUDA sample "
    "p2pBandwidthLatencyTest (it hangs or reads wrong data)"
)
ACS_FIRST = SETTLE.split("; 2.")[0].removeprefix("1. ")  # the ACS check alone
FIXES = (
    "ACS: clear ReqRedir and CmpltRedir on each bridge between the GPUs (`sudo setpci -s <BDF> "
    "ECAP_ACS+0x6.w=0000:000c`, bare metal only, until reboot), or disable ACS in the BIOS (or the kernel "
    "parameter pci=disable_acs_redir=<BDF>); IOMMU: boot with iommu=pt (intel_iommu=on iommu=pt, "
    "amd_iommu=on iommu=pt) or turn the IOMMU off; NCCL_P2P_DISABLE=1 only as a stopgap (traffic through "
    "host memory)"
)


@rule(
    "p2p-blocked-pcie", "warning", ("p2p", "pcie", "acs", "iommu", "hang", "joined"),
    title="A hang (or P2P switched off) inside a PCIe node: P2P DMA blocked by ACS redirect or the IOMMU",
    fix=FIXES,
)
def p2p_blocked_pcie(
    logs: LogAnalysis, nccl_tests: Any = None, snapshot: Snapshot | None = None,
    topology: Topology | None = None, kernel: Any = None, texts: Any = None,
) -> Iterator[Hit]:
    symptom = _tests_symptom(nccl_tests) or _log_symptom(logs)
    if symptom is None:
        return
    what, lines, weak = symptom
    pcie, pcie_lines = _pcie(topology, nccl_tests)
    if pcie is None:  # every GPU pair is NVLink-connected: P2P does not cross PCIe here
        return
    causes, cause_lines = _causes(snapshot, topology, kernel, _gpu_buses(logs, nccl_tests, topology))
    iommu, iommu_lines = _pasted_iommu(texts)
    if iommu == "on" and not causes:
        yield Hit("node", f"{what}, {pcie}. The pasted kernel command line turns the IOMMU on without "
                  "iommu=pt: unless this kernel's default domain is passthrough, GPU DMA is translated, the "
                  "usual reason P2P between PCIe GPUs hangs. Settle it with "
                  "`cat /sys/kernel/iommu_groups/*/type` (DMA or DMA-FQ: translated; identity: passthrough) "
                  f"and `sudo dmesg | grep -e DMAR -e AMD-Vi`; and check ACS: {ACS_FIRST}",
                  lines + pcie_lines + iommu_lines, fix=FIXES, confidence=0.7)
        return
    if causes:
        yield Hit("node", f"{what}, {pcie}: {'; '.join(causes)}. P2P DMA between the GPUs is blocked or "
                  "misrouted, so the first transfer over P2P never completes",
                  lines + pcie_lines + cause_lines, fix=_fix(snapshot, topology), severity=Severity.ERROR)
        return
    if iommu == "passthrough":
        yield Hit("node", f"{what}, {pcie}. The pasted kernel command line puts the IOMMU in passthrough (or "
                  "off), so IOMMU translation is not the cause; the usual remaining one on a PCIe machine is "
                  "ACS redirect on a bridge between the GPUs (or a platform without P2P between the slots). "
                  f"What settles it: {ACS_FIRST}",
                  lines + pcie_lines + iommu_lines, severity=Severity.INFO if weak else None, confidence=0.6)
        return
    yield Hit("node", f"{what}, {pcie}. On a PCIe machine the usual cause is P2P DMA blocked by ACS redirect "
              "on a PCIe bridge or by IOMMU translation (or a platform without P2P between the slots); the "
              f"inputs hold no ACS or IOMMU evidence. What settles it, in order: {SETTLE}",
              lines + pcie_lines, severity=Severity.INFO if weak else None, confidence=0.6)


_PASSTHROUGH = {"iommu": ("pt", "off"), "iommu.passthrough": ("1", "on", "y"), "intel_iommu": ("off",),
                "amd_iommu": ("off",)}


def _pasted_iommu(texts: Any) -> tuple[str | None, tuple[Evidence, ...]]:
    """What a pasted kernel command line (``cat /proc/cmdline``, GRUB_CMDLINE_LINUX) says of the IOMMU:
    "passthrough" (iommu=pt, iommu.passthrough=1, or the IOMMU off), "on" (intel_iommu=on / amd_iommu=on
    without those), or None (it names neither: the kernel's build default, unknown here)."""
    for path, parsed in texts_of(texts, "kernel-cmdline"):
        settings = parsed.settings()
        for name, values in _PASSTHROUGH.items():
            if name in settings and settings[name][0].lower() in values:
                value, line = settings[name]
                return "passthrough", (Evidence("kernel command line", f"{path}:{line}", f"{name}={value}"),)
        for name in ("intel_iommu", "amd_iommu"):
            if name in settings and settings[name][0].lower().split(",")[0] in ("on", "force"):
                value, line = settings[name]
                return "on", (Evidence("kernel command line", f"{path}:{line}", f"{name}={value}"),)
    return None, ()


def _tests_symptom(nccl_tests: Any) -> tuple[str, tuple[Evidence, ...], bool] | None:
    """An nccl-tests run on one host with several GPUs that printed its devices and stopped before the first
    size without a failure line: the first collective never finished."""
    if not isinstance(nccl_tests, NcclTestsInput):
        return None
    run = nccl_tests.run
    hosts = {d.host for d in run.devices if d.host}
    if run.rows or run.failures or run.complete or len(run.devices) < 2 or len(hosts) > 1:
        return None
    name = run.program or "nccl-tests"
    return (f"the nccl-tests run ({name}, {len(run.devices)} GPUs on one host) stopped "
            "before its first size with no failure line: the first collective never finished",
            (Evidence("nccl-tests", nccl_tests.path, "no result row, no footer"),), False)


def _log_symptom(logs: LogAnalysis | None) -> tuple[str, tuple[Evidence, ...], bool] | None:
    if logs is None:
        return None
    conns = logs.connections
    inside = logs.summary.nnodes == 1 or (
        any(c.transport.startswith("P2P/") for c in conns) and not any(c.transport.startswith("NET/")
                                                                      for c in conns))
    hang = next((item for item in logs.inferences if item.kind == "hang"), None)
    if hang is not None and inside:
        return ("the job hangs inside one node (the analyzer's hang inference)",
                tuple(log_line(ev) for ev in hang.evidence[:2]), False)
    off = next((s for s in logs.env if s.name == "NCCL_P2P_DISABLE" and s.value.strip() == "1"), None)
    if off is not None and logs.summary.nnodes == 1:
        return ("NCCL_P2P_DISABLE=1 is set on a one-node job (the usual workaround when P2P hangs)",
                (log_line(off.evidence),), True)
    return None


def _pcie(topology: Topology | None, nccl_tests: Any) -> tuple[str | None, tuple[Evidence, ...]]:
    """How the inputs show the GPUs talk over PCIe; (None, ()) when every GPU pair has NVLink."""
    pairs = [c for c in (topology.gpu_pairs if topology is not None else ()) if c.nvlinks or c.pci_level]
    if pairs and all(c.nvlinks for c in pairs):
        return None, ()
    pcie = [c for c in pairs if not c.nvlinks and c.pci_level in SMI_LEVELS]
    if pcie:
        shown = ", ".join(f"{c.a}-{c.b} {c.pci_level}" for c in pcie[:4])
        return (f"and {len(pcie)} GPU pair(s) reach each other only over PCIe ({shown})",
                tuple(Evidence("derived", f"path {c.a} -> {c.b}", c.pci_level or "", key=f"{c.a}->{c.b}")
                      for c in pcie[:2]))
    if isinstance(nccl_tests, NcclTestsInput):
        cards = sorted({d.name for d in nccl_tests.run.devices if d.name and "PCIe" in d.name})
        if cards:
            return (f"and the GPUs are PCIe cards ({', '.join(cards)})",
                    (Evidence("nccl-tests", nccl_tests.path, f"device: {cards[0]}"),))
    return ("and whether the GPUs share NVLink or only PCIe is not in the inputs (`nvidia-smi topo -m` "
            "settles it: PIX/PXB/PHB/NODE/SYS between GPUs means PCIe)"), ()


def _gpu_buses(logs: LogAnalysis, nccl_tests: Any, topology: Topology | None) -> set[int]:
    """PCI bus numbers of the job's GPUs, from every input that names them (nccl-tests prints ``[0x4f]``
    or ``0000:4f:00``; NCCL's Init lines and the topology a canonical address)."""
    found = [g.pci_address for g in (topology.gpus if topology is not None else ())]
    found += [r.bus_id for r in logs.ranks]
    if isinstance(nccl_tests, NcclTestsInput):
        for device in nccl_tests.run.devices:
            text = (device.bus_id or "").strip()
            bus = text[2:] if text.startswith("0x") else (text.split(":")[-2] if text.count(":") >= 1 else "")
            found.append(f"0000:{bus}:00.0" if bus else None)
    buses = set()
    for text in found:
        address = pciaddr.try_normalize(text) if text and ":" in text else None
        if address is not None:
            buses.add(pciaddr.parse(address).bus)
    return buses


def _on_gpus(device: str | None, buses: set[int]) -> bool:
    address = pciaddr.try_normalize(device) if device else None
    return address is not None and pciaddr.parse(address).bus in buses


def _causes(snapshot: Snapshot | None, topology: Topology | None, kernel: Any,
            buses: set[int]) -> tuple[list[str], tuple]:
    causes: list[str] = []
    lines: list[Evidence] = []
    if snapshot is not None and topology is not None and not snapshot.host.virtualized:
        bridges = acs_redirect_bridges(snapshot, topology)
        if bridges:
            causes.append(f"ACS redirect is on at {len(bridges)} bridge(s) between the GPUs "
                          f"({', '.join(bridges[:4])})")
            lines += [Evidence("sysfs", f"{b} config ACS ctrl", "ReqRedir/CmpltRedir set", key=b)
                      for b in bridges[:2]]
        if snapshot.kernel.iommu_mode == "translated":
            causes.append("the IOMMU translates DMA addresses (no iommu=pt)")
            lines.append(Evidence("procfs", "/proc/cmdline", snapshot.kernel.cmdline or "(not recorded)"))
    faults = [(path, ev) for path, ev in (kernel or ()) if ev.kind == "iommu" and _on_gpus(ev.device, buses)]
    if faults:  # a fault on another device (integrated graphics, a NIC) says nothing about GPU P2P
        count = sum(ev.repeats for _path, ev in faults)  # (an event kept may stand for later lines too)
        causes.append(f"the kernel log holds {count} IOMMU fault line(s) (DMAR / AMD-Vi) on the GPUs")
        lines += [Evidence("kernel-log", f"{path}:{ev.line}", ev.text.strip()) for path, ev in faults[:2]]
    return causes, tuple(lines)


def _fix(snapshot: Snapshot | None, topology: Topology | None) -> str:
    if snapshot is not None and topology is not None:
        bridges = acs_redirect_bridges(snapshot, topology)
        if bridges:
            return acs_off_commands(bridges[:4], snapshot.source) + " (or disable ACS in the BIOS); " + \
                "IOMMU: iommu=pt"
    return FIXES


RULES: tuple[Rule, ...] = (p2p_blocked_pcie,)
