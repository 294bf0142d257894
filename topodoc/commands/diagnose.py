"""``topodoc diagnose [FILE...] [--from SPEC] [--log FILE...] [--nccl-tests FILE] [--json] [--fail-on SEV]``.

``FILE...`` are text inputs of any kind topodoc knows (``nvidia-smi topo -m``/``-q``/``nvlink``, ``lspci``,
``ibstat``, ``ibv_devinfo``, ``ibdev2netdev``, ``show_gids``, NCCL logs, nccl-tests output, hwloc or NCCL
topology XML, ``topodoc probe --json``; ``-`` is stdin), each recognized by its content. The hardware they
describe is built into a partial machine (``topodoc.textmachine``) and this machine is not probed
("hardware: from the inputs"); ``--from live`` adds it explicitly.

Gathers the facts (a hardware snapshot, its derived topology, parsed NCCL logs, an nccl-tests
comparison), runs every rule, and prints the findings worst first. The hardware is this machine
unless ``--from`` names a recording, and is left out when only ``--log`` is given (add
``--from live`` to join logs with this machine). Exit: 0 clean, 1 a finding at or above
``--fail-on``, 2 bad input or an internal error.
"""

from __future__ import annotations

import dataclasses
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
    if files:
        from topodoc.commands._diagnose_text import diagnose_files

        diagnose_files(files, source, logs, nccl_tests, as_json, fail_on)
        return
    from topodoc.rules.engine import Facts, Severity, at_or_above, evaluate
    from topodoc.rules.registry import RULES

    snapshot = _snapshot(source, deadline) if source or not logs else None
    analysis = _analyze(logs) if logs else None
    topology, broken = _topology(snapshot)
    comparisons = _compare(nccl_tests, snapshot, topology) if nccl_tests else None
    report = evaluate(Facts(snapshot, topology, analysis, comparisons), RULES)
    if broken:
        report = dataclasses.replace(report, errors=report.errors + (broken,))
    inputs = _inputs(snapshot, logs, analysis, nccl_tests)
    _emit(report, inputs, as_json)
    if report.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if at_or_above(report, Severity(fail_on)) else EXIT_OK)


def _fail(message: str) -> NoReturn:
    click.echo(f"topodoc diagnose: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _snapshot(source: str | None, deadline: float = 60.0):
    from topodoc.probe.source import SourceError, load_snapshot

    try:
        return load_snapshot(source, deadline)
    except SourceError as err:
        _fail(str(err))


def _analyze(paths: tuple[str, ...]):
    from topodoc.parsers.nccl_log import LogInputError, NoNcclLinesError, analyze
    from topodoc.report.console import progress

    try:
        from topodoc import catalogue

        with progress(f"topodoc diagnose: reading {len(paths)} log(s)"):
            return analyze(list(paths), catalogue.scan_literals())
    except NoNcclLinesError as err:
        _fail(str(err))
    except (LogInputError, OSError) as err:
        _fail(f"cannot read log {err}")


def _topology(snapshot):
    """The derived topology, or None and an internal-error result when derivation fails."""
    if snapshot is None:
        return None, None
    from topodoc.numbers import LimitError
    from topodoc.rules.engine import InternalError
    from topodoc.topology import derive

    try:
        return derive(snapshot), None
    except LimitError:
        raise  # the input names more than any machine has: one line, exit 2 (cli.py)
    except Exception as err:  # a derivation bug must not hide the rules that need only the snapshot
        return None, InternalError("topology", f"{type(err).__name__}: {err}")


def _compare(path: str, snapshot, topology):
    """The nccl-tests run (FILE, .gz, UTF-16 or - for stdin), where it came from, and how it compares
    with the bandwidth model."""
    from topodoc.facts import nccl_tests_input
    from topodoc.inputs import InputError, read_text
    from topodoc.parsers.nccl_tests import NcclTestsParseError
    from topodoc.report import console

    try:
        given = read_text(path)
    except InputError as err:
        _fail(str(err))
    for note in given.notes():
        console.note("topodoc diagnose", note)
    try:
        return nccl_tests_input(given.name, given.text, snapshot, topology)
    except NcclTestsParseError as err:
        _fail(f"{given.name}: {err}")


def _inputs(snapshot, logs: tuple[str, ...], analysis, nccl_tests: str | None) -> dict:
    inputs = {"hardware": snapshot.source if snapshot else None, "log": None, "nccl-tests": nccl_tests}
    if snapshot is not None and not snapshot.gpus:
        # "no findings" must not read as "healthy GPUs" on a machine whose GPUs were never seen
        inputs["hardware"] += " (no NVIDIA GPU found: the GPU, NVLink and GPU-NIC rules had nothing to check)"
    if analysis is not None:
        s = analysis.summary
        facts = [
            f"{s.nranks} ranks" if s.nranks else "",
            f"{s.nnodes} node(s)" if s.nnodes else "",
            f"NCCL {s.nccl_version}" if s.nccl_version else "",
            f"transport {s.transport}" if s.transport else "",
        ]
        inputs["log"] = ", ".join(logs) + (f" ({', '.join(f for f in facts if f)})" if any(facts) else "")
    return inputs


def _emit(report, inputs: dict, as_json: bool) -> None:
    from topodoc.report.color import use_color
    from topodoc.report.diagnose import json_data, render_text
    from topodoc.report.document import dumps

    if as_json:
        click.echo(dumps("topodoc.diagnose", json_data(report, inputs)))
    else:
        from topodoc.report.console import quiet

        click.echo(render_text(report, inputs, color=use_color(), quiet=quiet()), nl=False)
