"""The shipped alert rules: `promtool test rules` (the first Xid/AER/removal/NVLink/IB error fires, a dead
or absent agent fires), `promtool check metrics` on a real scrape, and every alert's runbook. promtool comes
with Debian's `prometheus` package; without it the promtool tests skip, unless TOPODOC_REQUIRE_PROMTOOL=1
(set by .ci/run, which installs it) makes its absence a failure."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from topodoc.rules import registry

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "deploy" / "prometheus" / "topodoc-alerts.yaml"
PROMTOOL = shutil.which("promtool")


def _promtool() -> str:
    if PROMTOOL is None:
        if os.environ.get("TOPODOC_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is required here (TOPODOC_REQUIRE_PROMTOOL=1) but not installed")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return PROMTOOL


def test_promtool_unit_tests_pass():
    out = subprocess.run([_promtool(), "test", "rules", "topodoc-alerts.test.yaml"], cwd=RULES.parent,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_checks_the_rules_and_a_real_agents_metrics(tmp_path):
    """A real agent (subprocess) replaying an Xid 79, an AER line and a device removal on the degraded
    health example writes its metrics textfile; promtool accepts it."""
    import sys

    promtool = _promtool()
    assert subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True).returncode == 0
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"source": "kmsg", "line": "NVRM: Xid (PCI:0000:3a:00): 79, pid=1, GPU has fallen off the bus."}\n'
        '{"source": "udev", "action": "remove", "subsystem": "pci", "device": "0000:3a:00.0"}\n')
    argv = [sys.executable, "-m", "topodoc", "agent", "--from", "example:hgx-h100-degraded-health",
            "--listen", "off", "--interval", "1", "--cycles", "2", "--replay-events", str(events),
            "--textfile", str(tmp_path)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "topodoc.prom").read_bytes()
    assert b'topodoc_kernel_events_total{code="79",device="0000:3a:00.0",kind="xid"} 1.0' in text
    assert b"topodoc_gpu_row_remap_pending{" in text
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert out.returncode == 0, (out.stdout + out.stderr).decode()


def test_every_alert_has_a_runbook_naming_a_rule_or_the_agent_doc():
    text = RULES.read_text()
    alerts = re.findall(r"- alert: (\w+)", text)
    runbooks = re.findall(r'runbook: "([^"]+)"', text)
    assert alerts and len(runbooks) == len(alerts)
    ids = {r.id for r in registry.RULES}
    for runbook in runbooks:
        named = re.fullmatch(r"topodoc explain (.+)", runbook)
        if named:
            assert named[1] in ids or named[1] == "{{ $labels.rule }}", runbook
        else:
            assert runbook.startswith("docs/AGENT.md"), runbook


def test_the_documented_joins_with_dcgm_exporter_series_work():
    out = subprocess.run([_promtool(), "test", "rules", "dcgm-join.test.yaml"],
                         cwd=REPO / "tests" / "prometheus", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = (REPO / "docs" / "AGENT.md").read_text()
    rules = (REPO / "tests" / "prometheus" / "dcgm-join.rules.yaml").read_text()
    for expr in re.findall(r"expr: (.+)", rules):
        assert f"`{expr.strip()}`" in doc.replace("\n", " "), expr
