"""``topodoc nccltests FILE|- [--json]``: an nccl-tests output (plain, .gz, UTF-16 or stdin), parsed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from topodoc.cli import EXIT_ERROR
from topodoc.inputs import label


@click.command()
@click.argument("path", metavar="FILE|-")
@click.option("--collective", default=None, help="Name the collective when the output does not.")
@click.option("--json", "as_json", is_flag=True, help="The run as JSON (a list when the file holds several).")
def command(path: str, collective: str | None, as_json: bool) -> None:
    """Parse nccl-tests output (any version, with NCCL INFO lines or MPI prefixes mixed in)."""
    runs = read_runs(path, collective)
    if as_json:
        from topodoc.codec import to_data

        data = to_data(runs[0]) if len(runs) == 1 else to_data(list(runs))
        click.echo(json.dumps(data, indent=2))
        return
    from topodoc.report.nccl_tests import render_run

    click.echo("\n\n".join(render_run(run) for run in runs))


def read_runs(path: str, collective: str | None = None):
    """Every run in FILE (or stdin for ``-``); one line on stderr and exit 2 when it cannot be read or
    holds none. What the reader left out (a capped read, over-long lines) is noted on stderr."""
    from topodoc.inputs import InputError, read_text
    from topodoc.parsers.nccl_tests import NcclTestsParseError, parse_runs

    try:
        given = read_text(path)
        for note in given.notes():
            click.echo(f"topodoc nccltests: note: {note}", err=True)
        return parse_runs(given.text, collective or _collective_from_name(path))
    except InputError as err:
        click.echo(f"topodoc nccltests: {err}", err=True)
    except NcclTestsParseError as err:
        click.echo(f"topodoc nccltests: {label(path)}: {err}", err=True)
    sys.exit(EXIT_ERROR)


def _collective_from_name(path: str) -> str | None:
    from topodoc.parsers.nccl_tests import BUSBW_FACTORS

    stem = Path(path).name
    found = [name for name in BUSBW_FACTORS if name in stem]
    return max(found, key=len) if found else None
