"""``topodoc agent`` on a bundled recording with a replayed event stream, scraped over real HTTP on
127.0.0.1; the log tail across rotation and truncation; SIGTERM on a real ``python -m topodoc agent``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import run_cli
from topodoc.agent.logtail import LogWatcher
from topodoc.agent.runner import Agent, AgentConfig
from topodoc.agent.state import FindingTracker
from topodoc.report.prometheus import METRICS
from topodoc.rules.engine import Finding, Severity

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "fixtures" / "agent" / "dgx-a100-events.jsonl"
LOGS = REPO / "fixtures" / "logs"


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _wait(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _value(samples, name: str, **labels) -> float:
    matches = [v for (n, lab), v in samples.items() if n == name and labels.items() <= dict(lab).items()]
    assert len(matches) == 1, (name, labels, len(matches))
    return matches[0]


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """The agent on example:dgx-a100 with the replayed events, until the module's tests are done."""
    out = tmp_path_factory.mktemp("agent")
    config = AgentConfig(source="example:dgx-a100", interval=0.5, listen=("127.0.0.1", 0), live_events=False,
                         replay_events=str(EVENTS), events_file=str(out / "events.jsonl"), textfile=str(out))
    agent = Agent(config)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("rc", agent.run()), daemon=True)
    thread.start()
    _wait(lambda: agent.http is not None)
    port = agent.http.address[1]
    _wait(lambda: len(json.loads(_get(port, "/events")[1])["events"]) >= 4 and agent.view().cycles >= 2)
    yield agent, port, out
    agent.stop()
    thread.join(timeout=5)
    assert result["rc"] == 0 and not thread.is_alive()


def test_events_are_joined_to_the_topology(running):
    agent, port, _ = running
    events = json.loads(_get(port, "/events")[1])["events"]
    by_kind = {(e["kind"], e["code"], e["device"]): e for e in events}
    assert len(events) == 4  # the benign "GPU at PCI" record makes no event
    gone = by_kind[("udev", "remove", "0000:07:00.0")]
    assert gone["device"] == "0000:07:00.0" and gone["affected"] == ["GPU0"]
    assert gone["severity"] == "critical"
    xid = by_kind[("xid", "149", "0000:4e:00.0")]
    assert xid["affected"] == ["GPU3"] and xid["severity"] == "critical"
    assert "GPU3<->GPU0, GPU1, GPU2, GPU4, GPU5, GPU6, GPU7" in xid["impact"]
    aer = by_kind[("aer", "uncorrected_nonfatal", "0000:01:00.0")]
    assert aer["affected"] == ["GPU0", "GPU1", "NIC0 (mlx5_0)", "NIC1 (mlx5_1)"]
    assert "switch upstream port" in aer["impact"]
    nic = [e for e in events if e["kind"] == "udev" and e["device"] == "0000:4b:00.0"]
    assert nic and nic[0]["affected"] == ["NIC2 (mlx5_2)"] and "GPU2, GPU3" in nic[0]["impact"]


def test_metrics_scrape_parses_and_carries_the_values(running):
    _, port, _ = running
    status, text = _get(port, "/metrics")
    assert status == 200
    samples = _samples(text)
    assert _value(samples, "topodoc_kernel_events_total", kind="xid", code="149", device="0000:4e:00.0") == 1
    assert _value(samples, "topodoc_kernel_events_total", kind="aer", code="uncorrected_nonfatal") == 1
    assert _value(samples, "topodoc_udev_events_total", action="remove", device="0000:07:00.0") == 1
    assert _value(samples, "topodoc_nvlinks_active", gpu="GPU3") == 12
    assert _value(samples, "topodoc_pcie_link_width_lanes", endpoint="GPU0") == 16
    assert _value(samples, "topodoc_pcie_link_generation", endpoint="NIC0") == 4
    assert _value(samples, "topodoc_nic_port_up", nic="mlx5_0", port="1") == 1
    assert _value(samples, "topodoc_nic_port_rate_bits_per_second", nic="mlx5_0", port="1") == 200e9
    assert _value(samples, "topodoc_probe_runs_total") >= 2
    assert _value(samples, "topodoc_agent_resident_memory_bytes") > 10e6
    names = {n for n, _ in samples}
    assert not any(n.startswith("topodoc_") is False for n in names)


