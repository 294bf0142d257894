"""Plan a rail-optimised Clos or fat-tree fabric from one switch model (shared/DOMAIN.md, "Across servers").

The seed text (shared/seed/ai-infra-hardware-zh.txt) builds the fabric up in steps, and this module
follows them:

- rails: NIC i of every node goes to switch i; 8 NICs -> 8 rails. One switch per rail is a one-tier
  Clos: a 40-port switch holds 40 nodes (320 GPUs).
- two tiers: each leaf splits its ports into ``d`` down and ``u`` up (40 = 32 + 8 is 4:1). A rail
  group (one leaf per rail and the nodes under them) exposes R x u uplinks as a node exposes R NICs, so
  it is one "node" of the spine tier, and rail i of every group meets at rail i's spines: k leaves per
  rail, k x d nodes (40 x 32 x 8 = 10,240 GPUs at 4:1).
- three tiers: spines grouped in pods meet at core switches; a k-port fat tree (every tier 1:1, the
  core built out) reaches k^3/4 hosts.

Counts for a partial build follow one rule, stated because the seed gives only its results: a lower
switch spreads its uplinks evenly over the upper switches of its group (the same number of cables to
each), and a group gets the fewest upper switches for which that fits their ports. With NVIDIA's
SuperPOD split (20 down / 20 up, 8 leaves per 20-node scalable unit) this rule gives every row of the
seed's SuperPOD table; what the rule adds there is ours, not the seed's (see ``superpod`` below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from topodoc.fabric.switches import Switch

TOPOLOGIES = ("clos", "fat-tree")
RATIOS = (1, 2, 4)


class PlanError(ValueError):
    """A request no plan answers (zero nodes, more than three tiers, conflicting options)."""


@dataclass(frozen=True)
class Request:
    nodes: int
    switch: Switch
    gpus_per_node: int = 8
    nics_per_node: int = 8
    oversubscription: int = 1  # r in r:1, at the leaf
    tiers: int | None = None  # None: the fewest that hold the nodes
    rails: bool = True
    reference: str | None = None  # "superpod"
    topology: str = "clos"


@dataclass(frozen=True)
class SwitchCounts:
    leaf: int
    spine: int
    core: int


@dataclass(frozen=True)
class CableTier:
    link: str  # "node-leaf", "leaf-spine", "spine-core"
    cables: int
    gbps: float  # per cable
    transceivers: int  # one per cable end (optics); switch ends share twin-port cages


@dataclass(frozen=True)
class TierLimit:
    tiers: int
    max_nodes: int
    max_gpus: int


@dataclass(frozen=True)
class FabricPlan:
    """A fabric for ``nodes`` nodes built from one switch model: counts, cables, bandwidth, limits."""

    topology: str
    reference: str | None
    switch: Switch
    tiers: int
    nodes: int
    gpus: int
    gpus_per_node: int
    nics_per_node: int
    rails: int  # rail planes: NICs per node when rail-optimised, 0 when every NIC of a node shares a leaf
    rails_joined: bool  # rail planes meet above the leaves (any NIC reaches any NIC over the network)
    switches: SwitchCounts
    scalable_units: float  # nodes / nodes_per_unit
    nodes_per_unit: int  # nodes under one rail group (one leaf per rail)
    leaf_ports: tuple[int, int]  # down, up of the fullest leaf as built
    spines_per_group: int
    spine_groups: int
    oversubscription: str  # as built at the leaf, "4:1"
    oversubscription_ratio: float
    oversubscription_asked: int  # r of the r:1 asked for at the leaf (the built ratio may be lower)
    max_nodes: int  # with this switch, tier count and split
    max_gpus: int
    limits: tuple[TierLimit, ...]  # the most each tier count holds with this switch and split
    bisection_gbps: float  # across the worst cut into two halves, one direction
    per_gpu_nic_gbps: float  # NIC bandwidth per GPU (inside one leaf)
    per_gpu_inter_node_gbps: float  # per GPU when every GPU sends through the top tier at once
    cables: tuple[CableTier, ...]
    transceivers: int
    structure: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Shape:
    """What the request fixes before the tier count is chosen."""

    k: int
    ratio: int
    planes: int  # separate leaf planes: R with rails, 1 without
    ports_per_node: int  # ports one node puts on one leaf: 1 with rails, R without
    joined: bool  # SuperPOD: the rails share spines (two tiers) or cores (three)
    fat: bool

    def up(self) -> int:
        return self.k // 2 if self.fat else self.k // (self.ratio + 1)

    def down(self, tiers: int) -> int:
        return self.k if tiers == 1 else self.k - self.up() if self.fat else self.ratio * self.up()

    def per_leaf(self, tiers: int) -> int:
        return self.down(tiers) // self.ports_per_node

    def capacity(self, tiers: int) -> int:
        """Most nodes: one switch per plane; k leaves per spine group; k pods of k/2 leaves."""
        groups_above = self.planes if self.joined else 1  # planes sharing one top tier
        if tiers == 1:
            return self.per_leaf(1) if not self.joined else 0
        if tiers == 2:
            return (self.k // groups_above) * self.per_leaf(2) if not self.fat else 0
        return (self.k // groups_above) * (self.k // 2) * self.per_leaf(3)


def request_of(p: FabricPlan) -> Request:
    """The request that yields ``p`` (its tier count fixed): a saved plan is trusted only when planning
    its own inputs again gives it back."""
    return Request(p.nodes, p.switch, p.gpus_per_node, p.nics_per_node, p.oversubscription_asked, p.tiers,
                   bool(p.rails), p.reference, p.topology)


def plan(req: Request) -> FabricPlan:
    req = _checked(req)
    shape = _shape(req)
    limits = tuple(TierLimit(t, shape.capacity(t), shape.capacity(t) * req.gpus_per_node) for t in (1, 2, 3))
    tiers = _tiers(req, shape, limits)
    build = _build(req, shape, tiers)
    return _assemble(req, shape, tiers, limits, build)


def _checked(req: Request) -> Request:
    if not (0 < req.nodes <= 10**7 and 0 < req.gpus_per_node <= 1024 and 0 < req.nics_per_node <= 1024):
        raise PlanError("nodes (1..10^7), GPUs per node and NICs per node (1..1024) out of range")
    if req.topology not in TOPOLOGIES:
        raise PlanError(f"--topology must be one of {', '.join(TOPOLOGIES)}")
    if req.oversubscription not in RATIOS:
        raise PlanError("--oversubscription must be 1:1, 2:1 or 4:1")
    if req.reference not in (None, "superpod"):
        raise PlanError(f"unknown reference {req.reference!r} (known: superpod)")
    if req.reference == "superpod" and (req.oversubscription != 1 or not req.rails or req.topology != "clos"):
        raise PlanError(
            "--reference superpod is a rail-optimised 1:1 Clos: "
            "drop --oversubscription, --no-rails and --topology"
        )
    if req.topology == "fat-tree":
        if req.oversubscription != 1:
            raise PlanError("a fat tree is 1:1 at every tier: drop --oversubscription or use --topology clos")
        if req.tiers not in (None, 3):
            raise PlanError("a k-ary fat tree has three tiers: drop --tiers or use --topology clos")
    if not 0 < req.switch.port_gbps <= 100_000 or req.switch.ports > 4096:
        raise PlanError(f"a switch of {req.switch.ports} ports at {req.switch.port_gbps:g} Gb/s is not one")
    if req.switch.ports < 4 or req.switch.ports % 2:
        raise PlanError(f"a switch of {req.switch.ports} ports cannot be split evenly between tiers")
    return req


def _shape(req: Request) -> _Shape:
    ports_per_node = 1 if req.rails else req.nics_per_node
    shape = _Shape(
        req.switch.ports,
        req.oversubscription,
        req.nics_per_node if req.rails else 1,
        ports_per_node,
        req.reference == "superpod",
        req.topology == "fat-tree",
    )
    if shape.per_leaf(2) < 1:
        raise PlanError(
            f"a leaf of {req.switch.ports} ports has {shape.down(2)} down ports: fewer than the "
            f"{ports_per_node} NICs a node puts on it without rails"
        )
    return shape


def _tiers(req: Request, shape: _Shape, limits: tuple[TierLimit, ...]) -> int:
    fits = [lim.tiers for lim in limits if lim.max_nodes >= req.nodes]
    wanted = 3 if shape.fat else req.tiers
    if wanted is not None:
        cap = limits[wanted - 1].max_nodes
        if not cap:
            what = "the SuperPOD rule (rails joined by spines)" if shape.joined else "this design"
            raise PlanError(f"{what} has no {wanted}-tier form: drop --tiers")
        if req.nodes > cap:
            raise PlanError(
                f"{req.nodes} nodes do not fit {wanted} tier(s) of {req.switch.name} "
                f"(at most {cap} nodes, {cap * req.gpus_per_node} GPUs)"
            )
        return wanted
    if not fits:
        cap = limits[-1].max_nodes
        raise PlanError(
            f"{req.nodes} nodes need more than three tiers of {req.switch.name} "
            f"(three hold at most {cap} nodes, {cap * req.gpus_per_node} GPUs)"
        )
    return fits[0]


@dataclass(frozen=True)
class _Build:
    leaves_per_plane: int
    down: int  # ports used on the fullest leaf
    up: int  # uplinks per leaf
    spines_per_group: int = 0
    spine_groups: int = 0
    spine_up: int = 0  # uplinks per spine to the cores
    cores: int = 0


def _spread(lower: int, links: int, ports: int) -> int:
    """The fewest upper switches taking ``links`` cables from each of ``lower`` switches, the same number
    to each (so their count divides ``links``), within ``ports`` ports each."""
    for upper in range(1, links + 1):
        if links % upper == 0 and lower * (links // upper) <= ports:
            return upper
    raise PlanError(f"{lower} switches of {links} uplinks each do not fit {ports}-port switches above")


def _build(req: Request, shape: _Shape, tiers: int) -> _Build:
    per_leaf = shape.per_leaf(tiers)
    leaves = math.ceil(req.nodes / per_leaf)
    down = min(req.nodes, per_leaf) * shape.ports_per_node
    if tiers == 1:
        return _Build(1, down, 0)
    up = shape.up() if shape.fat else math.ceil(down / shape.ratio)
    if tiers == 2:
        group = leaves * shape.planes if shape.joined else leaves
        spines = _spread(group, up, shape.k)
        return _Build(leaves, down, up, spines, 1 if shape.joined else shape.planes)
    half = shape.k // 2
    pods = math.ceil(leaves / half)  # per plane
    in_pod = math.ceil(leaves / pods)
    if shape.fat:  # the k-ary fat tree: k/2 aggregation switches per pod, (k/2)^2 cores per plane
        return _Build(leaves, down, up, half, pods * shape.planes, half, half * half * shape.planes)
    spines = _spread(in_pod, up, half)
    spine_up = math.ceil(in_pod * up / spines)  # 1:1 at the spine
    total_up = spine_up * spines * pods * shape.planes
    per_core_group = shape.planes if not shape.joined else 1  # separate planes: separate cores
    cores = math.ceil(total_up / per_core_group / shape.k) * per_core_group
    return _Build(leaves, down, up, spines, pods * shape.planes, spine_up, cores)


def _assemble(
    req: Request, shape: _Shape, tiers: int, limits: tuple[TierLimit, ...], b: _Build
) -> FabricPlan:
    sw = req.switch
    leaves = b.leaves_per_plane * shape.planes
    spines = b.spines_per_group * b.spine_groups
    counts = SwitchCounts(leaves, spines, b.cores)
    gbps = sw.port_gbps
    cables = [CableTier("node-leaf", req.nodes * req.nics_per_node, gbps, 0)]
    if tiers >= 2:
        cables.append(CableTier("leaf-spine", leaves * b.up, gbps, 0))
    if tiers == 3:
        cables.append(CableTier("spine-core", spines * b.spine_up, gbps, 0))
    cables = [replace(c, transceivers=_transceivers(c, sw)) for c in cables]
    ratio = b.down / b.up if b.up else 1.0
    nic_per_gpu = req.nics_per_node * gbps / req.gpus_per_node
    inject = req.nodes * req.nics_per_node * gbps
    crosses = b.up and (b.leaves_per_plane > 1 or shape.joined)
    bisection = min(inject, leaves * b.up * gbps) / 2 if crosses else inject / 2
    per_unit = shape.per_leaf(tiers)
    return FabricPlan(
        topology=req.topology,
        reference=req.reference,
        switch=sw,
        tiers=tiers,
        nodes=req.nodes,
        gpus=req.nodes * req.gpus_per_node,
        gpus_per_node=req.gpus_per_node,
        nics_per_node=req.nics_per_node,
        rails=req.nics_per_node if req.rails else 0,
        rails_joined=shape.joined or not req.rails,
        switches=counts,
        scalable_units=round(req.nodes / per_unit, 3),
        nodes_per_unit=per_unit,
        leaf_ports=(b.down, b.up),
        spines_per_group=b.spines_per_group,
        spine_groups=b.spine_groups,
        oversubscription=_ratio_text(ratio),
        oversubscription_ratio=round(ratio, 3),
        oversubscription_asked=req.oversubscription,
        max_nodes=limits[tiers - 1].max_nodes,
        max_gpus=limits[tiers - 1].max_gpus,
        limits=tuple(lim for lim in limits if lim.max_nodes),
        bisection_gbps=bisection,
        per_gpu_nic_gbps=nic_per_gpu,
        per_gpu_inter_node_gbps=round(nic_per_gpu / ratio, 3) if crosses else nic_per_gpu,
        cables=tuple(cables),
        transceivers=sum(c.transceivers for c in cables),
        structure=_structure(req, shape, tiers, b),
        notes=_notes(req, shape, tiers),
    )


def _transceivers(cable: CableTier, sw: Switch) -> int:
    switch_ends = (1 if cable.link == "node-leaf" else 2) * cable.cables
    node_ends = cable.cables if cable.link == "node-leaf" else 0
    return node_ends + math.ceil(switch_ends / sw.ports_per_cage)


def _ratio_text(ratio: float) -> str:
    return f"{ratio:g}:1" if abs(ratio - round(ratio, 2)) < 1e-9 else f"{ratio:.2f}:1"


def _structure(req: Request, shape: _Shape, tiers: int, b: _Build) -> tuple[str, ...]:
    r = req.nics_per_node
    out = []
    if req.rails:
        out.append(
            f"{r} rails: NIC i of every node cables to the leaf of rail i; a node's NICs meet only "
            "inside the node (NVLink / PCIe)"
        )
    else:
        out.append(
            f"no rails: all {r} NICs of a node cable to one leaf ({shape.per_leaf(tiers)} nodes per leaf)"
        )
    if tiers == 1:
        out.append(
            f"one tier: one {req.switch.name} per rail holds every node; no uplinks"
            if req.rails
            else f"one tier: one {req.switch.name} holds every node"
        )
        return tuple(out)
    out.append(
        f"a rail group ({f'{r} leaves, one per rail,' if req.rails else 'one leaf'} and the "
        f"{shape.per_leaf(tiers)} nodes "
        f"under them) exposes {(r if req.rails else 1) * b.up} uplinks as a node exposes {r} NICs: "
        "the group is one node of the spine tier"
    )
    if tiers == 2 and shape.joined:
        out.append(
            f"every leaf of every rail spreads its {b.up} uplinks over the same {b.spines_per_group} "
            "spines: any NIC reaches any NIC through one spine"
        )
    elif tiers == 2:
        out.append(
            f"rail i of every group meets at rail i's {b.spines_per_group} spines; rails stay separate "
            "planes (traffic between GPUs of different index moves over NVLink first: NCCL's PXN)"
        )
    else:
        pods = b.spine_groups // max(1, (req.nics_per_node if req.rails else 1))
        out.append(
            f"a pod ({b.spines_per_group} spines of one rail and the leaves under them, {pods} pod(s) "
            f"per rail) is one node of the core tier: each spine sends {b.spine_up} uplinks to the "
            + ("cores that join every rail" if shape.joined else "cores of its own rail plane")
        )
    return tuple(out)


SUPERPOD_NOTE = (
    "--reference superpod models NVIDIA's DGX SuperPOD rule as the seed text gives it "
    "(shared/seed/ai-infra-hardware-zh.txt: a scalable unit is 20 DGX nodes with 8 leaf switches, leaves "
    "split 20 down / 20 up, a core tier once the spines run out): a unit is the nodes one leaf per rail "
    "holds at 1:1 (k/2), two tiers while one spine layer shared by every rail holds all leaves (at most k "
    "leaves), else spines grouped per rail and cores joining the rails. The spine and core counts come "
    "from the even-spread rule, which reproduces every row of the seed's table; the seed does not state "
    "that rule, and NVIDIA's reference architecture itself was not read here: where a real design differs "
    "(spares, growth room), it wins."
)


def _notes(req: Request, shape: _Shape, tiers: int) -> tuple[str, ...]:
    notes = [
        "counts: a switch spreads its uplinks evenly over the switches of its group above (the same number "
        "of cables to each) and a group gets the fewest switches that fit; leaves carry uplinks for the "
        "ports they use (a half-full leaf gets half the uplinks)",
        "transceivers: every cable optical, one transceiver per end, switch ends sharing a twin-port cage "
        f"where the switch has them ({req.switch.name}: {req.switch.ports_per_cage} port(s) per cage); "
        "copper (DAC) inside a rack needs none",
        f"bandwidth: {req.switch.port_gbps:g} Gb/s per NIC and per switch port (the NIC runs at the switch "
        "port's speed); Gb/s = 1e9 bit/s, one direction",
    ]
    if req.reference == "superpod":
        notes.insert(0, SUPERPOD_NOTE)
    if shape.fat:
        notes.insert(
            0,
            "fat tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2 aggregation "
            "switches, (k/2)^2 core switches, every tier 1:1; the core is built out in full so "
            "any pair of hosts has full bandwidth, at most k^3/4 hosts per plane"
            + ("; with rails every rail is its own fat tree (leaves, aggregation and cores per rail)"
               if req.rails else ""),
        )
    if req.rails and not shape.joined and tiers >= 2:
        notes.append(
            "rail planes stay apart up to the top tier, as the seed text recurses them (rail 0 is "
            "leaf 0 of every group and its spines): GPU i of one node reaches GPU j != i of another "
            "only through NVLink inside a node first"
        )
    return tuple(notes)
