"""nccl-tests rules: measured busbw against the bandwidth model, wrong results, and runs cut short.

``topodoc diagnose --nccl-tests FILE`` hands the rules an :class:`NcclTestsInput` (built by
:func:`topodoc.facts.nccl_tests_input`; rules import no parser): the parsed run, the
file it came from (evidence is ``file:line``), and the :func:`~topodoc.bandwidth.compare.compare_run`
comparisons against this machine's bandwidth model (``None`` without hardware). The busbw rule names the
likely limiter from what the model cannot see: the transport, GPUDirect RDMA and environment overrides
in an NCCL log given with ``--log``, and the NICs and GDR prerequisites in the snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topodoc.model import NcclTestsRow, NcclTestsRun, Snapshot
from topodoc.rules.engine import Evidence, Hit, MissingFacts, Severity, rule
from topodoc.rules.limiters import likely_causes

if TYPE_CHECKING:  # annotations only: a diagnose without nccl-tests output never loads the bandwidth model
    from topodoc.bandwidth.compare import Comparison

JUDGED_BYTES = 128 * 2**20  # below this busbw is latency-bound: too early to judge bandwidth
FULL_BYTES = 2**30  # NCCL reaches its plateau by about 1 GiB; a run that stops earlier is judged softly
WRONG_ROWS_SHOWN = 3
NO_FAILURE = "; no failure line: a hang stopped by a time limit, or a lost rank"


@dataclass(frozen=True)
class NcclTestsInput:
    """What the nccl-tests rules read: the run, where it came from, and how it compares with the model."""

    path: str
    run: NcclTestsRun
    comparisons: tuple[Comparison, ...] | None = None  # None: no model to compare with
    no_comparison: str = ""  # why ``comparisons`` is None
    footer_line: int | None = None  # 1-based line of "# Avg bus bandwidth"
    failure_lines: tuple[int, ...] = ()  # 1-based lines of "Test NCCL failure" and friends
    stop_line: tuple[int, str] | None = None  # the first unknown line after the last row ("CANCELLED ...")


def _input(nccl_tests) -> NcclTestsInput:
    if not isinstance(nccl_tests, NcclTestsInput):
        raise MissingFacts("diagnose passed nccl-tests comparisons without the run (needs NcclTestsInput)")
    return nccl_tests


def _subject(run: NcclTestsRun) -> str:
    hosts = sorted({d.host for d in run.devices if d.host})
    where = f" on {', '.join(hosts[:3])}" + (" ..." if len(hosts) > 3 else "") if hosts else ""
    ranks = f", {run.nranks} ranks" if run.nranks else ""
    return f"{run.program or run.collective or 'nccl-tests'}{ranks}{where}"


def _size(size: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} B"


def _row_value(row: NcclTestsRow) -> str:
    halves = [
        f"{name} busbw {half.busbw:g} GB/s, #wrong {half.wrong if half.wrong is not None else 'N/A'}"
        for name, half in (("out-of-place", row.out_of_place), ("in-place", row.in_place))
        if half is not None and half.busbw is not None
    ]
    return f"{row.size} B ({_size(row.size)}): " + "; ".join(halves)


def _row_evidence(data: NcclTestsInput, row: NcclTestsRow) -> Evidence:
    return Evidence("nccl-tests", f"{data.path}:{row.line}", _row_value(row))


def _judged(data: NcclTestsInput) -> tuple[Comparison, ...]:
    if data.comparisons is None:
        raise MissingFacts(data.no_comparison or "no bandwidth model to compare with")
    largest = max((r.size for r in data.run.rows), default=0)
    if largest < JUDGED_BYTES:
        raise MissingFacts(
            f"the largest message is {_size(largest)}: below {_size(JUDGED_BYTES)} busbw measures latency, "
            "not bandwidth (rerun nccl-tests with -e 8G)"
        )
    if not data.comparisons:
        raise MissingFacts(
            f"no busbw expectation for {data.run.collective or 'an unnamed collective'} on this machine "
            "(a single GPU, or a collective the model does not bound)"
        )
    return data.comparisons


@rule(
    "nccl-tests-busbw-below-expected", "warning", ("bandwidth", "nccl-tests", "performance"),
    reads=("placement",),
    title="nccl-tests bus bandwidth below what this machine's links should deliver",
    fix="run with NCCL_DEBUG=INFO and check the transport (Socket, SHM instead of P2P), GPUDirect RDMA, "
    "NCCL_ALGO/NCCL_PROTO/NCCL_NVLS_ENABLE overrides, PCIe links trained down and NIC port rates",
)
def busbw_below_expected(nccl_tests: NcclTestsInput, snapshot: Snapshot, logs=None) -> Iterator[Hit]:
    data = _input(nccl_tests)
    best = max(_judged(data), key=lambda c: c.percent)
    if best.verdict not in ("below", "far-below"):
        return
    causes = likely_causes(snapshot, logs, data.run, best)
    lead = causes[0]
    also = [c.limiter for c in causes[1:]]
    yield Hit(
        subject=_subject(data.run),
        message=f"{data.run.collective or 'collective'} busbw {best.measured_busbw_gbps:g} GB/s at "
        f"{_size(best.at_size)} is {best.percent:g} % of the {best.expected_busbw_gbps:g} GB/s this machine "
        f"should deliver ({best.scope} {best.algorithm}, bottleneck {best.limiter}). Likely limiter: "
        f"{lead.limiter}: {lead.reason}" + (f" (also: {'; '.join(also)})" if also else ""),
        evidence=_busbw_evidence(data, best) + tuple(ev for c in causes for ev in c.evidence),
        fix="; ".join(dict.fromkeys(c.fix for c in causes)),
        severity=Severity.ERROR if best.verdict == "far-below" else Severity.WARNING,
        confidence=_confidence(data, snapshot, best),
    )


def _busbw_evidence(data: NcclTestsInput, best: Comparison) -> tuple[Evidence, ...]:
    evidence = [_row_evidence(data, row) for row in data.run.rows if row.size == best.at_size][:1]
    if data.footer_line and data.run.avg_bus_bandwidth is not None:
        avg = f"Avg bus bandwidth : {data.run.avg_bus_bandwidth:g} (all sizes, small ones included)"
        evidence.append(Evidence("nccl-tests", f"{data.path}:{data.footer_line}", avg))
    model = f"{best.expected_busbw_gbps:g} GB/s ({best.scope} {best.algorithm}): {best.limiter}"
    evidence.append(Evidence("derived", "bandwidth model (topodoc bandwidth)", model))
    return tuple(evidence)


def _confidence(data: NcclTestsInput, snapshot: Snapshot, best: Comparison) -> float:
    """Lower when the run stopped short of the plateau, used part of the box, or ran on other GPUs."""
    run, confidence = data.run, 1.0
    if max(r.size for r in run.rows) < FULL_BYTES:
        confidence = min(confidence, 0.7)
    gpus = len(snapshot.gpus)
    if run.nranks and gpus and run.nranks // (run.nodes or 1) < gpus and best.scope == "intra-node":
        confidence = min(confidence, 0.6)
    names = {_model_name(d.name) for d in run.devices if d.name}
    if names and not names & {_model_name(g.name) for g in snapshot.gpus if g.name}:
        confidence = min(confidence, 0.4)
    return confidence


def _model_name(name: str) -> str:
    return re.sub(r"^NVIDIA\s+", "", name.strip()).lower()


@rule(
    "nccl-tests-wrong-results", "error", ("nccl-tests", "hardware", "correctness"),
    title="nccl-tests found wrong results (data corruption)",
    fix="rerun with -c 1 on each GPU subset to isolate the bad GPU or link; check `nvidia-smi -q -d ECC`, "
    "`dmesg | grep -i xid` and `nvidia-smi nvlink -e`; try NCCL_PROTO=Simple to rule out LL/LL128",
)
def wrong_results(nccl_tests: NcclTestsInput) -> Iterator[Hit]:
    data = _input(nccl_tests)
    run = data.run
    bad = [row for row in run.rows if _wrong(row)] if run.wrong_column == "#wrong" else []
    if not bad and not run.out_of_bounds:
        return
    total = sum(_wrong(row) for row in bad)
    sizes = f" in {len(bad)} of {len(run.rows)} sizes ({_size(bad[0].size)} to {_size(bad[-1].size)})"
    sizes = sizes if bad else ""
    oob = f"; the footer reports {run.out_of_bounds} out-of-bounds values" if run.out_of_bounds else ""
    evidence = [_row_evidence(data, row) for row in bad[:WRONG_ROWS_SHOWN]]
    if data.footer_line:
        verdict = "FAILED" if run.out_of_bounds else "OK"
        where = f"{data.path}:{data.footer_line - 1}"
        footer = f"Out of bounds values : {run.out_of_bounds} {verdict}"
        evidence.append(Evidence("nccl-tests", where, footer))
    yield Hit(
        subject=_subject(run),
        message=f"{total or run.out_of_bounds} wrong element(s){sizes}{oob}: the collective returned data "
        "that differs from the expected result, so training on these GPUs can silently diverge or NaN",
        evidence=tuple(evidence)
        or (Evidence("nccl-tests", data.path, f"out of bounds {run.out_of_bounds}"),),
    )


def _wrong(row: NcclTestsRow) -> int:
    return sum(int(h.wrong) for h in (row.out_of_place, row.in_place) if h is not None and h.wrong)


@rule(
    "nccl-tests-truncated", "error", ("nccl-tests", "reliability"),
    title="nccl-tests run ended early (crash, hang or time limit)",
    fix="rerun the failing size alone (-b SIZE -e SIZE) with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and "
    "read the WARN lines (topodoc logs); check GPU memory for large sizes and `dmesg` for Xid errors",
)
def truncated(nccl_tests: NcclTestsInput) -> Iterator[Hit]:
    data = _input(nccl_tests)
    run = data.run
    if run.complete and not run.failures:
        return
    last = max(run.rows, key=lambda r: r.line) if run.rows else None
    done = f"after {len(run.rows)} sizes (last complete: {_size(last.size)})" if last else "before any size"
    in_flight = next((m for m in map(_UNFINISHED.search, run.failures) if m), None)
    during = f" while running {_size(int(in_flight[1]))}" if in_flight else ""
    maxbytes = run.params.get("maxBytes", "")
    planned = f" of a run planned up to {_size(int(maxbytes))}" if maxbytes.isdigit() else ""
    failures = [f for f in run.failures if not _UNFINISHED.search(f)]
    why = f"; it failed with: {failures[0]}" if failures else NO_FAILURE
    yield Hit(
        subject=_subject(run),
        message=f"the run stopped{during} {done}{planned}, with no 'Avg bus bandwidth' footer{why}. "
        "Its busbw covers only the sizes it finished",
        evidence=_truncation_evidence(data, last),
    )


_UNFINISHED = re.compile(r"the row for (\d+) bytes \(line \d+\) never completed")


def _truncation_evidence(data: NcclTestsInput, last: NcclTestsRow | None) -> tuple[Evidence, ...]:
    evidence = [_row_evidence(data, last)] if last else []
    pairs = zip(data.failure_lines, data.run.failures, strict=False)
    evidence += [Evidence("nccl-tests", f"{data.path}:{n}", text) for n, text in pairs][:2]
    if data.stop_line and not data.failure_lines:
        evidence.append(Evidence("nccl-tests", f"{data.path}:{data.stop_line[0]}", data.stop_line[1]))
    return tuple(evidence) or (Evidence("nccl-tests", data.path, "no result row, no footer"),)


RULES = (busbw_below_expected, wrong_results, truncated)
