"""Every log finding `topodoc logs` reports reaches `topodoc diagnose` (issue 12: facts parsed and then
never reported are a bug): over the real-log corpus and the log goldens, every error line, benign line
the catalogue explains as a failure, and cross-line inference the analyzer makes is cited by a finding."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_log_golden import cases

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze
from topodoc.rules.engine import Facts, evaluate
from topodoc.rules.registry import RULES

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log")) + cases()


def _cited(report) -> set[tuple[str, int]]:
    """(file, line) of every log line a finding cites (rules' evidence: ``where`` is ``file:line``)."""
    lines = set()
    for finding in report.findings:
        for ev in finding.evidence:
            file, _, line = ev.where.rpartition(":")
            if ev.source == "log" and line.isdigit():
                lines.add((file, int(line)))
    return lines


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_every_error_and_inference_reaches_a_finding(log):
    analysis = analyze([str(log)], catalogue.scan_literals())
    report = evaluate(Facts(logs=analysis), RULES)
    cited = _cited(report)
    missing = [(e.category, e.line, e.text[:90]) for e in analysis.errors if (e.file, e.line) not in cited]
    assert not missing, f"errors no diagnose finding cites: {missing}"
    for item in analysis.inferences:
        if item.evidence and item.kind != "single_node":  # a node count (the summary's), not a finding
            assert any((ev.file, ev.line) in cited for ev in item.evidence), (item.kind, item.statement[:120])
