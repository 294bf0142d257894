"""``topodoc topo [FILE|-] [--json]``: read an ``nvidia-smi topo -m``/``-mp``/``-p2p`` matrix, explain it.

The matrix comes from a source function (today: text from FILE or stdin); the output half takes any
ConnectionMatrix, so a derived matrix (a recording, a live machine) only needs another source.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR
from topodoc.model import ConnectionMatrix


@click.command()
@click.argument("source", required=False, metavar="[FILE|-]")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix and its reading as JSON.")
def command(source: str | None, as_json: bool) -> None:
    """Explain an `nvidia-smi topo -m` (or `-mp`, `-p2p r|w|n|a`) matrix read from FILE or stdin (-).

    The text may be a bare capture or a paste with other text around it (a prompt, a log,
    vLLM collect_env or SGLang check_env output).
    """
    if source is None:
        _fail("give the file holding `nvidia-smi topo -m` output, or - to read it from stdin")
    emit(matrix_from_text(source), as_json)


def matrix_from_text(source: str) -> ConnectionMatrix:
    from topodoc.parsers.smi_topo import SmiTopoParseError, parse

    text = _read_text(source)
    try:
        return parse(text)
    except SmiTopoParseError as err:
        _fail(f"{_label(source)}: {err}")


def emit(matrix: ConnectionMatrix, as_json: bool) -> None:
    from topodoc.report.topo import json_data, render_text
    from topodoc.topology_reading import read

    reading = read(matrix)
    if as_json:
        click.echo(json.dumps(json_data(matrix, reading), indent=2))
        return
    width = shutil.get_terminal_size((100, 24)).columns
    click.echo(render_text(matrix, reading, color=sys.stdout.isatty(), width=width), nl=False)


def _read_text(source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as err:
        _fail(f"cannot read {_label(source)}: {err.strerror or err}")
    return decode(data)


def decode(data: bytes) -> str:
    """Bytes of a capture -> text: UTF-16 with a BOM (PowerShell redirects), else UTF-8, lenient."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _label(source: str) -> str:
    return "stdin" if source == "-" else source


def _fail(message: str) -> NoReturn:
    click.echo(f"topodoc topo: {message}", err=True)
    sys.exit(EXIT_ERROR)