def test_findings_document_is_diagnose_json_plus_agent_state(running):
    _, port, out = running
    doc = json.loads(_get(port, "/findings")[1])
    expected = run_cli("diagnose", "--from", "example:dgx-a100", "--json")
    once = json.loads(expected.stdout)["findings"]
    assert [f["rule"] for f in doc["findings"]] == [f["rule"] for f in once]
    assert doc["agent"]["cycles"] >= 2
    assert all(t["status"] in ("new", "open") for t in doc["agent"]["tracked"])
    health = json.loads(_get(port, "/healthz")[1])
    assert health["status"] == "ok" and any(d["check"] == "udev+kmsg+nvml" for d in health["disabled"])
    lines = (out / "events.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[1])["code"] == "149"
    assert "topodoc_probe_runs_total" in (out / "topodoc.prom").read_text()
    assert _get(port, "/nope")[0] == 404


def test_tracker_new_open_resolved():
    tracker = FindingTracker()
    finding = Finding("pcie-link-degraded", Severity.ERROR, 1.0, "GPU0", "x8", (), None)
    tracker.update("host", [finding], 100.0)
    assert [(t.status, t.first_seen) for t in tracker.items()] == [("new", 100.0)]
    tracker.update("host", [finding], 160.0)
    assert [(t.status, t.first_seen, t.last_seen) for t in tracker.items()] == [("open", 100.0, 160.0)]
    tracker.update("host", [], 220.0)
    assert [(t.status, t.resolved_at) for t in tracker.items()] == [("resolved", 220.0)]
    tracker.update("host", [finding], 280.0)
    assert [(t.status, t.first_seen) for t in tracker.items()] == [("new", 280.0)]


def test_a_raising_collector_is_reported_and_the_agent_carries_on():
    agent = Agent(AgentConfig(source="example:dgx-a100", listen=None, live_events=False))
    good = agent.prober.host
    agent.prober.host = None  # every collector raises on this host
    broken = agent.run_cycle()
    assert broken.snapshot is None and broken.errors[0].startswith("probe: AttributeError")
    agent.prober.host = good
    fine = agent.run_cycle()
    assert fine.snapshot is not None and not fine.errors and agent.view().cycle_errors == 1


def test_log_tail_follows_growth_rotation_and_truncation(tmp_path):
    text = (LOGS / "ib-2node-gdr-srun.log").read_text()
    half = text.index("\n", len(text) // 3) + 1
    log = tmp_path / "job-1.log"
    log.write_text(text[:half])
    (tmp_path / "old.log.gz").write_bytes(b"\x1f\x8b rotated")
    watcher = LogWatcher((str(tmp_path / "*.log*"),))
    assert watcher.poll() == [str(log)]
    first = watcher.analyse()[str(log)]
    with log.open("a") as handle:
        handle.write(text[half:])
    watcher.poll()
    grown = watcher.analyse()[str(log)]
    assert grown.analysis.summary.transport == "IB" and grown.analysis.summary.gdr is True
    assert grown.kept_bytes > first.kept_bytes
    log.rename(tmp_path / "job-1.log.1.gz")  # rotated away (and compressed: ignored)
    log.write_text((LOGS / "socket-fallback-no-ib-device.log").read_text())
    watcher.poll()
    rotated = watcher.analyse()[str(log)]
    assert rotated.restarts == 1 and rotated.analysis.summary.transport != "IB"
    log.write_text("")  # truncated in place
    watcher.poll()
    truncated = watcher.analyse()[str(log)]
    assert truncated.restarts == 2 and truncated.analysis is None
    assert set(watcher.analyse()) == {str(log)}


def test_watched_log_findings_per_file(tmp_path):
    shutil.copy(LOGS / "socket-fallback-no-ib-device.log", tmp_path / "job-a.log")
    agent = Agent(AgentConfig(source="example:dgx-a100-degraded-gpu-x8", listen=None, live_events=False,
                              watch_log=(str(tmp_path / "*.log"),)))
    agent.run_cycle()
    agent.poll_logs()
    doc = agent.findings_document()["agent"]["logs"][str(tmp_path / "job-a.log")]
    assert doc["nccl_lines_seen"] and doc["findings"]
    scopes = {t.scope for t in agent.view().tracked}
    assert str(tmp_path / "job-a.log") in scopes and "host" in scopes


def test_every_metric_is_documented():
    doc = (REPO / "docs" / "AGENT.md").read_text()
    for name, kind, _ in METRICS:
        shown = f"{name}_total" if kind == "counter" else name
        assert f"`{shown}`" in doc, shown


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "nope"}\n')
    cases = (["--listen", "off", "--from", "nosuch.tar.gz"], ["--listen", "nowhere"],
             ["--listen", "off", "--from", "example:dgx-a100", "--replay-events", str(bad)],
             ["--listen", "off", "--interval", "0"],
             ["--listen", "off", "--textfile", str(tmp_path / "missing")])
    for args in cases:
        result = run_cli("agent", *args)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr


def test_sighup_then_sigterm_on_a_real_agent(tmp_path):
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"interval": 1}))
    proc = subprocess.Popen([sys.executable, "-m", "topodoc", "agent", "--from", "example:dgx-a100",
                             "--config", str(config), "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        port = int(re.search(r"127\.0\.0\.1:(\d+)", proc.stderr.readline())[1])
        _wait(lambda: json.loads(_get(port, "/healthz")[1])["cycles"] >= 1)
        config.write_text(json.dumps({"interval": 7, "watch_log": [str(tmp_path / "*.log")]}))
        proc.send_signal(signal.SIGHUP)
        _wait(lambda: json.loads(_get(port, "/healthz")[1])["interval"] == 7)
        assert json.loads(_get(port, "/healthz")[1])["watch_log"] == [str(tmp_path / "*.log")]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()


def test_deploy_files_use_only_metrics_the_agent_exports():
    exported = {f"{n}_total" if k == "counter" else n for n, k, _ in METRICS}
    dashboard = json.loads((REPO / "deploy" / "grafana" / "topodoc-agent-dashboard.json").read_text())
    assert dashboard["panels"]
    for name in ("grafana/topodoc-agent-dashboard.json", "prometheus/topodoc-alerts.yaml"):
        used = set(re.findall(r"\btopodoc_[a-z_]+", (REPO / "deploy" / name).read_text()))
        assert used and used <= exported, (name, used - exported)
    unit = (REPO / "deploy" / "systemd" / "topodoc-agent.service").read_text()
    assert "CapabilityBoundingSet=CAP_SYSLOG" in unit and "DynamicUser=yes" in unit


def test_sighup_reload_rereads_the_config_and_keeps_it_when_bad(tmp_path):
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"interval": 30, "watch_log": [str(tmp_path / "*.log")]}))
    agent = Agent(AgentConfig(source="example:dgx-a100", listen=None, live_events=False,
                              config_file=str(config)))
    agent._apply_reload()
    assert agent.config.interval == 30 and agent.logs.patterns == (str(tmp_path / "*.log"),)
    config.write_text(json.dumps({"interval": "soon"}))
    agent._apply_reload()
    assert agent.config.interval == 30 and "kept the previous configuration" in agent.view().errors[-1]


