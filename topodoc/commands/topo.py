"""``topodoc topo [FILE|-] [--json]``: read an ``nvidia-smi topo -m``/``-mp``/``-p2p`` matrix, explain it.

The matrix comes from a source function (text from FILE or stdin, read by :mod:`topodoc.inputs`); the
output half takes any ConnectionMatrix, so a derived matrix (a recording, a live machine)
only needs another source.
"""

from __future__ import annotations

import shutil
import sys
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR
from topodoc.model import ConnectionMatrix
from topodoc.report.safe import visible

TOPO_MAX_LINES = 20_000  # a matrix is found in the first lines; collect_env reports are a few hundred


EXAMPLE = """\b
Example:
  nvidia-smi topo -m | topodoc topo -
  topodoc topo --from example:dgx-a100"""


@click.command(epilog=EXAMPLE)
@click.argument("source", required=False, metavar="[FILE|-]")
@click.option("--from", "machine", default=None, metavar="SPEC",
              help="Derive the matrix from a machine instead: live, a recording NAME.tar.gz, "
              "or example:<name>.")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix and its reading as JSON.")
def command(source: str | None, machine: str | None, as_json: bool) -> None:
    """Explain an `nvidia-smi topo -m` (or `-mp`, `-p2p r|w|n|a`) matrix read from FILE or stdin (-),
    or the matrix topodoc derives from a machine (--from).

    The text may be a bare capture or a paste with other text around it (a prompt, a log,
    vLLM collect_env or SGLang check_env output).
    """
    if machine is not None:
        if source is not None:
            _fail("give FILE or --from, not both")
        emit_derived(machine, as_json)
        return
    if source is None:
        _fail("give the file holding `nvidia-smi topo -m` output, or - to read it from stdin")
    emit(matrix_from_text(source), as_json)


def emit_derived(spec: str, as_json: bool) -> None:
    """The derived matrix with the same renderer and reading, plus the machine's shape, NCCL's path
    types and every cell where nvidia-smi's own matrix (when recorded) disagrees. JSON extras:
    ``machine`` (shape), ``nccl_paths`` (GPU row -> column -> path type) and ``smi_diffs`` (null
    when the source holds no nvidia-smi matrix)."""
    from topodoc.codec import to_data
    from topodoc.probe.source import SourceError, load_snapshot
    from topodoc.report.diagram_text import render_derived
    from topodoc.topology import compare, derive, to_matrix

    try:
        snapshot = load_snapshot(spec)
    except SourceError as err:
        _fail(str(err))
    topology = derive(snapshot)
    matrix = to_matrix(topology)
    diffs = compare(matrix, snapshot.smi_topo) if snapshot.smi_topo else None
    if not as_json:
        emit(matrix, False)
        click.echo("\n" + render_derived(topology, diffs), nl=False)
        return
    from topodoc.report.document import dumps
    from topodoc.report.topo import json_data
    from topodoc.topology.reading import read

    paths: dict[str, dict[str, str]] = {}
    for conn in (*topology.gpu_pairs, *topology.gpu_nic):
        paths.setdefault(conn.a, {})[conn.b] = conn.nccl
        if conn.b.startswith("GPU"):
            paths.setdefault(conn.b, {})[conn.a] = conn.nccl
    extras = {"machine": to_data(topology.shape), "nccl_paths": paths, "smi_diffs": to_data(diffs)}
    click.echo(dumps("topodoc.topo", {**json_data(matrix, read(matrix)), **extras}))


def matrix_from_text(source: str) -> ConnectionMatrix:
    from topodoc.parsers.smi_topo import SmiTopoParseError, parse

    given = _read_text(source)
    try:
        return parse(given.text)
    except SmiTopoParseError as err:
        _fail(f"{given.name}: {err}")


def emit(matrix: ConnectionMatrix, as_json: bool) -> None:
    from topodoc.report.color import use_color
    from topodoc.report.document import dumps
    from topodoc.report.topo import json_data, render_text
    from topodoc.topology.reading import read

    reading = read(matrix)
    if as_json:
        click.echo(dumps("topodoc.topo", json_data(matrix, reading)))
        return
    width = shutil.get_terminal_size((100, 24)).columns
    click.echo(render_text(matrix, reading, color=use_color(), width=width), nl=False)


def _read_text(source: str):
    """The text of FILE or stdin through the one reader; what it left out is noted on stderr."""
    from topodoc.inputs import InputError, read_text
    from topodoc.report.console import note as note_line

    try:
        given = read_text(source, max_lines=TOPO_MAX_LINES)
    except InputError as err:
        _fail(str(err))
    for note in given.notes():
        note_line("topodoc topo", note)
    return given


def _fail(message: str) -> NoReturn:
    click.echo(visible(f"topodoc topo: {message}"), err=True)
    sys.exit(EXIT_ERROR)
