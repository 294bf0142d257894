"""What the rules can read on a text machine, and where their evidence came from.

:func:`rules_to_skip` lists the rules that need what no input gave (with the input that would give it),
so that a rule is never silently "clean" for lack of data; :func:`cite` points each finding's evidence at
the input line that gave the value (the rules speak sysfs and NVML) and turns stand-in addresses back
into the matrix's names.
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoc.model import Snapshot
from topodoc.parsers.detect import title


def facets_of(s: Snapshot, facts: set[str]) -> frozenset[str]:
    if "complete" in facts:
        return frozenset(_ADD)
    found = set()
    if s.gpus:
        found.add("gpus")
    if s.gpus and all(g.pci_address in s.pci for g in s.gpus):
        found.add("placement")
    rdma = [n for n in s.nics if n.kind in ("ib", "roce", "efa")]
    if rdma:
        found.add("nics")
    if any(p.state for n in rdma for p in n.ports):
        found.add("nic_ports")
    if any(p.gids for n in rdma for p in n.ports):
        found.add("gids")
    if any(d.link.width or d.link.speed_gts for d in s.pci.values()) or any(g.pcie_width for g in s.gpus):
        found.add("pcie_links")
    if any(d.acs_ctrl is not None for d in s.pci.values()):
        found.add("acs")
    if any(g.nvlinks for g in s.gpus) or any(p.p2p_nvlink for p in s.gpu_pairs):
        found.add("nvlinks")
    if "nvlinks" in found or facts & {"matrix", "nvlink-status", "nvlink-listed"}:
        found.add("nvlink_known")
    if any(p.p2p_read or p.p2p_write for p in s.gpu_pairs):
        found.add("p2p")
    if any(g.fabric for g in s.gpus):
        found.add("fabric")
    if any(g.numa_node is not None for g in s.gpus) or any(d.numa_node is not None for d in s.pci.values()):
        found.add("numa")
    if s.kernel.release or s.kernel.peermem_module or s.kernel.iommu_mode:
        found.add("kernel")
    if any(d.aer for d in s.pci.values()):
        found.add("aer")
    if s.process_cpuset:
        found.add("cpuset")
    if s.driver.nvml_available or "smi" in facts:
        found.add("lost")
    if any(g.name for g in s.gpus):
        found.add("gpu_names")
    return frozenset(found)


_ADD = {
    "gpus": "nvidia-smi -q, nvidia-smi topo -m, or lspci -vvv",
    "placement": "nvidia-smi topo -m, lspci -vvv (or -tv), or an NCCL topology/hwloc XML",
    "nics": "ibstat (or ibv_devinfo) and nvidia-smi topo -m",
    "nic_ports": "ibstat or ibv_devinfo",
    "gids": "show_gids",
    "pcie_links": "sudo lspci -vvv or nvidia-smi -q",
    "acs": "sudo lspci -vvv (ACSCtl lines need root)",
    "nvlinks": "nvidia-smi nvlink -s or nvidia-smi topo -m",
    "nvlink_known": "nvidia-smi topo -m or nvidia-smi nvlink -s (whether GPUs have NVLink)",
    "p2p": "nvidia-smi topo -p2p r",
    "fabric": "nvidia-smi -q (its Fabric section)",
    "numa": "nvidia-smi topo -m or lspci -vvv (NUMA node lines)",
    "kernel": "kernel state (peer memory, IOMMU mode) is not in these texts: run topodoc on the machine",
    "aer": "AER counters are not in these texts: run topodoc on the machine (or pass its dmesg once read)",
    "cpuset": "the job's cpuset is not in these texts: run topodoc inside the job's container",
    "lost": "nvidia-smi or nvidia-smi -q output (a lost GPU prints 'Unable to determine the device handle')",
    "gpu_names": "nvidia-smi -q (or nvidia-smi -L) for the GPU models",
}
_RULE_FACETS = {
    "pcie-width-reduced": ("pcie_links",),
    "pcie-speed-reduced": ("pcie_links",),
    "gpu-p2p-via-cpu": ("placement", "nvlink_known"),
    "gpu-p2p-unsupported": ("p2p",),
    "gpu-consumer-p2p-disabled": ("gpu_names",),
    "pcie-aer-errors": ("aer",),
    "gpu-lost": ("lost",),
    "nvlink-link-down": ("nvlinks",),
    "nvlink-bridge-pairs-only": ("nvlinks",),
    "nvswitch-fabric-incomplete": ("nvlinks", "fabric"),
    "gdr-prereq-missing": ("kernel",),
    "gpu-nic-far": ("placement", "nics"),
    "acs-on-p2p-path": ("placement", "acs"),
    "iommu-translated": ("kernel",),
    "gpu-nic-numa-mismatch": ("placement", "nics", "numa"),
    "numa-node-unknown": ("numa",),
    "cpuset-excludes-gpu-cpus": ("cpuset",),
    "rails-shared": ("gpus", "nics"),
    "ib-port-down": ("nic_ports",),
    "ib-rate-below-peers": ("nic_ports",),
    "roce-no-v2-gid": ("gids",),
    "rail-mismatch": ("placement", "nics"),
    "p2p-over-pcie-despite-nvlink": ("nvlinks",),
    "socket-despite-active-ib": ("nic_ports",),
    "gdr-unused-but-possible": ("kernel", "placement", "nics"),
    "ib-local-protection-cause": ("acs",),
    "nccl-tests-busbw-below-expected": ("placement",),
}


def rules_to_skip(machine, rule_ids: list[str]) -> dict[str, str]:
    """Rule id -> why it is skipped on this text machine and what input would let it run."""
    out = {}
    for rule_id in rule_ids:
        missing = [f for f in _RULE_FACETS.get(rule_id, ()) if f not in machine.facets]
        if missing:
            out[rule_id] = "needs " + "; ".join(f"{f.replace('_', ' ')} ({_ADD[f]})" for f in missing)
    return out


# ---- evidence: from sysfs/NVML spellings back to the input lines ----

_ADDR = re.compile(r"(?:[0-9a-f]{4}:)[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_IBPORT = re.compile(r"/sys/class/infiniband/([^/]+)/ports/(\d+)/")
_NVML = re.compile(r"^\w+\((\d+)(?:,\s*(\d+))?[^)]*\)$")


def cite(report, machine):
    """``report`` with each finding's evidence pointing at the input line that gave the value, and
    stand-in addresses replaced by the matrix's names."""
    from topodoc.rules.engine import Evidence

    def where_from(ev: Evidence) -> Evidence:
        key = None
        if ev.source == "sysfs":
            port = _IBPORT.search(ev.where)
            addr = _ADDR.search(ev.where)
            key = f"{port[1]}:{port[2]}" if port else addr[0] if addr else None
        elif ev.source == "nvml":
            m = _NVML.match(ev.where)
            key = f"gpu{m[1]}" if m else None
            for finer in (f"gpu{m[1]}:link{m[2]}", f"pair{m[1]}-{m[2]}") if m and m[2] else ():
                if finer in machine.provenance:
                    key = finer
                    break
        if key and key in machine.provenance:
            kind, where = machine.provenance[key]
            return Evidence(title(kind), where, _relabel(ev.value, machine))
        return Evidence(ev.source, _relabel(ev.where, machine), _relabel(ev.value, machine))

    findings = tuple(
        replace(
            f,
            subject=_relabel(f.subject, machine),
            message=_relabel(f.message, machine),
            fix=_relabel(f.fix, machine) if f.fix else f.fix,
            evidence=tuple(where_from(e) for e in f.evidence),
        )
        for f in report.findings
    )
    return replace(report, findings=findings)


def _relabel(text: str, machine) -> str:
    if not machine.labels or not text:
        return text
    return _ADDR.sub(lambda m: machine.labels.get(m[0], m[0]), text)