def test_event_log_is_bounded():
    from topodoc.agent.events import MAX_EVENTS, MAX_SERIES, AgentEvent, EventLog

    log = EventLog()
    for n in range(MAX_SERIES + 500):
        device = f"0000:{n // 256 % 256:02x}:{n % 32:02x}.{n % 8}"
        log.add(AgentEvent(float(n), "kmsg", "aer", "warning", device, f"c{n}", "x"))
    assert len(log.recent()) == MAX_EVENTS and log.recent()[-1].time == MAX_SERIES + 499
    counts = log.counts()
    assert len(counts) == MAX_SERIES + 1 and counts[("other", "other", "other")] == 500


def test_an_xid_names_the_ranks_of_watched_jobs_on_that_gpu():
    from topodoc.agent.events import from_kmsg
    from topodoc.agent.logtail import FileAnalysis
    from topodoc.logmodel import Connection, LogAnalysis, LogSummary, RankInfo

    agent = Agent(AgentConfig(source="example:dgx-a100", listen=None, live_events=False))
    cycle = agent.run_cycle()
    analysis = LogAnalysis(summary=LogSummary(nnodes=1),
                           ranks=(RankInfo(3, 8, "c0", None, 10, bus_id="0000:4e:00.0"),
                                  RankInfo(0, 8, "c0", None, 11, bus_id="0000:07:00.0")),
                           connections=(Connection(3, 2, "P2P/IPC", None, None, channels=12),
                                        Connection(3, 4, "P2P/IPC", None, None, channels=12),
                                        Connection(0, 1, "P2P/IPC", None, None, channels=12)))
    logs = {"/jobs/job-a.log": FileAnalysis("/jobs/job-a.log", analysis, 100, 0)}
    line = (EVENTS.read_text().splitlines()[2])
    event = from_kmsg(json.loads(line)["line"], 0.0, "kmsg", cycle.topology, cycle.snapshot, logs)
    assert event.affected == ("GPU3",) and event.nccl == "job-a.log: rank 3 (P2P/IPC x24 channels)"


