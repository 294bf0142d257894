"""The facts layer: a command's inputs turned into what the rules read (``rules.engine.Facts``).

Rules judge and import no parser; parsing and model building for them happens here, called by the
commands. Today: an nccl-tests file -> :class:`~topodoc.rules.bandwidth.NcclTestsInput` (the parsed run,
its marker lines, and its comparison with this machine's bandwidth model).
"""

from __future__ import annotations

from topodoc.model import NcclTestsRun, Snapshot
from topodoc.rules.bandwidth import NcclTestsInput


def nccl_tests_input(path: str, text: str, snapshot: Snapshot | None = None, topology=None) -> NcclTestsInput:
    """Parse ``text`` (raises ``NcclTestsParseError``) and compare it with ``snapshot``'s bandwidth model."""
    from topodoc.parsers.nccl_tests import parse

    run = parse(text)
    comparisons, reason = _comparisons(run, snapshot, topology)
    footer, failures = _marker_lines(text, run)
    return NcclTestsInput(path, run, comparisons, reason, footer, failures, _stop_line(text, run))


def _comparisons(run: NcclTestsRun, snapshot: Snapshot | None, topology) -> tuple[tuple | None, str]:
    if snapshot is None:
        return None, "no hardware snapshot to compare with (give --from REC, or run on the machine)"
    from topodoc.bandwidth.compare import compare_run
    from topodoc.bandwidth.model import build

    try:
        if topology is None:
            from topodoc.topology import derive

            topology = derive(snapshot)
        return compare_run(run, build(topology, snapshot)), ""
    except Exception as err:  # a model bug must not hide the wrong-results and truncation rules
        return None, f"the bandwidth model could not be built ({type(err).__name__}: {err})"


def _marker_lines(text: str, run: NcclTestsRun) -> tuple[int | None, tuple[int, ...]]:
    """Line numbers of the first run's footer and of its failure lines (the parser keeps only the text)."""
    first_row = run.rows[0].line if run.rows else 0
    footer, failures = None, []
    for number, line in enumerate(text.splitlines(), start=1):
        if number < first_row:
            continue
        if footer is None and "Avg bus bandwidth" in line:
            footer = number
        if any(f and f in line for f in run.failures):
            failures.append(number)
    return footer, tuple(failures)


def _stop_line(text: str, run: NcclTestsRun) -> tuple[int, str] | None:
    last_row = max((r.line for r in run.rows), default=0)
    after = [n for n in run.unparsed_lines if n > last_row]
    return (after[0], text.splitlines()[after[0] - 1].strip()) if after else None


