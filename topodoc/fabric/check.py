"""Check a fleet against a fabric plan: node count, rail NICs per node, their rates and port states, and
the rail map NCCL used (from its logs).

What a node has is read through ``topodoc fleet``'s public functions (``fleet.nodes.expand`` /
``load_all``: one fingerprint per distinct node, identity left out) and ``fleet.raillog.rail_map``.
A *rail NIC* is an RDMA NIC with ports that is nearest, by the derived path class, to at least one GPU
(the definition of ``topology.rails.rail_nics``, applied to the fingerprint's path cells): a storage NIC
that no GPU has closest is not counted against the plan's rails.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from topodoc.fabric.plan import FabricPlan


@dataclass(frozen=True)
class CheckFinding:
    severity: str  # info, warning, error, critical
    check: str  # "node-count", "rail-nics", "nic-rate", "port-state", "rail-map", "cross-rail", "gpus"
    message: str
    nodes: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()  # "node: property = value" or "file:line: text"


@dataclass(frozen=True)
class CheckResult:
    plan_nodes: int
    plan_nics: int
    plan_gbps: float
    observed_nodes: int
    log_hosts: int | None  # hosts in the NCCL logs; None without --logs
    findings: tuple[CheckFinding, ...]
    unknown: tuple[str, ...]  # what the inputs do not show, with the command that would
    errors: tuple[str, ...]  # inputs that could not be read


@dataclass(frozen=True)
class Port:
    nic: str
    state: str
    gbps: float | None


@dataclass(frozen=True)
class NodeView:
    """One distinct node as the fleet saw it, with every input name that has it."""

    names: tuple[str, ...]
    gpus: int | None
    rail_nics: tuple[str, ...]
    other_nics: tuple[str, ...]  # RDMA NICs no GPU has nearest (storage)
    ports: tuple[Port, ...]  # ports of the rail NICs


@dataclass(frozen=True)
class Observation:
    nodes: tuple[NodeView, ...]
    errors: tuple[str, ...]
    rails: object | None  # fleet.raillog.RailMap


SEVERITY = ("info", "warning", "error", "critical")


def observe(inputs: tuple[str, ...], logs: tuple[str, ...] = (), jobs: int | None = None) -> Observation:
    """Load the fleet's nodes (and the rail map from logs); ValueError when the logs cannot be read."""
    from topodoc.fleet.nodes import expand, load_all

    items, errors = expand(inputs)
    groups, load_errors = load_all(items, jobs) if items else ({}, [])
    views = tuple(_view(dict(fp), tuple(sorted(r.name for r in refs))) for fp, refs in groups.items())
    rails = None
    if logs:
        from topodoc.fleet.raillog import RailLogError, rail_map

        try:
            rails = rail_map(logs)
        except RailLogError as err:
            raise ValueError(str(err)) from err
    errs = tuple(f"{e.input}: {e.message}" for e in [*errors, *load_errors])
    return Observation(tuple(sorted(views, key=lambda v: v.names)), errs, rails)


_GPUS = re.compile(r"(\d+) x ")


def _view(props: dict, names: tuple[str, ...]) -> NodeView:
    from topodoc.topology.vocab import level_rank

    gpus_prop = props.get("gpus")
    gpus = sum(int(n) for n in _GPUS.findall(gpus_prop.value)) if gpus_prop else None
    ports: dict[str, list[Port]] = {}
    for key, prop in props.items():
        if prop.family == "nic.port":
            nic = key.split(":", 1)[0]
            rate = props.get(key.rsplit(".", 1)[0] + ".rate")
            ports.setdefault(nic, []).append(Port(nic, prop.value.split(" / ")[0], _gbps(rate)))
    fabric = set(ports)
    nearest: set[str] = set()
    cells: dict[str, list[tuple[int, str]]] = {}
    for key, prop in props.items():
        if prop.family == "path.nic":
            gpu, _, nic = key.removeprefix("path.").partition("-")
            if nic in fabric and prop.value not in ("unknown", ""):
                cells.setdefault(gpu, []).append((level_rank(prop.value), nic))
    for row in cells.values():
        best = min(rank for rank, _ in row)
        nearest |= {nic for rank, nic in row if rank == best}
    rail = sorted(nearest or fabric, key=_natural)
    return NodeView(
        names,
        gpus,
        tuple(rail),
        tuple(sorted(fabric - set(rail), key=_natural)),
        tuple(p for nic in rail for p in ports[nic]),
    )