def test_checks_closed_to_a_non_root_agent_are_listed():
    import dataclasses

    from topodoc.model import Gap, GapReason

    agent = Agent(AgentConfig(source="example:dgx-a100", listen=None, live_events=False))
    cycle = agent.run_cycle()
    gap = Gap("acs_ctrl", GapReason.PERMISSION, "/sys/bus/pci/devices/0000:01:00.0/config")
    agent._cycle = dataclasses.replace(cycle, snapshot=dataclasses.replace(cycle.snapshot, gaps=(gap,)))
    disabled = dict(agent.view().disabled)
    assert "permission denied reading /sys/bus/pci/devices/0000:01:00.0/config" in disabled["probe:acs_ctrl"]
    assert "udev+kmsg+nvml" in disabled


def test_snapshot_endpoint_feeds_fleet_and_the_fingerprint_metric(running, tmp_path):
    """/snapshot is the probe --json document; `topodoc fleet URL` reads it; the metric carries its hash."""
    from topodoc.codec import to_data
    from topodoc.fleet.compare import compare
    from topodoc.fleet.fingerprint import digest, fingerprint
    from topodoc.fleet.nodes import load_all
    from topodoc.probe.source import load_snapshot

    _, port, _ = running
    status, body = _get(port, "/snapshot")
    assert status == 200
    served = json.loads(body)
    expected = to_data(load_snapshot("example:dgx-a100"))
    assert {k: v for k, v in served.items() if k != "recorded_at"} == {
        k: v for k, v in expected.items() if k != "recorded_at"}
    samples = _samples(_get(port, "/metrics")[1])
    assert _value(samples, "topodoc_fingerprint_info", fingerprint=digest(fingerprint(expected))) == 1
    local = tmp_path / "local.json"
    local.write_text(json.dumps(expected))
    groups, errors = load_all([f"http://127.0.0.1:{port}", str(local)], jobs=1)
    report = compare(groups, errors)
    assert report.nodes == 2 and not report.errors and report.differences == ()
