"""``topodoc export nccl-topo --from SPEC|FILE -o topo.xml [--pci-only]``: the NCCL topology file
(``NCCL_TOPO_FILE``) of a machine: live, a recording, an example, or any hardware text input topodoc reads
(hwloc XML, an NCCL topology dump, ``topodoc probe --json``). In a VM whose virtual PCIe hides the real
GPU-NIC layout, write it from the host (or the provider's description) and point NCCL_TOPO_FILE at it.
"""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc export nccl-topo --from example:dgx-a100 -o topo.xml
  NCCL_TOPO_FILE=topo.xml all_reduce_perf -g 8"""


@click.command(epilog=EXAMPLE)
@click.argument("what", type=click.Choice(["nccl-topo"]))
@click.option(
    "--from", "source", metavar="SPEC|FILE", help="live, NAME.tar.gz, example:NAME, or a text input."
)
@click.option("-o", "--output", metavar="FILE", default="-", show_default=True, help="Where to write it.")
@click.option(
    "--pci-only", is_flag=True, help="Only <cpu> and <pci> elements (NCCL discovers GPUs and NICs)."
)
def command(what: str, source: str | None, output: str, pci_only: bool) -> None:
    """Export a machine description for another tool (nccl-topo: an NCCL_TOPO_FILE)."""
    from topodoc.parsers.nccl_topo_xml import write
    from topodoc.probe.source import SourceError, load_snapshot

    try:
        snapshot = load_snapshot(source)
    except SourceError as err:
        click.echo(visible(f"topodoc export: {err}"), err=True)
        sys.exit(EXIT_ERROR)
    if not snapshot.pci:
        click.echo("topodoc export: the machine has no PCI devices to describe", err=True)
        sys.exit(EXIT_ERROR)
    text = write(snapshot, pci_only=pci_only)
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        click.echo(visible(f"topodoc export: cannot write {output}: {err.strerror or err}"), err=True)
        sys.exit(EXIT_ERROR)
