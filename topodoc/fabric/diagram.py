"""A fabric plan as a :class:`topodoc.topology.types.Graph`, drawn by the same DOT / Mermaid / SVG
renderers as ``topodoc diagram``.

Scalable units (the nodes under one leaf per rail) are boxes; a leaf is drawn per unit and rail while
there are at most ``MAX_LEAVES`` of them, else per rail; spines are drawn per group and cores per core
group, each labelled with its count. Edges carry the cable counts of the plan.
"""

from __future__ import annotations

import math

from topodoc.fabric.plan import FabricPlan
from topodoc.topology.types import Edge, Graph, Node

MAX_UNITS = 16  # units drawn one by one; beyond, one box for all
MAX_LEAVES = 128


def title(p: FabricPlan) -> str:
    ref = " (DGX SuperPOD rule)" if p.reference == "superpod" else ""
    return (
        f"{p.nodes} nodes / {p.gpus} GPUs, {p.switch.name}, {p.tiers} tier(s), {p.oversubscription}{ref}: "
        f"{p.switches.leaf} leaf, {p.switches.spine} spine, {p.switches.core} core"
    )


def fabric_graph(p: FabricPlan) -> Graph:
    planes = p.rails or 1
    units = math.ceil(p.nodes / p.nodes_per_unit)
    one_by_one = units <= MAX_UNITS and units * planes <= MAX_LEAVES
    nodes: list[Node] = []
    edges: list[Edge] = []
    gbps = f"{p.switch.port_gbps:g}G"
    shown = range(units) if one_by_one else range(1)
    for s in shown:
        first, last = s * p.nodes_per_unit + 1, min(p.nodes, (s + 1) * p.nodes_per_unit)
        count = last - first + 1 if one_by_one else p.nodes
        label = f"unit {s + 1}\nnodes {first}-{last}" if one_by_one else f"{units} units\n{p.nodes} nodes"
        nodes.append(Node(id=f"unit{s}", kind="gpu", label=label + f"\n{count * p.gpus_per_node} GPUs"))
        for r in range(planes):
            leaf = f"leaf{s}.{r}"
            rail = f"rail {r}" if p.rails else "leaf"
            many = "" if one_by_one else f" x{math.ceil(p.nodes / p.nodes_per_unit)}"
            nodes.append(
                Node(
                    id=leaf,
                    kind="switch",
                    label=f"{rail} leaf{many}" + (f"\nunit {s + 1}" if one_by_one else ""),
                )
            )
            per_node = 1 if p.rails else p.nics_per_node
            edges.append(Edge(a=f"unit{s}", b=leaf, kind="pcie", label=f"{count * per_node} x {gbps}"))
            if p.tiers >= 2:
                up = p.leaf_ports[1] * (1 if one_by_one else units)
                edges.append(
                    Edge(a=leaf, b=f"sg{_group(p, s, r, one_by_one)}", kind="pcie", label=f"{up} x {gbps}")
                )
    _upper(p, nodes, edges, gbps)
    return Graph(tuple(nodes), tuple(_merge(edges)))


def _group(p: FabricPlan, unit: int, rail: int, one_by_one: bool) -> int:
    """The spine group a leaf uplinks to (see plan._build)."""
    planes = p.rails or 1
    if p.spine_groups == 1:
        return 0
    if p.tiers == 2:
        return rail
    pods = p.spine_groups // planes
    in_pod = math.ceil(math.ceil(p.nodes / p.nodes_per_unit) / pods)
    return rail * pods + (unit // in_pod if one_by_one else 0)


def _upper(p: FabricPlan, nodes: list[Node], edges: list[Edge], gbps: str) -> None:
    if p.tiers < 2:
        return
    planes = p.rails or 1
    joined = p.rails_joined
    core_groups = 1 if joined else planes
    pods = max(1, p.spine_groups // planes)
    for g in range(p.spine_groups):
        where = f"rail {g // pods} " if p.rails and (p.tiers == 3 or not joined) else ""
        pod = f"pod {g % pods + 1} " if p.tiers == 3 and pods > 1 else ""
        nodes.append(Node(id=f"sg{g}", kind="nic", label=f"{where}{pod}spines x{p.spines_per_group}".strip()))
        if p.tiers == 3:
            core = 0 if joined else g // pods
            edges.append(
                Edge(
                    a=f"sg{g}",
                    b=f"core{core}",
                    kind="pcie",
                    label=f"{p.spines_per_group * _spine_up(p)} x {gbps}",
                )
            )
    if p.tiers == 3:
        for c in range(core_groups):
            where = f"rail {c} " if core_groups > 1 else ""
            nodes.append(
                Node(id=f"core{c}", kind="nvswitch",
                     label=f"{where}cores x{p.switches.core // core_groups}".strip())
            )


def _spine_up(p: FabricPlan) -> int:
    core_cables = next((c.cables for c in p.cables if c.link == "spine-core"), 0)
    return core_cables // max(1, p.switches.spine)


def _merge(edges: list[Edge]) -> list[Edge]:
    """One edge per pair of boxes (a leaf drawn per rail is many leaves)."""
    seen: dict[tuple[str, str], Edge] = {}
    for e in edges:
        seen.setdefault((e.a, e.b), e)
    return list(seen.values())
