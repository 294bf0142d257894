"""Tensor-parallel traffic: how many bytes one GPU moves per micro batch and what share of the step
that costs (shared/DOMAIN.md, "Worked example to reproduce").

Megatron-style TP does 4 all-reduces of the activations per layer per step (2 forward, 2 backward).
A ring all-reduce of S bytes over n GPUs moves 2(n-1)/n x S bytes in and out of every GPU, with
S = seq x hidden x micro_batch x dtype bytes. Units: bytes and bytes/s inside; GB = 1e9, GiB = 2**30.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
GB, GIB = 1e9, 2**30


class EstimateError(ValueError):
    """Inputs that do not describe a TP job (zero layers, unknown dtype, low > high, ...)."""


@dataclass(frozen=True)
class TpJob:
    layers: int
    hidden: int
    seq: int
    micro_batch: int
    dtype: str
    tp: int
    allreduces_per_layer: int = 4


@dataclass(frozen=True)
class TpEstimate:
    job: TpJob
    message_bytes: int  # S: one activation tensor, seq x hidden x micro_batch x dtype bytes
    bytes_per_allreduce: int  # per GPU: 2(n-1)/n x S
    bytes_per_gpu: int  # per micro batch: bytes_per_allreduce x allreduces_per_layer x layers
    compute_time_s: tuple[float, float]
    required_bytes_per_s: tuple[float, float]  # to hide communication entirely in the compute time
    bandwidth_bytes_per_s: tuple[float, float]  # the bandwidth assumed (given or derived)
    comm_time_s: tuple[float, float]
    comm_fraction: tuple[float, float]  # comm / (comm + compute) with no overlap, 0..1
    bandwidth_source: str = "given"


def message_bytes(job: TpJob) -> int:
    """S: one activation tensor, seq x hidden x micro_batch x dtype bytes (what a TP all-reduce moves)."""
    return job.seq * job.hidden * job.micro_batch * DTYPE_BYTES[job.dtype]


def ring_allreduce_bytes(message_bytes: int, ranks: int) -> int:
    """Bytes each GPU sends (and receives) in a ring all-reduce of ``message_bytes``."""
    return message_bytes * 2 * (ranks - 1) // ranks


def estimate_tp(
    job: TpJob,
    compute_time_s: tuple[float, float],
    bandwidth_bytes_per_s: tuple[float, float],
    bandwidth_source: str = "given",
) -> TpEstimate:
    """Bytes per GPU per micro batch, the bandwidth that hides them, and the no-overlap comm share."""
    _check(job, compute_time_s, bandwidth_bytes_per_s)
    message = message_bytes(job)
    per_allreduce = ring_allreduce_bytes(message, job.tp)
    total = per_allreduce * job.allreduces_per_layer * job.layers
    fast_compute, slow_compute = compute_time_s
    low_bw, high_bw = bandwidth_bytes_per_s
    comm = (total / high_bw, total / low_bw)
    return TpEstimate(
        job=job, message_bytes=message, bytes_per_allreduce=per_allreduce, bytes_per_gpu=total,
        compute_time_s=compute_time_s,
        required_bytes_per_s=(total / slow_compute, total / fast_compute),
        bandwidth_bytes_per_s=bandwidth_bytes_per_s, comm_time_s=comm,
        comm_fraction=(comm[0] / (comm[0] + slow_compute), comm[1] / (comm[1] + fast_compute)),
        bandwidth_source=bandwidth_source,
    )


def _check(job: TpJob, compute: tuple[float, float], bandwidth: tuple[float, float]) -> None:
    if job.dtype not in DTYPE_BYTES:
        raise EstimateError(f"unknown dtype {job.dtype!r} (known: {', '.join(DTYPE_BYTES)})")
    sizes = (job.layers, job.hidden, job.seq, job.micro_batch, job.allreduces_per_layer)
    if min(sizes) <= 0 or job.tp < 2:
        raise EstimateError("layers, hidden, seq and micro batch must be positive and --tp at least 2")
    for name, (low, high) in (("compute time", compute), ("bandwidth", bandwidth)):
        if low <= 0 or high < low:
            raise EstimateError(f"{name} range must be positive and low <= high, got {low:g}:{high:g}")


def parse_range(text: str) -> tuple[float, float]:
    """"0.25:0.5" -> (0.25, 0.5); "29" -> (29.0, 29.0)."""
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError as err:
        raise EstimateError(f"not a number or LOW:HIGH range: {text!r}") from err
    if len(values) not in (1, 2):
        raise EstimateError(f"expected a number or LOW:HIGH, got {text!r}")
    return (values[0], values[-1])


# -- across nodes --------------------------------------------------------------------------------------
# The same job spread over nodes: which of its collectives leave the node, how many bytes each GPU moves
# through its NIC per step, and how long that takes at the fabric's per-GPU bandwidth (a range: through
# the top tier at the plan's oversubscription .. the NIC's own rate). Rank order is Megatron-LM's default
# (tensor parallel fastest, then data parallel with expert parallel inside it, pipeline outermost).


@dataclass(frozen=True)
class ClusterJob:
    model: TpJob  # layers, hidden, seq, micro batch, dtype, tp (tp may be 1 here)
    pp: int = 1
    dp: int = 1
    ep: int = 1  # expert parallel, inside dp (ep divides dp)
    params: float = 0.0  # model parameters; 0: 12 x layers x hidden^2
    grad_dtype: str = "bf16"
    sharded: bool = False  # ZeRO-3 / FSDP: all-gather params forward and backward, reduce-scatter grads
    micro_batches: int = 1  # per step, per pipeline
    moe_topk: int = 2  # experts each token goes to, when ep > 1


@dataclass(frozen=True)
class Network:
    """What the fabric gives each GPU across nodes, GB/s one direction: (worst, best)."""

    nodes: int
    gpus_per_node: int
    gpu_bytes_per_s: tuple[float, float]
    source: str  # "plan FILE", "fleet (N nodes)", "given"
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CollectiveCost:
    name: str  # "tp all-reduce", "dp all-reduce", "dp all-gather", "dp reduce-scatter", "ep all-to-all", ...
    kind: str  # all-reduce, all-gather, reduce-scatter, all-to-all, send-recv
    group: int  # ranks in one group
    ranks_per_node: int  # of one group on one node
    crosses_nodes: bool
    bytes_per_gpu: int  # per step, through this GPU's share of the node's NICs (0 when it stays inside)
    bandwidth_bytes_per_s: tuple[float, float]  # per GPU for this group (worst, best); 0 inside a node
    time_s: tuple[float, float]  # (best, worst)


@dataclass(frozen=True)
class ClusterEstimate:
    job: ClusterJob
    network: Network
    gpus: int
    nodes_used: int
    params: float
    collectives: tuple[CollectiveCost, ...]
    compute_time_s: tuple[float, float]  # per step: micro batches x compute per micro batch
    comm_time_s: tuple[float, float]  # across nodes, per step, no overlap (best, worst)
    comm_fraction: tuple[float, float]  # comm / (comm + compute)
    verdict: str  # "network-bound", "compute-bound", "depends"
    assumptions: tuple[str, ...]


def estimate_cluster(job: ClusterJob, net: Network, compute_time_s: tuple[float, float]) -> ClusterEstimate:
    """Per-step bytes and time of every collective of ``job`` that leaves the node, on ``net``."""
    _check_cluster(job, net, compute_time_s)
    m, g = job.model, net.gpus_per_node
    gpus = m.tp * job.pp * job.dp
    params = job.params or 12.0 * m.layers * m.hidden**2
    act = message_bytes(m)  # S, the TP estimator's message
    shard = int(params / (m.tp * job.pp)) * DTYPE_BYTES[job.grad_dtype]  # gradient bytes per GPU
    mb = job.micro_batches
    rows = []
    if m.tp > 1:
        per_ar = ring_allreduce_bytes(act, m.tp)
        rows.append(
            _cost(
                "tp all-reduce",
                "all-reduce",
                m.tp,
                1,
                g,
                per_ar * m.allreduces_per_layer * (m.layers // job.pp or 1) * mb,
                net,
            )
        )
    if job.dp > 1:
        step = shard * (job.dp - 1) // job.dp
        if job.sharded:
            rows.append(
                _cost("dp all-gather (params, fwd + bwd)", "all-gather", job.dp, m.tp, g, 2 * step, net)
            )
            rows.append(_cost("dp reduce-scatter (grads)", "reduce-scatter", job.dp, m.tp, g, step, net))
        else:
            rows.append(_cost("dp all-reduce (grads)", "all-reduce", job.dp, m.tp, g, 2 * step, net))
    if job.ep > 1:
        tokens = m.seq * m.micro_batch
        out = tokens * m.hidden * DTYPE_BYTES[m.dtype] * job.moe_topk // m.tp
        rows.append(
            _cost(
                "ep all-to-all (dispatch + combine, fwd + bwd)",
                "all-to-all",
                job.ep,
                m.tp,
                g,
                4 * out * (m.layers // job.pp or 1) * mb,
                net,
            )
        )
    if job.pp > 1:
        rows.append(
            _cost(
                "pp send/recv (activations fwd + grads bwd)",
                "send-recv",
                2,
                m.tp * job.dp,
                g,
                2 * act // m.tp * mb,
                net,
            )
        )
    comm = (sum(r.time_s[0] for r in rows), sum(r.time_s[1] for r in rows))
    compute = (compute_time_s[0] * mb, compute_time_s[1] * mb)
    frac = (comm[0] / (comm[0] + compute[1]), comm[1] / (comm[1] + compute[0]))
    verdict = (
        "network-bound" if comm[0] >= compute[1] else "compute-bound" if comm[1] <= compute[0] else "depends"
    )
    return ClusterEstimate(
        job,
        net,
        gpus,
        -(-gpus // g),
        params,
        tuple(rows),
        compute,
        comm,
        frac,
        verdict,
        _assumptions(job, net),
    )


def _cost(
    name: str, kind: str, group: int, stride: int, per_node: int, nbytes: int, net: Network
) -> CollectiveCost:
    """A group of ``group`` ranks ``stride`` apart: how many sit on one node, and its cross-node cost.
    Inter-node, each GPU sends through its share of the node's NICs (rail-aligned: its own NIC), so a
    group with r ranks on a node drives r GPUs' share of them; the ring / all-to-all step that leaves the
    node is the bottleneck (NVLink inside is taken as faster)."""
    span = stride * group
    crosses = span > per_node if kind != "send-recv" else stride >= per_node
    on_node = max(1, min(group, per_node // stride)) if stride <= per_node else 1
    if not crosses:
        return CollectiveCost(
            name, kind, group, group if kind != "send-recv" else 1, False, 0, (0.0, 0.0), (0.0, 0.0)
        )
    if kind == "all-to-all":
        nbytes = nbytes * (group - on_node) // group  # the share bound for other nodes
    elif kind != "send-recv":  # a ring crosses each node boundary once per channel; the group's r ranks
        nbytes = nbytes // on_node  # on this node spread that crossing over r GPUs' NIC shares
    bw = net.gpu_bytes_per_s
    time = (nbytes / bw[1], nbytes / bw[0])
    return CollectiveCost(name, kind, group, on_node, True, nbytes, bw, time)


def _assumptions(job: ClusterJob, net: Network) -> tuple[str, ...]:
    out = [
        "rank order tp fastest, then dp (ep inside dp), pp outermost (Megatron-LM's default); a group "
        "crosses nodes when its ranks span more GPUs than a node has",
        "bandwidth per GPU across nodes is a range: worst = through the top tier at the fabric's "
        "oversubscription, best = the GPU's share of its node's NICs; link rate, no protocol overhead "
        "(measured nccl-tests busbw is lower)",
        "a ring all-reduce / all-gather / reduce-scatter crosses each node boundary with 2(n-1)/n x S "
        "(all-reduce) or (n-1)/n x S bytes, spread over the NICs of the group's r ranks on the node (NCCL's "
        "channels, one per rail NIC): S x .../r per GPU NIC; NVLink inside the node is not the bottleneck",
        "no overlap of communication with compute (the seed text's simplification): the fraction is an upper "
        "bound on the time lost to the network",
        f"gradients reduced in {job.grad_dtype}; parameters "
        + (f"{job.params:g} given" if job.params else "12 x layers x hidden^2 (embeddings left out)")
        + "; TP does 4 all-reduces per layer per micro batch (the TP estimator), split over pp stages",
    ]
    if job.ep > 1:
        out.append(
            f"MoE: every layer of a stage is an expert layer, each token goes to {job.moe_topk} experts; "
            "4 all-to-alls per layer per micro batch (dispatch and combine, forward and backward)"
        )
    if job.pp > 1:
        out.append(
            "pipeline: one activation (S / tp with Megatron's scatter-gather) forward and one gradient "
            "backward per micro batch per stage boundary; the pipeline bubble is not counted"
        )
    return (*out, *net.notes)


def _check_cluster(job: ClusterJob, net: Network, compute: tuple[float, float]) -> None:
    m = job.model
    if m.dtype not in DTYPE_BYTES or job.grad_dtype not in DTYPE_BYTES:
        raise EstimateError(f"unknown dtype (known: {', '.join(DTYPE_BYTES)})")
    sizes = (
        m.layers,
        m.hidden,
        m.seq,
        m.micro_batch,
        m.tp,
        job.pp,
        job.dp,
        job.ep,
        job.micro_batches,
        job.moe_topk,
        net.nodes,
        net.gpus_per_node,
    )
    if min(sizes) <= 0 or job.params < 0:
        raise EstimateError(
            "layers, hidden, seq, micro batch, tp, pp, dp, ep, micro batches and nodes must be positive"
        )
    if job.dp % job.ep:
        raise EstimateError(
            f"--ep {job.ep} must divide --dp {job.dp} (experts are sharded inside data parallel)"
        )
    if m.layers < job.pp:
        raise EstimateError(f"--pp {job.pp} is more stages than the {m.layers} layers")
    gpus = m.tp * job.pp * job.dp
    if gpus > net.nodes * net.gpus_per_node:
        raise EstimateError(
            f"tp x pp x dp = {gpus} GPUs, the fabric has {net.nodes} nodes x "
            f"{net.gpus_per_node} = {net.nodes * net.gpus_per_node}"
        )
    low, high = net.gpu_bytes_per_s
    if low <= 0 or high < low:
        raise EstimateError("the per-GPU network bandwidth must be positive")
    if compute[0] <= 0 or compute[1] < compute[0]:
        raise EstimateError("compute time range must be positive and low <= high")
