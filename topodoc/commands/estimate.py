"""``topodoc estimate tp``: tensor-parallel traffic per GPU and the share of time it costs."""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc estimate tp --layers 48 --hidden 8192 --seq 4096 --tp 8 --from example:dgx-a100"""


@click.group(name="estimate", epilog=EXAMPLE)
def command() -> None:
    """Estimate what a training job asks of the interconnect."""


@command.command(name="tp", epilog=EXAMPLE)
@click.option("--layers", type=int, required=True, help="Transformer layers.")
@click.option("--hidden", type=int, required=True, help="Hidden size.")
@click.option("--seq", type=int, required=True, help="Sequence length.")
@click.option("--micro-batch", type=int, default=1, show_default=True)
@click.option("--dtype", default="bf16", show_default=True, help="bf16, fp16, fp32, fp8.")
@click.option("--tp", type=int, required=True, help="Tensor-parallel degree (GPUs in the all-reduce).")
@click.option("--compute-time", default="0.25:0.5", show_default=True,
              help="Seconds of compute per micro batch, LOW:HIGH.")
@click.option("--bandwidth", "bandwidth", default=None, help="Effective GB/s (1e9 B/s), LOW:HIGH.")
@click.option("--from", "source", default=None,
              help="Derive the bandwidth from a recording or example:<name>.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def tp(layers, hidden, seq, micro_batch, dtype, tp, compute_time, bandwidth, source, as_json) -> None:
    """Bytes per GPU per micro batch for TP all-reduces, the bandwidth needed, and the comm share."""
    from topodoc.bandwidth.estimate import EstimateError, TpJob, estimate_tp, parse_range

    try:
        job = TpJob(layers=layers, hidden=hidden, seq=seq, micro_batch=micro_batch, dtype=dtype, tp=tp)
        bw, origin = _bandwidth(bandwidth, source, tp)
        est = estimate_tp(job, parse_range(compute_time), bw, origin)
    except (EstimateError, LookupError, OSError, ValueError) as err:
        click.echo(visible(f"topodoc estimate tp: {err}"), err=True)
        sys.exit(EXIT_ERROR)
    _emit(est, as_json)


def _bandwidth(text: str | None, source: str | None, tp: int) -> tuple[tuple[float, float], str]:
    from topodoc.bandwidth.estimate import GB, parse_range

    if text is not None:
        low, high = parse_range(text)
        return (low * GB, high * GB), "given"
    from topodoc.commands.bandwidth import tp_bandwidth_from_source

    gbps, reason = tp_bandwidth_from_source(source, tp)
    return (gbps * GB, gbps * GB), reason


def _emit(est, as_json: bool) -> None:
    if as_json:

        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.estimate", to_data(est)))
        return
    from topodoc.report.bandwidth import render_tp

    click.echo(render_tp(est))


CLUSTER_EXAMPLE = """\b
Example:
  topodoc estimate cluster --plan plan.json --layers 48 --hidden 8192 --seq 4096 --tp 8 --pp 4 --dp 8
  topodoc estimate cluster --nodes 16 --nic-gbps 400 --layers 80 --hidden 8192 --seq 4096 --tp 8 --dp 16"""


@command.command(name="cluster", epilog=CLUSTER_EXAMPLE)
@click.option("--layers", type=int, required=True, help="Transformer layers.")
@click.option("--hidden", type=int, required=True, help="Hidden size.")
@click.option("--seq", type=int, required=True, help="Sequence length.")
@click.option("--micro-batch", type=int, default=1, show_default=True)
@click.option("--dtype", default="bf16", show_default=True, help="Activations: bf16, fp16, fp32, fp8.")
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline-parallel stages.")
@click.option("--dp", type=int, default=1, show_default=True, help="Data-parallel size.")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert-parallel size (divides --dp).")
@click.option("--moe-topk", type=int, default=2, show_default=True, help="Experts per token (with --ep).")
@click.option(
    "--params", default=None, help="Model parameters, e.g. 70B or 7e10 (default: 12 x layers x hidden^2).",
)
@click.option("--grad-dtype", default="bf16", show_default=True, help="Dtype gradients are reduced in.")
@click.option("--sharded", is_flag=True, help="ZeRO-3 / FSDP: all-gather params, reduce-scatter grads.")
@click.option("--micro-batches", type=int, default=1, show_default=True, help="Micro batches per step.")
@click.option("--compute-time", default="0.25:0.5", show_default=True,
              help="Seconds of compute per micro batch, LOW:HIGH.")
@click.option("--plan", "plan_file", default=None, metavar="PLAN.json", help="A `fabric plan --json`.")
@click.option("--fleet", "fleet", multiple=True, metavar="INPUT",
              help="Recordings or snapshots of the nodes (repeatable): their rail NICs' rates.")
@click.option("--nodes", type=int, default=None, help="Nodes, with --nic-gbps (no plan, no fleet).")
@click.option("--nic-gbps", type=float, default=None, help="Gb/s per NIC, with --nodes.")
@click.option("--nics-per-node", type=int, default=8, show_default=True)
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (topodoc.estimate-cluster).")
def cluster(layers, hidden, seq, micro_batch, dtype, tp, pp, dp, ep, moe_topk, params, grad_dtype, sharded,
            micro_batches, compute_time, plan_file, fleet, nodes, nic_gbps, nics_per_node, gpus_per_node,
            as_json) -> None:
    """Cross-node all-reduce / all-gather / all-to-all time per step of a TP/PP/DP/EP job, and whether the
    network or the compute bounds it."""
    from topodoc.bandwidth.estimate import ClusterJob, EstimateError, TpJob, estimate_cluster, parse_range

    try:
        net = _network(plan_file, fleet, nodes, nic_gbps, nics_per_node, gpus_per_node)
        job = ClusterJob(
            TpJob(layers=layers, hidden=hidden, seq=seq, micro_batch=micro_batch, dtype=dtype, tp=tp),
            pp=pp, dp=dp, ep=ep, params=_params(params), grad_dtype=grad_dtype, sharded=sharded,
            micro_batches=micro_batches, moe_topk=moe_topk,
        )
        est = estimate_cluster(job, net, parse_range(compute_time))
    except (EstimateError, ValueError, OSError) as err:
        click.echo(f"topodoc estimate cluster: {err}", err=True)
        sys.exit(EXIT_ERROR)
    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.estimate-cluster", to_data(est)))
        return
    from topodoc.report.bandwidth import render_cluster

    click.echo(render_cluster(est), nl=False)


def _params(text: str | None) -> float:
    if text is None:
        return 0.0
    scale = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}.get(text.strip()[-1:].upper(), 1.0)
    body = text.strip()[:-1] if scale != 1.0 else text.strip()
    try:
        value = float(body) * scale
    except ValueError as err:
        raise ValueError(f"--params: not a number of parameters: {text!r} (e.g. 70B or 7e10)") from err
    if not 0 < value < 1e16:
        raise ValueError(f"--params out of range: {text!r}")
    return value


def _network(plan_file, fleet, nodes, nic_gbps, nics_per_node, gpus_per_node):
    from topodoc.bandwidth.estimate import GB, Network

    given = [x for x in (plan_file, fleet or None, nodes) if x is not None]
    if len(given) != 1 or (nodes is None) != (nic_gbps is None):
        raise ValueError("give one of --plan PLAN.json, --fleet INPUT..., or --nodes N --nic-gbps G")
    if plan_file is not None:
        from topodoc.commands.fabric import load_plan

        p = load_plan(plan_file)
        worst, best = p.per_gpu_inter_node_gbps / 8 * GB, p.per_gpu_nic_gbps / 8 * GB
        return Network(p.nodes, p.gpus_per_node, (worst, best), f"plan {plan_file}",
                       (f"fabric: {p.switch.name}, {p.tiers} tier(s), {p.oversubscription} at the leaf",))
    if fleet:
        return _fleet_network(fleet)
    if nodes <= 0 or nic_gbps <= 0 or nics_per_node <= 0 or gpus_per_node <= 0:
        raise ValueError("--nodes, --nic-gbps, --nics-per-node and --gpus-per-node must be positive")
    share = nics_per_node * nic_gbps / 8 / gpus_per_node * GB
    return Network(nodes, gpus_per_node, (share, share), "given",
                   ("the fabric above the leaves is not given: 1:1 assumed (--plan gives oversubscription)",))


def _fleet_network(fleet):
    from topodoc.bandwidth.estimate import GB, Network
    from topodoc.fabric.check import observe

    seen = observe(tuple(fleet))
    nodes = sum(len(v.names) for v in seen.nodes)
    if not nodes:
        raise ValueError("--fleet: no node could be read" + (f" ({seen.errors[0]})" if seen.errors else ""))
    shares = []
    for view in seen.nodes:
        rates = [p.gbps for p in view.ports if p.state.upper() == "ACTIVE" and p.gbps]
        # NCCL splits a collective evenly over its channels (one per rail NIC): the slowest NIC paces all
        gbps = min(rates) * len(rates) if rates else 0
        if not view.gpus or not gbps:
            raise ValueError(f"--fleet: {view.names[0]} shows no GPU or no active RDMA NIC with a rate")
        shares.append((gbps / 8 / view.gpus * GB, view))
    slowest, view = min(shares, key=lambda s: s[0])
    gpus = min(v.gpus for _, v in shares)
    return Network(nodes, gpus, (slowest, slowest), f"fleet ({nodes} nodes)", (
        f"per GPU: the slowest node's active rail NICs x their slowest rate / its GPUs ({view.names[0]}: "
        f"{slowest / GB:g} GB/s); a collective runs at its slowest member",
        "the fabric above the leaves is unknown from recordings: 1:1 assumed (--plan gives oversubscription)",
    ))
