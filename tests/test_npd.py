"""`topodoc npd`: node-problem-detector's custom-plugin contract (one line, exit 0 OK / 1 NonOK / 2 Unknown)
on healthy and degraded examples, and the shipped custom-plugin-monitor config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from topodoc.commands.npd import FAMILIES
from topodoc.rules import registry

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
CONFIG = DEPLOY / "kubernetes" / "npd" / "topodoc-plugin-monitor.json"
HEALTHY, DEGRADED = "example:hgx-h100-8x400g-ib", "example:hgx-h100-degraded-health"


def _run(*args):
    result = run_cli("-q", "npd", *args)
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and not result.stderr, (result.stdout, result.stderr)
    return result.returncode, lines[0]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_is_ok_on_the_healthy_example(family):
    code, line = _run("--family", family, "--from", HEALTHY)
    assert code == 0 and line.startswith(f"{family}: ok"), line


@pytest.mark.parametrize(("family", "fail_on", "rule"), [
    ("gpu-memory", "error", "gpu-ecc-uncorrected"), ("gpu-thermal", "warning", "gpu-clock-slowdown"),
    ("nvlink", "warning", "nvlink-errors"), ("network", "warning", "ib-port-errors")])
def test_degraded_example_is_non_ok_with_the_worst_finding_in_80_characters(family, fail_on, rule):
    code, line = _run("--family", family, "--fail-on", fail_on, "--from", DEGRADED)
    assert code == 1 and line.startswith(rule) and len(line) <= 80, line


def test_warnings_below_fail_on_stay_ok_and_say_so():
    code, line = _run("--family", "gpu-thermal", "--from", DEGRADED)
    assert code == 0 and "1 below error" in line


def test_unknown_when_nvml_is_absent_or_the_source_cannot_be_read():
    code, line = _run("--family", "gpu-memory", "--from", "example:vm-1s-virtio-nogpu")
    assert code == 2 and "NVML not available" in line
    code, line = _run("--family", "pcie", "--from", "nosuch.tar.gz")
    assert code == 2 and line.startswith("unknown: ")


def test_the_monitor_config_runs_this_command_for_every_family():
    config = json.loads(CONFIG.read_text())
    assert config["plugin"] == "custom" and config["pluginConfig"]["max_output_length"] == 80
    conditions = {c["type"] for c in config["conditions"]}
    families = set()
    for rule in config["rules"]:
        assert rule["type"] == "permanent" and rule["condition"] in conditions
        assert rule["path"].endswith("/topodoc") and rule["args"][:2] == ["-q", "npd"]
        family = next(a.split("=", 1)[1] for a in rule["args"] if a.startswith("--family="))
        families.add(family)
        code, line = _run(*rule["args"][2:], "--from", HEALTHY)  # the configured arguments work as given
        assert code == 0, line
    assert families == set(FAMILIES)
    assert all(registry.get(rule_id) for ids in FAMILIES.values() for rule_id in ids)


def test_a_real_process_answers_with_the_exit_code_npd_reads():
    from conftest import run_cli_process

    out = run_cli_process("npd", "--family", "gpu-memory", "--from", DEGRADED)
    assert out.returncode == 1 and out.stdout.startswith("gpu-ecc-uncorrected GPU2")
    assert out.stdout.count("\n") == 1