def _gbps(prop) -> float | None:
    if prop is None:
        return None
    head = prop.value.split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return None


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def check(plan: FabricPlan, seen: Observation) -> CheckResult:
    count = sum(len(v.names) for v in seen.nodes)
    findings = [*_gpus(plan, seen), *_nics(plan, seen), *_ports(plan, seen)]
    unknown = []
    if seen.nodes or seen.rails is None:
        findings += _count(plan, count)
    else:
        unknown.append("the nodes' NICs, rates and port states: add --fleet with `topodoc record` archives")
    if seen.rails is not None:
        findings += _rail_map(plan, seen.rails)
    else:
        unknown.append(
            "which NIC each GPU uses across nodes (the rail map): add --logs with NCCL logs run "
            "with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH"
        )
    if seen.nodes and not any(v.ports for v in seen.nodes):
        unknown.append(
            "no RDMA NIC with ports on any node (TCP, gVNIC or a VM without them): rails and rates "
            "cannot be read; `topodoc probe` on a node shows its NICs"
        )
    findings.sort(key=lambda f: -SEVERITY.index(f.severity))
    hosts = len(seen.rails.hosts) if seen.rails is not None else None
    return CheckResult(
        plan.nodes,
        plan.nics_per_node,
        plan.switch.port_gbps,
        count,
        hosts,
        tuple(findings),
        tuple(unknown),
        seen.errors,
    )


