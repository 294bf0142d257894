"""nccl-tests rules: busbw against the bandwidth model, wrong results, truncated runs; diagnose e2e.

A case is ``fixtures/rules/<rule-id>/<case>.txt`` (nccl-tests output) with an optional ``<case>.json``
snapshot (``base.json`` otherwise: half an HGX H100, 4 GPUs on NVSwitch, 4 NDR NICs) and ``<case>.log``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc import codec
from topodoc.facts import nccl_tests_input
from topodoc.parsers.nccl_log import analyze
from topodoc.rules import registry
from topodoc.rules.bandwidth import NcclTestsInput
from topodoc.rules.engine import Facts, Severity, evaluate

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "rules"
NCCL_TESTS = ROOT / "fixtures" / "nccl_tests"
BUSBW, WRONG = "nccl-tests-busbw-below-expected", "nccl-tests-wrong-results"
TRUNCATED = "nccl-tests-truncated"
OURS = (BUSBW, WRONG, TRUNCATED)


@cache
def base():
    return codec.load((CASES / "base.json").read_text())


def load(rule_id: str, case: str) -> Facts:
    folder = CASES / rule_id
    snap_file = folder / f"{case}.json"
    snapshot = codec.load(snap_file.read_text()) if snap_file.exists() else base()
    log = folder / f"{case}.log"
    text = folder / f"{case}.txt"
    return Facts(
        snapshot=snapshot,
        logs=analyze([str(log)]) if log.exists() else None,
        nccl_tests=nccl_tests_input(str(text), text.read_text(), snapshot),
    )


def run_rule(rule_id: str, case: str):
    report = evaluate(load(rule_id, case), [registry.get(rule_id)])
    assert report.errors == () and report.skipped == (), (report.errors, report.skipped)
    return report.findings


def our_cases(kind: str) -> list[tuple[str, str]]:
    return [(r, p.stem) for r in OURS for p in sorted((CASES / r).glob(f"{kind}*.txt"))]


@pytest.mark.parametrize(("rule_id", "case"), our_cases("fire"))
def test_fires_with_file_line_evidence(rule_id, case):
    findings = run_rule(rule_id, case)
    assert len(findings) == 1 and findings[0].fix
    lines = (CASES / rule_id / f"{case}.txt").read_text().splitlines()
    first = findings[0].evidence[0]
    path, line = first.where.rsplit(":", 1)
    assert path.endswith(f"{case}.txt") and first.source == "nccl-tests"
    assert first.value.split()[0] in lines[int(line) - 1]  # the row's size is on the cited line


@pytest.mark.parametrize(("rule_id", "case"), our_cases("clean"))
def test_quiet_on_clean_cases(rule_id, case):
    assert run_rule(rule_id, case) == ()


@pytest.mark.parametrize(
    ("case", "severity", "limiter"),
    [
        ("fire", Severity.ERROR, "unknown to topodoc"),
        ("fire-below", Severity.WARNING, "unknown to topodoc"),
        ("fire-socket", Severity.ERROR, "socket transport (NET/Socket)"),
        ("fire-gdr-off", Severity.ERROR, "GPUDirect RDMA unavailable"),
    ],
)
def test_busbw_severity_percentage_and_likely_limiter(case, severity, limiter):
    (finding,) = run_rule(BUSBW, case)
    assert finding.severity == severity
    assert f"Likely limiter: {limiter}:" in finding.message
    assert " % of the " in finding.message and "GB/s" in finding.message


def test_socket_limiter_cites_the_log_and_inter_node_model():
    (finding,) = run_rule(BUSBW, "fire-socket")
    assert "1.5 % of the 200 GB/s" in finding.message and "inter-node ring" in finding.message
    assert any(e.where.startswith(str(CASES / BUSBW / "fire-socket.log")) and "NET/Socket" in e.value
               for e in finding.evidence)
    assert "NCCL_IB_HCA" in finding.fix


def test_without_hardware_the_busbw_rule_is_skipped_with_the_reason():
    text = (CASES / BUSBW / "fire.txt").read_text()
    facts = Facts(nccl_tests=nccl_tests_input("fire.txt", text, None))
    report = evaluate(facts, [registry.get(r) for r in OURS])
    assert [(s.rule, s.reason) for s in report.skipped] == [
        (BUSBW, "needs a hardware snapshot (live, or --from RECORDING)")
    ]
    assert report.findings == () and report.errors == ()


def test_small_messages_only_are_not_judged():
    text = (CASES / BUSBW / "fire.txt").read_text()
    data = nccl_tests_input("fire.txt", text, base())
    small = dataclasses.replace(data, run=dataclasses.replace(data.run, rows=data.run.rows[:6]))
    report = evaluate(Facts(snapshot=base(), nccl_tests=small), [registry.get(BUSBW)])
    assert report.findings == () and "latency" in report.skipped[0].reason


def test_comparisons_without_the_run_are_skipped_not_an_internal_error():
    data = load(BUSBW, "fire").nccl_tests
    report = evaluate(Facts(snapshot=base(), nccl_tests=data.comparisons), [registry.get(r) for r in OURS])
    assert report.errors == () and len(report.skipped) == 3


def test_run_from_other_gpus_is_reported_with_low_confidence():
    data = load(BUSBW, "fire").nccl_tests
    devices = tuple(dataclasses.replace(d, name="Tesla V100-SXM2-32GB") for d in data.run.devices)
    other = dataclasses.replace(data, run=dataclasses.replace(data.run, devices=devices))
    (finding,) = evaluate(Facts(snapshot=base(), nccl_tests=other), [registry.get(BUSBW)]).findings
    assert finding.confidence == 0.4


def test_wrong_results_counts_and_footer():
    (finding,) = run_rule(WRONG, "fire")
    assert finding.message.startswith("22791 wrong element(s) in 4 of 14 sizes (1 GiB to 8 GiB)")
    assert finding.evidence[-1].value == "Out of bounds values : 22791 FAILED"


def test_old_error_column_is_not_a_count():
    text = (NCCL_TESTS / "all_reduce-old-error-column.txt").read_text()
    facts = Facts(nccl_tests=nccl_tests_input("old.txt", text))
    assert evaluate(facts, [registry.get(WRONG)]).findings == ()


def test_truncated_names_the_size_in_flight_and_the_failure():
    (crash,) = run_rule(TRUNCATED, "fire")
    assert "while running 4 GiB after 12 sizes (last complete: 2 GiB)" in crash.message
    assert "Test NCCL failure common.cu:1288" in crash.message
    (hang,) = run_rule(TRUNCATED, "fire-hang")
    assert "no failure line" in hang.message and "DUE TO TIME LIMIT" in hang.evidence[-1].value


@cache
def clean_input() -> NcclTestsInput:
    return load(BUSBW, "clean").nccl_tests


@settings(max_examples=40, deadline=None)
@given(st.floats(0.02, 1.3))
def test_severity_follows_the_percentage_of_the_model(scale):
    """Scaling every busbw of a healthy run: warning below 80 %, error below 50 %, nothing above."""
    data = clean_input()
    comparisons = tuple(
        dataclasses.replace(c, measured_busbw_gbps=c.measured_busbw_gbps * scale,
                            percent=round(c.percent * scale, 1),
                            verdict=_verdict(round(c.percent * scale, 1)))
        for c in data.comparisons
    )
    facts = Facts(snapshot=base(), nccl_tests=dataclasses.replace(data, comparisons=comparisons))
    findings = evaluate(facts, [registry.get(BUSBW)]).findings
    percent = max(c.percent for c in comparisons)
    expected = [] if percent >= 80 else [Severity.ERROR if percent < 50 else Severity.WARNING]
    assert [f.severity for f in findings] == expected


def _verdict(percent: float) -> str:
    return "above" if percent > 110 else "ok" if percent >= 80 else "below" if percent >= 50 else "far-below"


# --- end to end: topodoc diagnose --from example:dgx-a100 --nccl-tests FILE ------------------------------


def diagnose(*args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "topodoc", "diagnose", "--from", "example:dgx-a100", "--json", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.stderr == "" and proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def ours(data: dict) -> list[dict]:
    return [f for f in data["findings"] if f["rule"] in OURS]


def test_diagnose_healthy_nvswitch_run_has_no_bandwidth_finding():
    code, data = diagnose("--nccl-tests", str(NCCL_TESTS / "all_reduce-8xa100-nvswitch.txt"))
    assert code == 0 and ours(data) == []
    assert not [s for s in data["skipped"] if s["rule"] in OURS]


def test_diagnose_p2p_disabled_run_is_far_below_and_the_log_names_the_limiter():
    path = str(NCCL_TESTS / "all_reduce-8xa100-p2p-disabled.txt")
    code, data = diagnose("--nccl-tests", path, "--log", path)
    (finding,) = ours(data)
    assert code == 1 and finding["rule"] == BUSBW and finding["severity"] == "error"
    assert "of the 240 GB/s this machine should deliver" in finding["message"]
    assert "Likely limiter: NCCL_P2P_DISABLE=1: the environment switches off P2P" in finding["message"]
    assert "SHM instead of P2P" in finding["message"]
    where, line = finding["evidence"][0]["where"].rsplit(":", 1)
    size = finding["evidence"][0]["value"].split()[0]
    assert where == path and Path(path).read_text().splitlines()[int(line) - 1].split()[0] == size
