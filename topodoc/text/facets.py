"""What the rules can read on a text machine, and where their evidence came from.

:func:`facets_of` says which hardware facets the inputs establish (a rule whose ``reads`` are not all
established is skipped by the engine, with the input that would give them, so that a rule is never silently
"clean", or falsely dirty, for lack of data); :func:`cite` points each finding's evidence at
the input line that gave the value (the rules speak sysfs and NVML) and turns stand-in addresses back
into the matrix's names.
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoc.model import Snapshot
from topodoc.text.detect import title


def facets_of(s: Snapshot, facts: set[str]) -> frozenset[str]:
    """The hardware facets (``rules.engine.FACETS``) these inputs establish."""
    from topodoc.rules.engine import FACETS
    from topodoc.text.placement import STAND_IN_DOMAIN

    if "complete" in facts:
        return frozenset(FACETS)
    found = set()
    if s.gpus:
        found.add("gpus")
    if s.gpus and all(g.pci_address in s.pci for g in s.gpus):
        found.add("placement")
        stand_in = f"{STAND_IN_DOMAIN:04x}:"
        if not any((g.pci_address or "").startswith(stand_in) for g in s.gpus):
            found.add("pcie_tree")  # a tree some input drew (lspci, XML), not one built from the matrix
    rdma = [n for n in s.nics if n.kind in ("ib", "roce", "efa")]
    if rdma:
        found.add("nics")
    if any(p.state for n in rdma for p in n.ports):
        found.add("nic_ports")
    if any(g.type for n in rdma for p in n.ports for g in p.gids):
        found.add("gids")  # GIDs with their RoCE version (show_gids; old ibv_devinfo -v prints none)
    if any(d.link.width or d.link.speed_gts for d in s.pci.values()) or any(g.pcie_width for g in s.gpus):
        found.add("pcie_links")
    if any(d.acs_ctrl is not None for d in s.pci.values()):
        found.add("acs")
    if any(g.nvlinks for g in s.gpus):
        found.add("nvlinks")  # each link's state (nvidia-smi nvlink -s, a probe): not a matrix's NV<n>
    if "nvlinks" in found or any(p.p2p_nvlink for p in s.gpu_pairs) or facts & {
        "matrix", "nvlink-status", "nvlink-listed"
    }:
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


# ---- evidence: from sysfs/NVML spellings back to the input lines ----

_ADDR = re.compile(r"(?:[0-9a-f]{4}:)[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
MACHINE_SOURCES = ("sysfs", "procfs", "nvml", "command")  # what a probe reads, never a paste


def cite(report, machine, given: tuple[str, ...] = ()):
    """``report`` with each finding's evidence pointing at the input line that gave the value (by the
    evidence's ``key``), and stand-in addresses replaced by the matrix's names. Evidence that names a
    machine source (sysfs, NVML, a command run here) and has no input behind it cites ``given`` (the
    inputs' names): a paste is never cited as sysfs."""
    from topodoc.rules.engine import Evidence

    def where_from(ev: Evidence) -> Evidence:
        if ev.source == "derived" and "->" in ev.key:
            cell = _printed_cell(ev, machine)
            if cell is not None:
                return cell
        if ev.source in MACHINE_SOURCES:
            hit = machine.provenance.get(ev.key) if ev.key else None
            if hit is not None:
                kind, where = hit
                return Evidence(title(kind), where, _relabel(ev.value, machine), _relabel(ev.key, machine))
            if not machine.has_base:
                inputs = ", ".join(given) or "the inputs"
                return Evidence("inputs", inputs, _relabel(ev.value, machine), _relabel(ev.key, machine))
        return Evidence(ev.source, _relabel(ev.where, machine), _relabel(ev.value, machine),
                        _relabel(ev.key, machine))

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


def _printed_cell(ev, machine):
    """A path class derived on the stand-in tree is the cell the pasted matrix printed: cite its row."""
    from topodoc.rules.engine import Evidence

    a, b = ev.key.split("->", 1)
    if a not in machine.labels or b not in machine.labels:
        return None
    row, col = machine.labels[a].split()[0], machine.labels[b].split()[0]
    hit = machine.provenance.get(f"smi:{row}") or machine.provenance.get(f"smi:{col}")
    if hit is None:
        return None
    kind, where = hit
    return Evidence(title(kind), f"{where} {row}/{col}", ev.value, f"{row}->{col}")


def _relabel(text: str, machine) -> str:
    if not machine.labels or not text:
        return text
    return _ADDR.sub(lambda m: machine.labels.get(m[0], m[0]), text)
