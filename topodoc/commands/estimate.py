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
