"""``topodoc logs FILE... [--json]``: which transport NCCL used, with GDR, ranks and errors explained."""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc logs rank0.log rank1.log
  topodoc logs job.log.gz --json"""


@click.command(epilog=EXAMPLE)
@click.argument("paths", metavar="FILE...", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="The analysis as JSON (summary, then the tables).")
def command(paths: tuple[str, ...], as_json: bool) -> None:
    """Analyze NCCL_DEBUG=INFO logs: one rank, a whole job, several nodes' files (.gz and - for stdin).

    Reports the inter-node transport (IB, RoCE, EFA, Socket, TCPX, gIB, ...), GPUDirect RDMA, devices,
    intra-node transports, a per-rank connection table, NCCL's environment echo, and every warning with
    its likely cause. Each claim names the file and line that supports it.
    """
    from topodoc.parsers.nccl_log import LogInputError, analyze
    from topodoc.report.console import progress

    try:
        from topodoc import catalogue

        with progress(f"topodoc logs: reading {len(paths)} file(s)"):
            analysis = analyze(list(paths), catalogue.scan_literals())
    except LogInputError as err:
        click.echo(visible(f"topodoc logs: {err}"), err=True)
        sys.exit(EXIT_ERROR)
    from topodoc.report.logs import render, to_json

    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import document

        click.echo(to_json(document("topodoc.logs", to_data(analysis))))
        return
    click.echo(render(analysis), nl=False)

