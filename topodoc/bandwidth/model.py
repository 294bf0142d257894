"""What this machine should deliver: per-pair bottlenecks and expected nccl-tests busbw.

Reads a derived :class:`~topodoc.topology.types.Topology` (plus the snapshot for the CPU vendor and
the GPUs' compute capability) and prices every link with :mod:`topodoc.bandwidth.links`. Figures are
GB/s per direction by NCCL's own model (what a healthy busbw approaches); line rates ride along.

PCIe links read at Gen1 (an idle GPU's link, until used) are priced at the fastest speed they can
train to, saying so; other links as trained. Assumptions, stated in every expectation: one ring over the
best GPU order (NCCL searches for it);
busbw approaches the ring's slowest link (nccl-tests doc/PERFORMANCE.md); across nodes every GPU has
its own NIC rail with GPUDirect RDMA and the fabric is not oversubscribed (ANCHORS.md c3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import permutations

from topodoc import model
from topodoc.bandwidth import links as rates
from topodoc.topology.rails import rail_nics
from topodoc.topology.types import C2C, NVLINK, PCIE, SMP, Connection, Link, Topology
from topodoc.topology.vocab import RDMA_KINDS

IDLE_GEN = 1  # an idle GPU's PCIe link drops to Gen1 (2.5 GT/s) and retrains under load
NVLS_H100_8GPU_GBPS = 480.0  # NVLink SHARP all_reduce busbw on 8x H100 (sjeaugey, NVIDIA/nccl-tests#212)


@dataclass(frozen=True)
class PairBandwidth:
    a: str
    b: str
    smi: str  # nvidia-smi class ("NV12", "PIX", "SYS")
    nccl: str  # NCCL path type
    limiter: str | None  # the bottleneck link, for people ("AMD Infinity Fabric", "PCIe Gen4 x16")
    line_gbps: float | None
    nccl_gbps: float | None
    reason: str


@dataclass(frozen=True)
class Expectation:
    scope: str  # "intra-node" or "inter-node"
    algorithm: str  # "ring", "nvls", "hierarchical"
    collective: str  # "all_reduce" (the ring bound also holds for all_gather/reduce_scatter busbw)
    nodes: int
    ranks: int
    busbw_gbps: float | None
    limiter: str
    reason: str
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class BandwidthModel:
    source: str
    shape: str
    gpus: int
    pairs: tuple[PairBandwidth, ...] = ()
    gpu_nic: tuple[PairBandwidth, ...] = ()
    node_nic_gbps: float | None = None  # sum of the RDMA NIC ports (or Ethernet when none), GB/s
    node_nic_label: str | None = None
    node_nic_rdma: bool = True  # B_node comes from RDMA NICs (else gVNIC/Ethernet through sockets or TCPX)
    expectations: tuple[Expectation, ...] = ()
    notes: tuple[str, ...] = ()


def build(topology: Topology, snapshot: model.Snapshot) -> BandwidthModel:
    """Price every GPU pair and GPU x NIC pair, then derive the busbw expectations."""
    sm = _min_sm(snapshot)
    pairs = tuple(pair_bandwidth(c, snapshot, sm) for c in topology.gpu_pairs)
    gpu_nic = tuple(pair_bandwidth(c, snapshot, sm) for c in topology.gpu_nic)
    node_bw, node_label = node_nic_bandwidth(topology)
    rdma = any(n.kind in RDMA_KINDS and n.rate_gbps for n in topology.nics)
    intra = intra_node_expectations(topology, pairs, sm)
    inter = inter_node_expectations(len(topology.gpus), node_bw, node_label, intra, nodes=2, rdma=rdma)
    return BandwidthModel(
        source=topology.source, shape=topology.shape.name, gpus=len(topology.gpus), pairs=pairs,
        gpu_nic=gpu_nic, node_nic_gbps=node_bw, node_nic_label=node_label, node_nic_rdma=rdma,
        expectations=intra + inter, notes=topology.notes,
    )


def _min_sm(snapshot: model.Snapshot) -> int | None:
    sms = [rates.sm_number(g.compute_capability) for g in snapshot.gpus]
    known = [s for s in sms if s is not None]
    return min(known) if known else None  # NCCL takes the lowest SM for NVLink bandwidth


def link_rate(link: Link, snapshot: model.Snapshot, sm: int | None, switched: bool = False) -> rates.LinkRate:
    if link.kind == PCIE:
        return pcie_rate(link)
    if link.kind == NVLINK:
        count = link.nvlinks or 1
        return rates.nvswitch(sm, count) if switched else rates.nvlink(sm, count)
    if link.kind == SMP:
        return rates.cpu_interconnect(snapshot.host.cpu_vendor, snapshot.host.cpu_model)
    if link.kind == C2C:
        return rates.c2c(link.c2c_links, link.bandwidth_gbps)
    return rates.LinkRate(link.kind, link.kind, link.bandwidth_gbps, link.bandwidth_gbps)


def pcie_rate(link: Link) -> rates.LinkRate:
    """A PCIe link priced at the speed a job gets: a link read at Gen1 (the floor an idle GPU drops to,
    retraining under load) at the fastest speed both ends support, saying so; a link trained anywhere
    else below its maximum is a real cap (the rules report it) and is priced as trained. Width does
    not recover, so it is always the trained one."""
    idle = link.gen == IDLE_GEN and (link.max_gen or 0) > IDLE_GEN
    rate = rates.pcie(link.max_gen if idle else link.gen, link.width)
    if idle:
        rate = dataclasses.replace(rate, label=f"{rate.label} (max speed; read at Gen1, an idle link)")
    return rate


def pair_bandwidth(conn: Connection, snapshot: model.Snapshot, sm: int | None) -> PairBandwidth:
    priced = [link_rate(link, snapshot, sm, conn.through_nvswitch) for link in conn.route.links]
    priced = [r for r in priced if r.nccl_gbps is not None]
    arrow = f"{conn.a}↔{conn.b}"
    if not priced:
        return PairBandwidth(conn.a, conn.b, conn.smi, conn.nccl, None, None, None,
                             f"{arrow}: {conn.smi}, no link on the path could be read")
    worst = min(priced, key=lambda r: r.nccl_gbps)
    line = f", line rate {worst.line_gbps:g} GB/s" if worst.line_gbps else ""
    reason = (f"{arrow}: {conn.smi}{_relay(conn)} through {worst.label},"
              f" {worst.nccl_gbps:g} GB/s effective{line}")
    return PairBandwidth(conn.a, conn.b, conn.smi, conn.nccl, worst.label, worst.line_gbps,
                         worst.nccl_gbps, reason)


def _relay(conn: Connection) -> str:
    """NCCL's relayed paths say so: the figure is for the route through the relay GPU, not the PCIe
    class nvidia-smi prints (``SYS``), which would otherwise read as a contradiction."""
    if conn.nccl == "P2C":
        return " (NCCL: P2C, over NVLink-C2C to the CPU)"
    return f" (NCCL: {conn.nccl} via {conn.via})" if conn.via and conn.nccl in ("PXN", "NVB") else ""


def best_ring(names: list[str], weights: dict[frozenset, float]) -> tuple[list[str], float]:
    """The GPU order whose slowest hop is fastest (exhaustive up to 9 GPUs, greedy beyond)."""
    if len(names) <= 9:
        first, rest = names[0], names[1:]
        orders = ([first, *p] for p in permutations(rest) if not rest or p[0] <= p[-1])
        return max(((o, _ring_min(o, weights)) for o in orders), key=lambda t: t[1])
    order = [names[0]]
    while len(order) < len(names):
        left = [n for n in names if n not in order]
        order.append(max(left, key=lambda n: weights.get(frozenset((order[-1], n)), 0.0)))
    return order, _ring_min(order, weights)


def _ring_min(order: list[str], weights: dict[frozenset, float]) -> float:
    hops = zip(order, order[1:] + order[:1], strict=True)
    return min(weights.get(frozenset(h), 0.0) for h in hops)


def intra_node_expectations(
    topology: Topology, pairs: tuple[PairBandwidth, ...], sm: int | None
) -> tuple[Expectation, ...]:
    names = [g.name for g in topology.gpus]
    if len(names) < 2:
        return ()
    weights = {frozenset((p.a, p.b)): p.nccl_gbps or 0.0 for p in pairs}
    order, ring_bw = best_ring(names, weights)
    slow = min((p for p in pairs if weights[frozenset((p.a, p.b))] == ring_bw and _on_ring(p, order)),
               key=lambda p: p.nccl_gbps or 0.0, default=None)
    limiter = slow.reason if slow else "unknown"
    ring = Expectation(
        "intra-node", "ring", "all_reduce", 1, len(names), ring_bw or None, limiter,
        f"ring {' → '.join(order)}: busbw approaches its slowest hop, {ring_bw:g} GB/s",
        ("NCCL's effective link figures (REFERENCE.md §3.3)", "busbw = bottleneck link (NT PERFORMANCE.md)"),
    )
    return (ring, *_nvls(topology, sm, ring))


def _on_ring(pair: PairBandwidth, order: list[str]) -> bool:
    i, j = order.index(pair.a), order.index(pair.b)
    return abs(i - j) in (1, len(order) - 1)


def _nvls(topology: Topology, sm: int | None, ring: Expectation) -> tuple[Expectation, ...]:
    if topology.shape.nvlink not in ("nvswitch", "fabric-clique") or sm is None or sm < 90:
        return ()
    if not all(pair.through_nvswitch for pair in topology.gpu_pairs):
        return ()  # NVLS needs every GPU of the communicator on the NVSwitch fabric
    known = NVLS_H100_8GPU_GBPS if sm < 100 and ring.ranks == 8 else None
    reason = ("NVLink SHARP (NVLS, NCCL >= 2.17) reduces inside the NVSwitch, so all_reduce busbw can "
              "exceed the ring bound; nccl-tests#212 reports ~480 GB/s on 8x H100")
    return (Expectation("intra-node", "nvls", "all_reduce", 1, ring.ranks, known, "NVSwitch (NVLS)", reason,
                        ("only for all_reduce with NVLS enabled (NCCL_NVLS_ENABLE unset or 1)",)),)


def node_nic_bandwidth(topology: Topology) -> tuple[float | None, str | None]:
    """B_node: the rails' bandwidth. NCCL spreads channels evenly over the NICs it uses, so the slowest
    rail sets the pace: B_node = rails x the slowest rail's rate. Rails are the RDMA NICs nearest to some
    GPU (a storage NIC on no GPU's path is not one); a NIC with a port down carries nothing. Without RDMA
    NICs, the gVNIC/Ethernet NICs stand in (TCPX, sockets)."""
    rdma = [n for n in topology.nics if n.kind in RDMA_KINDS and n.rate_gbps]
    pool = rdma or [n for n in topology.nics if n.kind in ("gvnic", "ethernet") and n.rate_gbps]
    rails = rail_nics(topology, pool)
    up = [n for n in rails if not n.ports_down]
    if not up:
        return None, None
    slowest = min(n.rate_gbps for n in up)
    total = len(up) * slowest / 8
    speeds = sorted({n.rate_gbps for n in up})
    label = f"{len(up)}x {up[0].kind} at {slowest:g} Gb/s = {total:g} GB/s"
    if len(speeds) > 1:
        rates_seen = "/".join(f"{s:g}" for s in speeds)
        label = f"{len(up)}x {up[0].kind} at {rates_seen} Gb/s, paced by the slowest: {label}"
    left_out = [n.device for n in pool if n not in up]
    if left_out:
        label += f" (not counted: {', '.join(left_out)})"
    return total, label


def inter_node_expectations(
    gpus: int, node_bw: float | None, label: str | None, intra: tuple[Expectation, ...], nodes: int,
    rdma: bool = True,
) -> tuple[Expectation, ...]:
    """Ring ≈ B_node; hierarchical (tree/NVLS-tree) on k nodes ≈ B_node·(N−1)/N·k/(k−1) (ANCHORS.md c3).

    Neither can beat the node's own fabric: the ring also runs through every GPU of a node, so it is
    capped by the intra-node ring; the hierarchical algorithm reduces inside each node first, so it is
    capped by the best intra-node figure (ring or NVLS). A capped figure names that limiter."""
    if not node_bw or gpus < 1 or nodes < 2:
        return ()
    ranks = gpus * nodes
    transport = ("one NIC rail per GPU with GPUDirect RDMA" if rdma else
                 "no RDMA NIC: NCCL's socket transport (or a plugin such as TCPX) through host memory;"
                 " measured busbw is usually well below this line-rate bound")
    assumptions = (transport, "non-blocking fabric, no oversubscription",
                   "busbw per nccl-tests' 2(N-1)/N factor over all N ranks")
    node = (node_bw, label or "", f"the NICs' {node_bw:g} GB/s")
    intra_ring = [e for e in intra if e.algorithm == "ring" and e.busbw_gbps]
    ring_bw, ring_limiter, ring_cap = _capped(node, intra_ring)
    ring = Expectation("inter-node", "ring", "all_reduce", nodes, ranks, round(ring_bw, 2), ring_limiter,
                       f"a ring crosses each node's NICs once per step: busbw ≈ B_node = {node_bw:g} GB/s"
                       + ring_cap, assumptions)
    hier = round(node_bw * (ranks - 1) / ranks * nodes / (nodes - 1), 2)
    tree_node = (hier, label or "", f"the NICs' {hier:g} GB/s")
    tree_bw, tree_limiter, tree_cap = _capped(tree_node, [e for e in intra if e.busbw_gbps])
    tree = Expectation("inter-node", "hierarchical", "all_reduce", nodes, ranks, round(tree_bw, 2),
                       tree_limiter, f"tree/NVLS-tree sends 2(k-1)/k per node: busbw ≈ B_node·(N−1)/N·k/(k−1)"
                       f" = {hier:g} GB/s for k={nodes}, N={ranks}" + tree_cap, assumptions)
    return (ring, tree)


def _capped(bound: tuple[float, str, str], intra: list[Expectation]) -> tuple[float, str, str]:
    """``bound`` (figure, limiter, wording) unless the best of ``intra`` is lower: then that figure,
    its limiter, and a clause saying the node's own fabric caps it."""
    figure, limiter, wording = bound
    best = max(intra, key=lambda e: e.busbw_gbps or 0.0, default=None)
    if best is None or not best.busbw_gbps or best.busbw_gbps >= figure:
        return figure, limiter, ""
    return (best.busbw_gbps, best.limiter,
            f"; capped at the intra-node {best.algorithm} bound {best.busbw_gbps:g} GB/s, below {wording}")
