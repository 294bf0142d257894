"""``topodoc probe [--from SPEC | --root DIR] [--json]``: the machine summarized for a person.

``--from`` takes ``live`` (default), a recording ``NAME.tar.gz`` or ``example:<name>``; ``--root``
reads a filesystem root (an extracted recording replays whole). Exit 0 even without NVIDIA GPUs;
2 with one line on stderr for a bad source.
"""

from __future__ import annotations

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc probe
  topodoc probe --from example:gb200-nvl72-tray --json"""


@click.command(epilog=EXAMPLE)
@click.option("--from", "source", metavar="SPEC", help="live (default), NAME.tar.gz, or example:<name>.")
@click.option("--root", metavar="DIR", help="Read sysfs/procfs under DIR instead of / (like HWLOC_FSROOT).")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON.")
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              metavar="SECONDS", help="Live: no NVML call or nvidia-smi after this long; the rest are gaps.")
def command(source: str | None, root: str | None, as_json: bool, deadline: float) -> None:
    """Probe this machine (or a recording): GPUs, PCIe paths, NUMA, NICs, and what could not be read."""
    from topodoc.probe.source import SourceError, host_for_root, load_snapshot

    if source and root:
        _fail("give either --from or --root, not both")
    try:
        snapshot = _collect(*host_for_root(root)) if root else load_snapshot(source, deadline)
    except SourceError as err:
        _fail(str(err))
    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.snapshot", to_data(snapshot)))
        return
    from topodoc.report.probe import render_probe

    click.echo(render_probe(snapshot), nl=False)


def _collect(host, name: str):
    from topodoc.probe.collect import collect  # here: a cached replay never loads the collectors

    return collect(host, name)


def _fail(message: str):
    click.echo(visible(f"topodoc probe: {message}"), err=True)
    raise SystemExit(EXIT_ERROR)
