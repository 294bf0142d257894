"""`topodoc diagnose`, `topodoc rules`, `topodoc explain`: goldens on the host corpus, and the CLI."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from topodoc.probe.source import load_snapshot
from topodoc.rules.engine import Facts, Severity, evaluate
from topodoc.rules.registry import RULES
from topodoc.topology import derive

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "fixtures" / "hosts"
CASES = ROOT / "fixtures" / "rules"
GOLDENS = sorted(p.parent.name for p in HOSTS.glob("*/expected-findings.json"))
HEALTHY_SXM = ("dgx-a100", "hgx-h100-8x400g-ib")


BENIGN = {"nccl-benign-lines"}  # info findings that say a log line is harmless


def run(*args: str, real: bool = False):
    """``topodoc ARGS`` in this process, or as a real subprocess from the repository root."""
    if real:
        return subprocess.run(
            [sys.executable, "-m", "topodoc", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
        )
    return run_cli(*args)


@functools.cache
def host_report(name: str):
    from topodoc.probe.extras import recorded_kernel_events

    recording = str(HOSTS / name / "recording.tar.gz")
    snapshot = load_snapshot(recording)
    kernel = recorded_kernel_events(recording)  # what diagnose --from reads besides the snapshot
    return evaluate(Facts(snapshot=snapshot, topology=derive(snapshot), kernel=kernel), RULES)


def test_every_recorded_host_has_a_golden():
    recorded = sorted(p.parent.name for p in HOSTS.glob("*/recording.tar.gz"))
    assert recorded and recorded == GOLDENS


@pytest.mark.parametrize("name", GOLDENS)
def test_host_yields_exactly_its_expected_rules(name):
    expected = json.loads((HOSTS / name / "expected-findings.json").read_text())["findings"]
    report = host_report(name)
    worst: dict[str, str] = {}
    for finding in report.findings:
        if finding.rule not in worst or finding.severity.rank > Severity(worst[finding.rule]).rank:
            worst[finding.rule] = finding.severity.value
    assert worst == expected
    assert report.errors == ()


@pytest.mark.parametrize("name", HEALTHY_SXM)
def test_healthy_dgx_and_hgx_have_nothing_at_warning_or_above(name):
    assert [f for f in host_report(name).findings if f.severity.rank >= Severity.WARNING.rank] == []


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("dgx-a100-degraded-gpu-x8", "pcie-width-reduced"),
        ("dgx-a100-degraded-gpu-gen3", "pcie-speed-reduced"),
        ("dgx-a100-degraded-nvlink-down", "nvlink-link-down"),
        ("dgx-a100-degraded-no-peermem", "gdr-prereq-missing"),
        ("dgx-a100-degraded-acs", "acs-on-p2p-path"),
        ("dgx-a100-degraded-ib-port-down", "ib-port-down"),
        ("dgx-a100-degraded-nic-other-socket", "gpu-nic-numa-mismatch"),
    ],
)
def test_each_degraded_dgx_is_caught_by_the_rule_for_its_fault(name, rule):
    assert rule in {f.rule for f in host_report(name).findings}


def test_diagnose_recording_plus_log_json_and_exit_code():
    log = CASES / "nccl-gdr-not-used" / "fire.log"
    out = run("diagnose", "--from", "example:dgx-a100-degraded-no-peermem", "--log", str(log), "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert {f["rule"] for f in data["findings"]} - BENIGN == {"gdr-prereq-missing", "nccl-gdr-not-used"}
    first = data["findings"][0]
    assert set(first) >= {"rule", "severity", "confidence", "subject", "message", "evidence", "fix"}
    assert first["severity"] == "error" and first["fix"].startswith("sudo modprobe nvidia-peermem")
    assert all(set(s) == {"rule", "reason"} for s in data["skipped"])
    gdr = next(f for f in data["findings"] if f["rule"] == "nccl-gdr-not-used")
    assert gdr["evidence"][0]["where"].endswith("fire.log:12")


def test_diagnose_text_fits_one_screen_worst_first_with_fixes():
    log = CASES / "nccl-socket-fallback" / "fire.log"
    out = run("diagnose", "--from", "example:dgx-a100-degraded-ib-port-down", "--log", str(log))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert len(lines) <= 45
    assert lines[1].startswith("3 errors")
    rules = [line.split()[1] for line in lines if line.startswith("ERROR")]
    assert rules == ["ib-port-down", "nccl-socket-fallback", "socket-despite-active-ib"]
    errors = "\n\n".join(b for b in out.stdout.split("\n\n") if b.startswith("ERROR"))
    assert errors.count("  fix: ") == 3 and errors.count("  evidence: ") == 6


def test_fail_on_threshold_and_clean_exit():
    assert run("diagnose", "--from", "example:dgx-a100", "--fail-on", "info").returncode == 0
    assert run("diagnose", "--from", "example:8xgpu-2s-pcie-switches", "--fail-on", "warning").returncode == 1
    assert run("diagnose", "--from", "example:8xgpu-2s-pcie-switches", "--fail-on", "error").returncode == 0


def test_log_only_diagnosis_skips_hardware_rules(tmp_path):
    out = run("diagnose", "--log", str(CASES / "nccl-version-mismatch" / "fire.log"), "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["inputs"]["hardware"] is None
    assert [f["rule"] for f in data["findings"] if f["rule"] not in BENIGN] == ["nccl-version-mismatch"]
    reasons = {s["rule"]: s["reason"] for s in data["skipped"]}
    assert reasons["pcie-width-reduced"].startswith("needs a hardware snapshot")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("diagnose", "--from", "/nonexistent/rec.tar.gz"), "no such recording"),
        (("diagnose", "--from", "example:no-such-box"), "no bundled example"),
        (("diagnose", "--log", "/nonexistent.log"), "cannot read"),
        (("explain", "no-such-rule"), "no rule named"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    out = run(*args, real=True)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_non_nccl_log_is_rejected(tmp_path):
    text = tmp_path / "app.log"
    text.write_text("epoch 1 loss 2.31\nepoch 2 loss 1.97\n")
    out = run("diagnose", "--log", str(text))
    assert out.returncode == 2 and "no NCCL lines found" in out.stderr


def test_rules_json_lists_every_rule():
    out = run("rules", "--json", real=True)
    data = json.loads(out.stdout)["rules"]
    assert out.returncode == 0
    assert [r["id"] for r in data] == [r.id for r in RULES]
    assert all({"id", "severity", "title"} <= set(r) for r in data)
    assert run("rules").stdout.splitlines()[0].split()[:2] == ["RULE", "SEVERITY"]


def test_explain_prints_the_doc():
    out = run("explain", "acs-on-p2p-path")
    assert out.returncode == 0
    for heading in ("## What it checks", "## Why it matters", "## How to fix", "## Example"):
        assert heading in out.stdout
    assert "ECAP_ACS+0x6.w=0000:000c" in out.stdout


@functools.cache
def dgx_snapshot():
    return load_snapshot(str(HOSTS / "dgx-a100" / "recording.tar.gz"))


@pytest.mark.parametrize("log", sorted(p.name for p in (ROOT / "fixtures" / "logs").glob("*.log")))
def test_every_log_fixture_diagnoses_without_internal_errors(log):
    from topodoc.parsers.nccl_log import analyze

    analysis = analyze([str(ROOT / "fixtures" / "logs" / log)])
    dgx = dgx_snapshot()
    for facts in (Facts(logs=analysis), Facts(snapshot=dgx, logs=analysis)):
        assert evaluate(facts, RULES).errors == ()


def test_plugin_failure_log_names_the_fallback():
    from topodoc.parsers.nccl_log import analyze

    analysis = analyze([str(ROOT / "fixtures" / "logs" / "plugin-failed-socket-fallback.log")])
    rules = {f.rule: f for f in evaluate(Facts(logs=analysis), RULES).findings}
    # "Failed to open libibverbs" on a two-node job that ended on sockets: a reason of its own
    assert set(rules) == {"nccl-net-plugin-failed", "nccl-socket-fallback", "nccl-no-net-device"}
    assert rules["nccl-socket-fallback"].severity is Severity.ERROR


def test_a_machine_without_gpus_says_so_instead_of_a_bare_no_findings():
    result = run_cli("diagnose", "--from", "example:vm-1s-virtio-nogpu")
    assert "(no NVIDIA GPU found: the GPU, NVLink and GPU-NIC rules had nothing to check)" in result.stdout
