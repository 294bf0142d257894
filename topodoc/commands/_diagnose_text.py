"""``topodoc diagnose FILE...``: text inputs recognized by content, joined into one diagnosis.

Each file is read (``-``, ``.gz``, UTF-16, CRLF, ANSI colours, launcher prefixes), its kind told by
content, and parsed; NCCL logs go to the log analyzer, nccl-tests output to the bandwidth comparison, and
every hardware text into the partial machine of :mod:`topodoc.textmachine`, on which the hardware and
joined rules run. Rules that need what no input gave are listed as skipped with what to add.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from topodoc.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from topodoc.commands.diagnose import _analyze, _compare, _fail, _snapshot, _topology
from topodoc.parsers.detect import title


def diagnose_files(files, source, logs, nccl_tests, as_json: bool, fail_on: str) -> None:
    from topodoc.rules.engine import Facts, Severity, Skipped, at_or_above, evaluate
    from topodoc.rules.registry import RULES
    from topodoc.textinputs import FACT_KINDS, HARDWARE_KINDS, InputError, read_inputs
    from topodoc.textmachine import build, cite, rules_to_skip

    if list(files).count("-") > 1:
        _fail("stdin (-) can be given once")
    try:
        inputs = read_inputs(list(files))
    except InputError as err:
        _fail(str(err))
    usable = [i for i in inputs if i.kind != "unknown" and (i.parsed is not None or i.kind == "nccl-log")]
    if not usable and not logs and not nccl_tests and not source:
        _fail("no input was recognized: " + "; ".join(f"{i.path}: {i.error}" for i in inputs))
    log_paths = tuple(dict.fromkeys(tuple(logs) + tuple(i.path for i in inputs if i.kind == "nccl-log")))
    copy = _stdin_copy(inputs) if "-" in log_paths else None
    try:
        analysis = _analyze(tuple(copy if p == "-" else p for p in log_paths)) if log_paths else None
    finally:
        if copy:
            os.unlink(copy)
    base = _snapshot(source) if source else None
    machine = build(inputs, analysis, base)
    snapshot = machine.snapshot if machine else base
    topology, broken = _topology(snapshot)
    tests = [i for i in inputs if i.kind == "nccl-tests" and i.parsed is not None]
    comparisons = _compare(nccl_tests or tests[0].path, snapshot, topology) if (nccl_tests or tests) else None
    rules = list(RULES)
    skip = rules_to_skip(machine, [r.id for r in rules]) if machine and not source else {}
    kernel = tuple((i.path, e) for i in inputs if i.kind == "dmesg" and i.parsed for e in i.parsed)
    texts = tuple((i.path, i.kind, i.parsed) for i in inputs if i.kind in FACT_KINDS and i.parsed is not None)
    facts = Facts(snapshot, topology, analysis, comparisons, kernel or None, texts or None)
    report = evaluate(facts, [r for r in rules if r.id not in skip])
    report = dataclasses.replace(
        report, rules_run=len(rules), skipped=report.skipped + tuple(Skipped(k, v) for k, v in skip.items())
    )
    if machine is not None:
        report = cite(report, machine)
    if broken:
        report = dataclasses.replace(report, errors=report.errors + (broken,))
    hardware = _hardware_line(source, machine, inputs, HARDWARE_KINDS)
    summary = {
        "hardware": hardware,
        "log": ", ".join(log_paths) or None,
        "nccl-tests": nccl_tests or (tests[0].path if tests else None),
        "kernel-log": ", ".join(dict.fromkeys(i.path for i in inputs if i.kind == "dmesg")) or None,
    }
    file_rows = [_file_row(i, inputs) for i in inputs if not i.secondary]
    notes = list(machine.notes) if machine else []
    _emit(report, summary, file_rows, notes, as_json)
    if report.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if at_or_above(report, Severity(fail_on)) else EXIT_OK)


def _stdin_copy(inputs) -> str:
    """stdin was read once for detection; the log analyzer reads this copy of it."""
    import tempfile

    text = next(i.text for i in inputs if i.path == "-")
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as handle:
        handle.write(text)
    return handle.name


def _hardware_line(source, machine, inputs, kinds) -> str | None:
    from_text = [i.path for i in inputs if i.kind in kinds and i.parsed is not None]
    if source and from_text:
        return f"{source} + the inputs ({', '.join(from_text)})"
    if source:
        return source
    if machine is None:
        return None
    gpus, nics = len(machine.snapshot.gpus), len(machine.snapshot.nics)
    return f"from the inputs ({gpus} GPU(s), {nics} NIC(s) described; this machine not probed)"


def _file_row(item, inputs) -> dict:
    row = {"path": item.path, "kind": item.kind, "taken_as": title(item.kind)}
    if item.also:
        row["also_contains"] = [title(k) for k in item.also]
        row["also_read"] = [
            k for k in item.also if any(s.secondary and s.path == item.path and s.kind == k for s in inputs)
        ]
    if item.error:
        row["note"] = item.error
    if item.damaged:
        row["damaged"] = list(item.damaged)
    return row


def _emit(report, summary: dict, files: list[dict], notes: list[str], as_json: bool) -> None:
    from topodoc.report.color import use_color
    from topodoc.report.console import quiet
    from topodoc.report.diagnose import json_data, render_text
    from topodoc.report.document import dumps

    if as_json:
        data = json_data(report, summary)
        data["inputs"]["files"] = files
        data["inputs"]["notes"] = notes
        click.echo(dumps("topodoc.diagnose", data))
        return
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
    click.echo(render_text(report, summary, color=use_color(), quiet=quiet()), nl=False)
