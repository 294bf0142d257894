"""Text for people: a fabric plan and a fabric check."""

from __future__ import annotations

import textwrap

from topodoc.fabric.plan import FabricPlan
from topodoc.report.safe import human

TIER_NAMES = {1: "one tier", 2: "two tiers (leaf / spine)", 3: "three tiers (leaf / spine / core)"}


def _wrap(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, 100, initial_indent=indent + "- ", subsequent_indent=indent + "  ")


@human
def render_plan(p: FabricPlan) -> str:
    sw = p.switch
    head = "DGX SuperPOD rule" if p.reference == "superpod" else p.topology
    rails = (
        f"{p.rails} rails (NIC i of every node -> rail i)"
        if p.rails
        else f"no rails ({p.nics_per_node} NICs of a node on one leaf)"
    )
    lines = [
        f"{p.nodes} nodes x {p.gpus_per_node} GPUs = {p.gpus} GPUs, {p.nics_per_node} NICs per node, "
        f"{sw.name} ({sw.ports} ports x {sw.port_gbps:g} Gb/s) — {head}, {TIER_NAMES[p.tiers]}",
        f"  {rails}",
        f"  switches: {p.switches.leaf} leaf, {p.switches.spine} spine, {p.switches.core} core "
        f"({p.switches.leaf + p.switches.spine + p.switches.core} in all)",
    ]
    if p.tiers >= 2:
        lines.append(
            f"  leaf ports: {p.leaf_ports[0]} down / {p.leaf_ports[1]} up; "
            f"{p.spine_groups} spine group(s) of {p.spines_per_group}"
        )
    lines.append(
        f"  scalable units: {p.scalable_units:g} of {p.nodes_per_unit} nodes "
        + ("(one leaf per rail each)" if p.rails else "(one leaf each)")
    )
    lines.append("  cables and transceivers:")
    lines += [
        f"    {c.link:<10} {c.cables:>7} cables x {c.gbps:g} Gb/s, {c.transceivers} transceivers"
        for c in p.cables
    ]
    lines.append(
        f"    {'total':<10} {sum(c.cables for c in p.cables):>7} cables, {p.transceivers} transceivers"
    )
    lines.append(
        f"  oversubscription {p.oversubscription} at the leaf; bisection {p.bisection_gbps:g} Gb/s "
        f"({p.bisection_gbps / 8:g} GB/s) one way"
    )
    lines.append(
        f"  per GPU across nodes: {p.per_gpu_nic_gbps:g} Gb/s of NIC "
        f"({p.per_gpu_nic_gbps / 8:g} GB/s), {p.per_gpu_inter_node_gbps:g} Gb/s "
        f"({p.per_gpu_inter_node_gbps / 8:g} GB/s) when every GPU sends through the top tier at once"
    )
    lines.append(f"  the most {sw.name} reaches at this split:")
    lines += [
        f"    {lim.tiers} tier(s): {lim.max_nodes} nodes, {lim.max_gpus} GPUs"
        + ("  <- this plan" if lim.tiers == p.tiers else "")
        for lim in p.limits
    ]
    lines.append("  structure:")
    for line in p.structure:
        lines += _wrap(line, "    ")
    lines.append("  assumptions:")
    for note in p.notes:
        lines += _wrap(note, "    ")
    return "\n".join(lines) + "\n"


@human
def render_check(result) -> str:
    seen = f"observed: {result.observed_nodes} node(s)" if result.observed_nodes else "observed: no node read"
    if result.log_hosts is not None:
        seen += f", NCCL logs from {result.log_hosts} host(s)"
    lines = [f"plan: {result.plan_nodes} nodes, {result.plan_nics} NICs per node at {result.plan_gbps:g} "
             f"Gb/s; {seen}"]
    if not result.findings:
        lines.append("  no difference from the plan")
    for f in result.findings:
        lines += _wrap(f"[{f.severity}] {f.check}: {f.message}")
        lines += [f"      evidence: {e}" for e in f.evidence[:5]]
        if len(f.evidence) > 5:
            lines.append(f"      ... and {len(f.evidence) - 5} more")
    for line in result.unknown:
        lines += _wrap(f"unknown: {line}")
    return "\n".join(lines) + "\n"
