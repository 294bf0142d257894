"""``topodoc bandwidth [--from SPEC] [--json]``: what this machine should deliver, and why."""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc bandwidth --from example:hgx-h100-8x400g-ib
  topodoc bandwidth --nodes 4 --json"""


@click.command(epilog=EXAMPLE)
@click.option("--from", "source", default=None, metavar="SPEC",
              help="A recording (NAME.tar.gz) or example:<name>; default: this machine.")
@click.option("--nodes", type=click.IntRange(min=2), default=2, show_default=True,
              help="Nodes for the inter-node bounds.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(source: str | None, nodes: int, as_json: bool) -> None:
    """Per-pair bottleneck bandwidth and the busbw nccl-tests should reach, each with its reason."""
    bw_model = model_from_source(source, nodes)
    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.bandwidth", to_data(bw_model), ensure_ascii=False))
        return
    from topodoc.report.bandwidth import render_model

    click.echo(render_model(bw_model))


def fail(message: str) -> None:
    click.echo(visible(f"topodoc bandwidth: {message}"), err=True)
    sys.exit(EXIT_ERROR)


def model_from_source(source: str | None, nodes: int = 2):
    """Load the snapshot (live, recording or example), derive the topology, build the model."""
    from dataclasses import replace

    from topodoc.bandwidth.model import build, inter_node_expectations

    try:
        from topodoc.probe.source import load_snapshot
        from topodoc.topology.derive import derive

        snapshot = load_snapshot(source)
    except ImportError as err:
        fail(f"cannot load a machine here: {err}")
    except (OSError, LookupError, ValueError) as err:
        where = source or "live"
        fail(str(err) if where in str(err) else f"{where}: {err}")
    bw_model = build(derive(snapshot), snapshot)
    if nodes == 2:
        return bw_model
    intra = tuple(e for e in bw_model.expectations if e.scope == "intra-node")
    inter = inter_node_expectations(bw_model.gpus, bw_model.node_nic_gbps, bw_model.node_nic_label, intra,
                                    nodes, rdma=bw_model.node_nic_rdma)
    return replace(bw_model, expectations=intra + inter)


def tp_bandwidth_from_source(source: str | None, tp: int) -> tuple[float, str]:
    """The ring bound over the first ``tp`` GPUs of a machine: what a TP group's all-reduce gets."""
    from topodoc.bandwidth.model import best_ring

    bw_model = model_from_source(source)
    weights = {frozenset((p.a, p.b)): p.nccl_gbps or 0.0 for p in bw_model.pairs}
    if bw_model.gpus < tp or not weights:
        raise ValueError(f"{source or 'this machine'} has {bw_model.gpus} GPUs, fewer than --tp {tp}")
    names = [f"GPU{i}" for i in range(tp)]  # tp is at most the machine's GPU count (checked above)
    _order, gbps = best_ring(names, weights)
    if not gbps:
        raise ValueError("the bandwidth between these GPUs could not be derived; pass --bandwidth")
    return gbps, f"ring over GPU0-GPU{tp - 1} of {bw_model.source}, NCCL's model"
