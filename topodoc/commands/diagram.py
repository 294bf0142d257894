"""``topodoc diagram [--from SPEC] [--format dot|mermaid|svg] [-o FILE]``: draw how the box is wired.

Sockets, host bridges, root ports, PCIe switches, GPUs, NICs, NVLink bonds and the NVSwitch fabric,
derived from this machine, a recording, or a bundled example. SVG needs Graphviz's ``dot``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc diagram --from example:dgx-a100 --format mermaid
  topodoc diagram --format svg -o box.svg"""


@click.command(epilog=EXAMPLE)
@click.option("--from", "source", default=None, metavar="SPEC",
              help="live (default), a recording NAME.tar.gz, or example:<name>.")
@click.option("--format", "fmt", type=click.Choice(["dot", "mermaid", "svg"]), default="dot",
              show_default=True, help="Graphviz DOT, Mermaid flowchart, or SVG rendered by Graphviz.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to FILE instead of stdout.")
def command(source: str | None, fmt: str, output: str | None) -> None:
    """Draw sockets, root ports, switches, GPUs, NICs and NVLink/NVSwitch of a machine."""
    from topodoc.probe.source import SourceError, load_snapshot
    from topodoc.report.diagram import DiagramError, render_dot, render_mermaid, to_svg
    from topodoc.topology import derive

    try:
        topology = derive(load_snapshot(source))
    except SourceError as err:
        _fail(str(err))
    title = f"{topology.source}: {topology.shape.name}"
    if fmt == "mermaid":
        text = render_mermaid(topology.graph, title)
    else:
        text = render_dot(topology.graph, title)
    if fmt == "svg":
        try:
            text = to_svg(text)
        except DiagramError as err:
            _fail(str(err))
    _write(text, output)


def _write(text: str, output: str | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as err:
        _fail(f"cannot write {output}: {err.strerror or err}")


def _fail(message: str) -> NoReturn:
    click.echo(visible(f"topodoc diagram: {message}"), err=True)
    sys.exit(EXIT_ERROR)
