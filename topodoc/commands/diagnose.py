"""``topodoc diagnose [FILE...] [--from SPEC] [--log FILE...] [--nccl-tests FILE] [--json] [--fail-on SEV]``.

``FILE...`` are text inputs of any kind topodoc knows (``nvidia-smi topo -m``/``-q``/``nvlink``, ``lspci``,
``ibstat``, ``ibv_devinfo``, ``ibdev2netdev``, ``show_gids``, NCCL logs, nccl-tests output, hwloc or NCCL
topology XML, ``topodoc probe --json``; ``-`` is stdin), each recognized by its content. The hardware they
describe is built into a partial machine (``topodoc.text.machine``) and this machine is not probed
("hardware: from the inputs"); ``--from live`` adds it explicitly.

The command parses options and renders; the diagnosis itself is :func:`topodoc.diagnosis.run`, the one
pipeline the API and the agent call too. The hardware is this machine unless ``--from`` names a
recording, and is left out when only ``--log`` or FILE... is given (add ``--from live`` to join them
with this machine). Exit: 0 clean, 1 a finding at or above ``--fail-on``, 2 bad input or an internal
error (with ``--json``, a document that says so).
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK

SEVERITIES = ("info", "warning", "error", "critical")


EXAMPLE = """\b
Example:
  topodoc diagnose --from example:dgx-a100-degraded-no-peermem
  topodoc diagnose topo-m.txt ibstat.txt rank0.log
  topodoc diagnose --log rank0.log --fail-on warning --json"""


@click.command(epilog=EXAMPLE)
@click.argument("files", nargs=-1, metavar="[FILE]...")
@click.option("--from", "source", metavar="SPEC", help="live, a recording NAME.tar.gz, or example:NAME.")
@click.option(
    "--log", "logs", multiple=True, metavar="FILE", help="An NCCL log (repeatable; .gz and - work)."
)
@click.option(
    "--nccl-tests", "nccl_tests", metavar="FILE",
    help="nccl-tests output to compare with the model (.gz, UTF-16 and - work).",
)
@click.option("--json", "as_json", is_flag=True, help="Print findings, skipped rules and errors as JSON.")
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default="error",
    show_default=True,
    help="Exit 1 when a finding is at least this severe.",
)
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              metavar="SECONDS", help="Live: no NVML call or nvidia-smi after this long; the rest are gaps.")
def command(
    files: tuple[str, ...], source: str | None, logs: tuple[str, ...], nccl_tests: str | None, as_json: bool,
    fail_on: str, deadline: float,
) -> None:
    """Diagnose a GPU server and/or its NCCL logs: what is wrong, with evidence, and what to do.

    FILE... are pasted outputs (topo -m, lspci, ibstat, nvidia-smi -q, NCCL logs, ...), recognized by content.
    """
    from topodoc.diagnosis import DiagnosisError, Request, run
    from topodoc.report.console import progress
    from topodoc.rules.engine import Severity, at_or_above

    request = Request(source=source, files=tuple(files), logs=tuple(logs), nccl_tests=nccl_tests,
                      deadline=deadline)
    try:
        with progress(f"topodoc diagnose: reading {len(files) + len(logs)} input(s)") if files or logs \
                else _nothing():
            result = run(request)
    except DiagnosisError as err:
        if as_json:
            _emit_error(str(err), err.files)
        _fail(str(err))
    _emit(result, as_json)
    report = result.report
    if report.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if at_or_above(report, Severity(fail_on)) else EXIT_OK)


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def _fail(message: str) -> NoReturn:
    from topodoc.report.safe import visible

    click.echo(f"topodoc diagnose: {visible(message)}", err=True)
    sys.exit(EXIT_ERROR)


def _emit_error(message: str, files: tuple[dict, ...]) -> None:
    """``--json`` with nothing usable: a document that says so (stdout is never empty)."""
    from topodoc.report.document import dumps

    inputs = {"hardware": None, "log": None, "nccl-tests": None}
    if files:
        inputs["files"] = list(files)
    click.echo(dumps("topodoc.diagnose", {"inputs": inputs, "error": message, "findings": [], "skipped": [],
                                          "errors": [], "rules_run": 0, "summary": {}}))


def _emit(result, as_json: bool) -> None:
    from topodoc.report.color import use_color
    from topodoc.report.console import quiet
    from topodoc.report.diagnose import json_data, render_text
    from topodoc.report.document import dumps

    report, inputs = result.report, dict(result.inputs)
    if as_json:
        click.echo(dumps("topodoc.diagnose", json_data(report, inputs)))
        return
    files, notes = inputs.pop("files", None), inputs.pop("notes", [])
    if files is not None:
        from topodoc.text import title

        lines = []
        for row in files:
            read = {title(k) for k in row.get("also_read", [])}
            also = [f"{t} (read)" if t in read else t for t in row.get("also_contains", [])]
            extra = f"; also contains {', '.join(also)}" if also else ""
            lines.append(f"input {row['path']}: {row['taken_as']}{extra}")
            if row.get("note"):
                lines.append(f"  {row['note']}")
            for item in row.get("damaged", [])[:5]:
                lines.append(f"  damaged: {item}")
        lines += [] if quiet() else [f"note: {n}" for n in notes]
        click.echo("\n".join(lines))
    click.echo(render_text(report, inputs, color=use_color(), quiet=quiet()), nl=False)
