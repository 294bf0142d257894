"""``topodoc nccltests FILE|- [--json]``: an nccl-tests output (plain, .gz, UTF-16 or stdin), parsed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from topodoc.cli import EXIT_ERROR
from topodoc.inputs import label
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  all_reduce_perf -b 8 -e 8G -f 2 -g 8 | topodoc nccltests -
  topodoc nccltests run.txt --json"""


@click.command(epilog=EXAMPLE)
@click.argument("path", metavar="FILE|-")
@click.option("--collective", default=None, help="Name the collective when the output does not.")
@click.option("--json", "as_json", is_flag=True, help="The run as JSON (a list when the file holds several).")
def command(path: str, collective: str | None, as_json: bool) -> None:
    """Parse nccl-tests output (any version, with NCCL INFO lines or MPI prefixes mixed in)."""
    runs = read_runs(path, collective)
    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.nccltests", {"runs": to_data(list(runs))}))
        return
    from topodoc.report.nccl_tests import render_run

    click.echo("\n\n".join(render_run(run) for run in runs))


def read_runs(path: str, collective: str | None = None):
    """Every run in FILE (or stdin for ``-``); one line on stderr and exit 2 when it cannot be read or
    holds none. What the reader left out (a capped read, over-long lines) is noted on stderr."""
    from topodoc.inputs import InputError, read_text
    from topodoc.parsers.nccl_tests import NcclTestsParseError, parse_runs
    from topodoc.report.console import note as note_line

    try:
        given = read_text(path)
        for note in given.notes():
            note_line("topodoc nccltests", note)
        return parse_runs(given.text, collective or _collective_from_name(path))
    except InputError as err:
        click.echo(visible(f"topodoc nccltests: {err}"), err=True)
    except NcclTestsParseError as err:
        click.echo(visible(f"topodoc nccltests: {label(path)}: {err}"), err=True)
    sys.exit(EXIT_ERROR)


def _collective_from_name(path: str) -> str | None:
    from topodoc.parsers.nccl_tests import BUSBW_FACTORS

    # "all_reduce_perf.log", "all-reduce-2node.txt": a collective's name as whole words of the file name
    # ("reduce" inside "all-reduce" or "reduce_scatter" is not the reduce collective)
    words = re.split(r"[^a-z0-9]+", Path(path).name.lower())
    found = {name for name in BUSBW_FACTORS for i in range(len(words))
             if words[i: i + name.count("_") + 1] == name.split("_")}
    found = {n for n in found if not any(n != m and n in m.split("_") for m in found)}
    return found.pop() if len(found) == 1 else None
