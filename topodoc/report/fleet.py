"""Render a fleet comparison: a human summary first, then tables; JSON and CSV for tools."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from topodoc.fleet.compare import Difference, FleetReport
from topodoc.report.safe import human

SHOW_NODES = 8


def _names(nodes: tuple[str, ...], limit: int = SHOW_NODES) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit]) + f" and {len(nodes) - limit:,} more"


@human
def render_text(report: FleetReport) -> str:
    out: list[str] = []
    out.append(_headline(report))
    matters = [d for d in report.differences if d.matters]
    benign = [d for d in report.differences if not d.matters]
    if matters:
        out.append("")
        out.append("Differences that matter to NCCL:")
        out.extend(_difference(d) for d in _fold(matters))
    if benign:
        out.append("")
        out.append("Differences that do not change what NCCL can do (check if unexpected):")
        out.extend(_difference(d) for d in _fold(benign))
    if report.racks is not None:
        out.append("")
        out.extend(_rack_lines(report.racks))
    if len(report.groups) > 1:
        out.append("")
        out.append("Groups of identical nodes:")
        for group in report.groups[:20]:
            out.append(f"  {group.count:>7,}  {_names(group.nodes)}")
        if len(report.groups) > 20:
            out.append(f"  ... and {len(report.groups) - 20:,} more groups (see --json)")
    if report.errors:
        out.append("")
        out.append(f"Inputs that could not be read ({len(report.errors):,}; the rest were compared):")
        for err in report.errors[:20]:
            out.append(f"  {err.input}: {err.message}")
        if len(report.errors) > 20:
            out.append(f"  ... and {len(report.errors) - 20:,} more (see --json)")
    return "\n".join(out) + "\n"


def _fold(diffs: list[Difference]) -> list[Difference]:
    """One line for differences of one kind that the same nodes show with the same values (an NVLink
    down changes seven GPU-pair cells): their labels are joined."""
    seen: dict[tuple, Difference] = {}
    for d in diffs:
        key = (d.family, d.severity, d.majority, tuple((o.value, o.nodes) for o in d.outliers))
        if key in seen:
            first = seen[key]
            seen[key] = replace(first, label=f"{first.label}, {d.label}")
        else:
            seen[key] = d
    return list(seen.values())


def _headline(report: FleetReport) -> str:
    line = _counts(report)
    outsiders = report.racks.outsiders if report.racks is not None else ()
    if outsiders:
        line += (
            f"; but {len(outsiders)} tray(s) not in the rack's NVLink domain: "
            f"{_names(tuple(o.node for o in outsiders))} (see below)"
        )
    return line


def _counts(report: FleetReport) -> str:
    n = report.nodes
    if n == 0:
        return "fleet: no node could be read"
    if n == 1:
        return "fleet: 1 node: nothing to compare it with (give two or more inputs)"
    alike = report.groups[0].count if report.groups else 0
    matter = sum(1 for d in report.differences if d.matters)
    benign = len(report.differences) - matter
    if len(report.groups) == 1:
        return f"fleet: {n:,} nodes, all alike in every property compared"
    split = sum(1 for d in report.differences if d.split)
    line = (
        f"fleet: {n:,} nodes; the largest group of identical nodes has {alike:,}; "
        f"{matter} propert{'y' if matter == 1 else 'ies'} that matter to NCCL differ, {benign} that do not"
    )
    if split:
        line += f"; no majority on {split} (the fleet is split: no node is called the odd one out there)"
    return line


def _difference(d: Difference) -> str:
    rule = f"  [{d.rule}]" if d.rule and d.matters else ""
    if d.split:
        values = "; ".join(f"{o.value} on {o.count:,} ({_names(o.nodes, 3)})" for o in d.outliers)
        return f"  {d.severity.upper():<8} {d.label}: no majority: {values}{rule}"
    parts = []
    for o in d.outliers:
        note = f" ({o.note})" if o.note else ""
        parts.append(f"{o.value} on {_names(o.nodes)}{note}")
    return (
        f"  {d.severity.upper():<8} {d.label}: {'; '.join(parts)} "
        f"(majority {d.majority} on {d.majority_count:,}){rule}"
    )


def to_json(report: FleetReport, rails=None) -> str:
    from topodoc.codec import to_data
    from topodoc.report.document import dumps

    data = to_data(report)
    for diff, item in zip(report.differences, data["differences"], strict=True):
        item["split"] = diff.split
    data["rails"] = to_data(rails) if rails is not None else None
    return dumps("topodoc.fleet", data)


@human
def render_rails(rails) -> str:
    """The rail map (local GPU -> NIC) per host, the majority, and the hosts that break it."""
    out = ["Rail map from the NCCL logs (local GPU -> NIC used for network traffic):"]
    gpus = sorted({g for h in rails.hosts for g in h.nics}, key=int)
    if not gpus:
        out.append(
            "  no network connection lines with a known rank and NIC in the logs: no rail map "
            "(NCCL_DEBUG=INFO on every rank prints them)"
        )
    else:
        out.append("  " + f"{'host':<24}" + "".join(f"GPU{g:<10}" for g in gpus) + "transport  GDR   NCCL")
        out.append("  " + f"{'(majority)':<24}" + "".join(f"{rails.majority.get(g, '-'):<13}" for g in gpus))
        for h in rails.hosts:
            name = h.host + (f" (x{h.machines} machines)" if h.machines > 1 else "")
            cells = "".join(f"{h.nics.get(g, '-'):<13}" for g in gpus)
            gdr = "-" if h.gdr is None else ("yes" if h.gdr else "no")
            out.append(
                f"  {name:<24}{cells}{h.transport or '-':<11}{gdr:<6}{','.join(h.nccl_versions) or '-'}"
            )
    for f in rails.findings:
        out.append(f"  {f.severity.upper():<8} {f.message}  [{f.rule}]")
        for ev in f.evidence:
            out.append(f"           {ev}")
    return "\n".join(out) + "\n"


def _rack_lines(racks) -> list[str]:
    """NVLink-domain trays: each tray's domain (cluster UUID / clique), GPUs, NVLinks, fabric state."""
    rack = racks.rack_domain or "none (no domain holds more than half of the trays: several racks?)"
    out = [f"NVLink domains (NVL72-style trays; the rack's domain: {rack}):"]
    out.append(f"  {'tray':<24}{'cluster UUID / clique':<48}{'GPUs':<22}{'NVLinks active':<22}fabric")
    for t in racks.trays:
        mark = "" if racks.rack_domain in (None, t.domain) else "  <- not in the rack's domain"
        out.append(f"  {t.node:<24}{t.domain:<48}{t.gpus:<22}{t.nvlinks:<22}{t.fabric}{mark}")
    out.append("  NVSwitch trays: not visible from compute-tray snapshots (only each GPU's links into them)")
    for o in racks.outsiders:
        out.append(f"  {o.severity.upper():<8} {o.message}")
    return out


def to_csv(report: FleetReport) -> str:
    """One row per (property, node off the majority): what a spreadsheet or a ticket wants."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["node", "property", "value", "majority", "severity", "matters", "rule", "note"])
    for d in report.differences:
        for o in d.outliers:
            for node in o.nodes:
                writer.writerow(
                    [
                        node,
                        d.label,
                        o.value,
                        d.majority or "(no majority)",
                        d.severity,
                        "yes" if d.matters else "no",
                        d.rule or "",
                        o.note,
                    ]
                )
    for out in report.racks.outsiders if report.racks is not None else ():
        writer.writerow(
            [
                out.node,
                "NVLink domain",
                out.domain,
                report.racks.rack_domain,
                out.severity,
                "yes",
                "",
                out.message,
            ]
        )
    for err in report.errors:
        writer.writerow([err.input, "(input)", "unreadable", "", "error", "yes", "", err.message])
    return buf.getvalue()