def _count(plan: FabricPlan, count: int) -> list[CheckFinding]:
    built = (
        plan.nodes_per_unit * (plan.switches.leaf // max(1, plan.rails or 1))
        if plan.tiers > 1
        else plan.max_nodes
    )
    if count > plan.max_nodes:
        return [
            CheckFinding(
                "error",
                "node-count",
                f"{count} nodes observed: beyond the {plan.max_nodes} that "
                f"{plan.tiers} tier(s) of {plan.switch.name} hold at {plan.oversubscription} "
                "(the fabric needs another tier or a larger switch)",
            )
        ]
    if count > built and plan.tiers == 1:
        return [
            CheckFinding(
                "error",
                "node-count",
                f"{count} nodes observed: one {plan.switch.name} per rail holds {plan.max_nodes}",
            )
        ]
    if count > plan.nodes and plan.tiers == 1:
        return [
            CheckFinding(
                "info",
                "node-count",
                f"{count} nodes observed, the plan is for {plan.nodes}: the one-tier switches have the ports",
            )
        ]
    if count > built:
        return [
            CheckFinding(
                "error",
                "node-count",
                f"{count} nodes observed, the plan's {plan.switches.leaf} "
                f"leaves hold {built}: {count - built} node(s) have no leaf port",
            )
        ]
    if count > plan.nodes:
        return [
            CheckFinding(
                "warning",
                "node-count",
                f"{count} nodes observed, the plan is for {plan.nodes}: "
                "the leaves have the ports, but their uplinks were sized for the planned nodes, "
                "so the oversubscription rises",
            )
        ]
    if 0 < count < plan.nodes:
        return [
            CheckFinding("info", "node-count", f"{count} of the plan's {plan.nodes} nodes are in the inputs")
        ]
    return []


def _gpus(plan: FabricPlan, seen: Observation) -> list[CheckFinding]:
    odd = [v for v in seen.nodes if v.gpus is not None and v.gpus != plan.gpus_per_node]
    return [
        CheckFinding(
            "warning",
            "gpus",
            f"{', '.join(v.names)}: {v.gpus} GPUs, the plan has {plan.gpus_per_node} per node",
            v.names,
            (f"{v.names[0]}: GPUs = {v.gpus}",),
        )
        for v in odd
    ]


def _nics(plan: FabricPlan, seen: Observation) -> list[CheckFinding]:
    common = Counter(n for v in seen.nodes for n in v.rail_nics for _ in v.names)
    total = sum(len(v.names) for v in seen.nodes)
    usual = {n for n, c in common.items() if c * 2 > total}
    out = []
    for v in seen.nodes:
        have = len(v.rail_nics)
        if have < plan.nics_per_node:
            gone = sorted(usual - set(v.rail_nics), key=_natural)
            which = f" ({', '.join(gone)} absent, present on most nodes)" if gone else ""
            if not have:
                which = " (no RDMA NIC with ports: TCP, gVNIC or a VM without its RDMA devices)"
            out.append(
                CheckFinding(
                    "error",
                    "rail-nics",
                    f"{_names(v)}: {have} rail NIC(s), the plan has "
                    f"{plan.nics_per_node} rails{which}: those rails are missing on this node "
                    "(NCCL moves their traffic to the remaining NICs, or the job fails where "
                    "NICs are pinned)",
                    v.names,
                    (f"{v.names[0]}: rail NICs = {', '.join(v.rail_nics) or 'none'}",),
                )
            )
        elif have > plan.nics_per_node:
            out.append(
                CheckFinding(
                    "info",
                    "rail-nics",
                    f"{_names(v)}: {have} RDMA NICs nearest a GPU, the plan "
                    f"has {plan.nics_per_node} per node",
                    v.names,
                    (f"{v.names[0]}: rail NICs = {', '.join(v.rail_nics)}",),
                )
            )
    return out


def _ports(plan: FabricPlan, seen: Observation) -> list[CheckFinding]:
    out = []
    for v in seen.nodes:
        down = [p for p in v.ports if p.state.upper() != "ACTIVE"]
        slow = [p for p in v.ports if p.gbps is not None and p.gbps < plan.switch.port_gbps]
        if down:
            out.append(
                CheckFinding(
                    "error",
                    "port-state",
                    f"{_names(v)}: {', '.join(p.nic for p in down)} not "
                    "ACTIVE: that rail is dark on this node",
                    v.names,
                    tuple(f"{v.names[0]}: {p.nic} state = {p.state}" for p in down),
                )
            )
        if slow:
            out.append(
                CheckFinding(
                    "warning",
                    "nic-rate",
                    f"{_names(v)}: {', '.join(p.nic for p in slow)} below "
                    f"the plan's {plan.switch.port_gbps:g} Gb/s: every collective on that rail "
                    "runs at the slowest link",
                    v.names,
                    tuple(f"{v.names[0]}: {p.nic} rate = {p.gbps:g} Gb/s" for p in slow),
                )
            )
    return out


def _names(v: NodeView) -> str:
    return v.names[0] if len(v.names) == 1 else f"{len(v.names)} nodes ({v.names[0]}, ...)"


def _rail_map(plan: FabricPlan, rails) -> list[CheckFinding]:
    out = []
    used = {nic for nic in rails.majority.values()}
    if plan.rails and len(rails.majority) > len(used) and len(used) < plan.rails:
        out.append(
            CheckFinding(
                "warning",
                "rail-map",
                f"NCCL's logs show {len(rails.majority)} GPU indexes "
                f"sharing {len(used)} NIC(s) ({', '.join(sorted(used, key=_natural))}), the plan "
                f"has {plan.rails} rails: GPUs share a rail while other rails carry nothing",
                evidence=tuple(f"GPU{g} -> {n}" for g, n in rails.majority.items()),
            )
        )
    for host in rails.hosts:  # from the map's data, not its findings (whose rules fleet may rename)
        for gpu, nics in host.nics.items():
            want = rails.majority.get(gpu)
            if want is None or nics == want:
                continue
            ev = next(
                (
                    (f"{b.evidence.file}:{b.evidence.line}: {b.evidence.text}",)
                    for b in rails.breaks
                    if b.host == host.host and b.gpu == gpu and b.evidence is not None
                ),
                (),
            )
            out.append(
                CheckFinding(
                    "warning",
                    "rail-map",
                    f"{host.host}: GPU{gpu} uses {nics}, most hosts use "
                    f"{want}: this node breaks the rail (GPU{gpu}'s traffic enters another rail's "
                    "leaf)",
                    (host.host,),
                    ev or (f"{host.host}: GPU{gpu} -> {nics}",),
                )
            )
    if rails.cross_rail:
        isolated = plan.rails and not plan.rails_joined
        sev = "error" if isolated else "info"
        why = (
            "the plan keeps rail planes apart up to the top tier, so these peers cannot reach each other "
            "over the network"
            if isolated
            else "they cross the spines (or cores) instead of staying on one rail"
        )
        sample = rails.cross_evidence
        out.append(
            CheckFinding(
                sev,
                "cross-rail",
                f"{rails.cross_rail} NCCL connection(s) join NICs of different rails: {why}",
                evidence=tuple(f"{e.file}:{e.line}: {e.text}" for e in sample),
            )
        )
    if len(rails.hosts) > plan.nodes:
        out.append(
            CheckFinding(
                "warning",
                "node-count",
                f"the NCCL logs name {len(rails.hosts)} hosts, the plan is for {plan.nodes} nodes",
            )
        )
    return out
