"""Health checks: NVML health values and their gaps (one per check for the machine, each check with its
own deadline), IB/RoCE port counters, the Xid policy, and the degraded example firing each rule."""

from __future__ import annotations

import subprocess
import sys

import pytest

from topodoc.examples_index import example_path
from topodoc.model import GapReason
from topodoc.parsers import kernel_log, xid_catalog
from topodoc.probe import nics, nvml_health
from topodoc.probe.collect import collect
from topodoc.probe.host import NvmlError
from topodoc.probe.nvml_gpus import collect_nvml
from topodoc.probe.record import open_recording
from topodoc.rules import registry
from topodoc.rules.engine import Facts, Severity, evaluate

DEGRADED = "hgx-h100-degraded-health"
XID79 = "[ 1234.5] NVRM: Xid (PCI:0000:3a:00): 79, pid=1001, GPU has fallen off the bus."


def _snapshot(name: str):
    return collect(open_recording(example_path(name)), f"example:{name}")


def test_degraded_example_holds_each_fault_where_the_readme_says():
    snap = _snapshot(DEGRADED)
    gpu2, gpu5, gpu1 = snap.gpus[2].health, snap.gpus[5].health, snap.gpus[1]
    assert (gpu2.ecc_volatile_uncorrected, gpu2.ecc_dram_uncorrected, gpu2.remap_pending) == (2, 2, True)
    assert gpu5.clock_events == ("hw_slowdown", "hw_thermal") and gpu5.temperature_c == 88
    assert gpu1.nvlinks[4].errors == {"replay": 37, "recovery": 2, "crc_flit": 1520, "crc_data": 0}
    port = next(n for n in snap.nics if n.name == "mlx5_6").ports[0]
    assert port.counters["symbol_error"] == 418 and port.counters["link_downed"] == 1
    # Hopper has no page retirement: said once for the machine, not once per GPU
    retired = [g for g in snap.gaps if g.what.startswith("retired pages")]
    assert [(g.what, g.reason) for g in retired] == [("retired pages of 8 GPUs", GapReason.UNSUPPORTED)]


def test_degraded_example_fires_every_health_rule_and_the_healthy_base_none():
    ids = {"gpu-ecc-uncorrected", "gpu-row-remap", "gpu-clock-slowdown", "nvlink-errors", "ib-port-errors"}
    rules = [registry.get(i) for i in sorted(ids)]
    fired = {f.rule: f for f in evaluate(Facts(snapshot=_snapshot(DEGRADED)), rules).findings}
    assert set(fired) == ids
    assert fired["ib-port-errors"].message.endswith("the rail of GPU6")
    nvlink = fired["nvlink-errors"]
    assert nvlink.subject.startswith("GPU1") and "recovery=2" in nvlink.message
    assert not evaluate(Facts(snapshot=_snapshot("hgx-h100-8x400g-ib")), rules).findings


def test_volta_example_fires_page_retirement_and_says_row_remapping_is_not_offered():
    snap = _snapshot("dgx1-v100-degraded-retired-pages")
    health = snap.gpus[1].health
    assert (health.retired_pages_sbe, health.retired_pages_dbe, health.retired_pages_pending) == (2, 1, True)
    fired = evaluate(Facts(snapshot=snap), [registry.get("gpu-retired-pages")]).findings
    assert [f.subject for f in fired] == ["GPU1 (0000:07:00.0)"] and fired[0].severity is Severity.ERROR
    remap = [g for g in snap.gaps if g.what.startswith("row remapping")]
    assert [(g.what, g.reason) for g in remap] == [("row remapping of 8 GPUs", GapReason.UNSUPPORTED)]


def test_diagnose_reads_the_kernel_log_a_recording_kept():
    from conftest import run_cli

    from topodoc.probe.extras import recorded_kernel_events

    events = recorded_kernel_events("example:dgx1-v100-degraded-retired-pages")
    assert [e.code for _, e in events if e.kind == "xid"] == ["48", "64"]
    assert recorded_kernel_events("example:hgx-h100-degraded-health") is None  # journalctl was absent
    assert recorded_kernel_events("live") is None
    out = run_cli("--color", "never", "diagnose", "--from", "example:dgx1-v100-degraded-retired-pages")
    assert out.returncode == 1 and "CRITICAL kernel-xid · 0000:07:00.0" in out.stdout
    assert "example:dgx1-v100-degraded-retired-pages:journalctl -k:5" in out.stdout


def test_each_check_has_its_own_deadline_and_says_once_it_passed(monkeypatch):
    monkeypatch.setitem(nvml_health.CHECK_DEADLINE_S, "row_remap", 0.0)
    host = open_recording(example_path(DEGRADED))
    gaps = []
    _driver, gpus, _pairs = collect_nvml(host.nvml, gaps)
    remap = [g for g in gaps if g.what.startswith("row remapping")]
    assert len(remap) == 1 and remap[0].what == "row remapping of 8 GPUs"
    assert "row_remap check's 0 s deadline had passed" in remap[0].detail
    assert all(g.health.remap_pending is None for g in gpus)
    assert gpus[2].health.ecc_volatile_uncorrected == 2  # the other checks carried on


class _Refusing:
    """An NVML that answers NoPermission to every health call (a container without the capability)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def call(self, fn, *args):
        if fn in {"nvmlDeviceGetEccMode", "nvmlDeviceGetTemperature", "nvmlDeviceGetNvLinkErrorCounter"}:
            raise NvmlError(4)
        return self.inner.call(fn, *args)


def test_a_refused_value_is_one_gap_per_check_with_why():
    gaps = []
    collect_nvml(_Refusing(open_recording(example_path(DEGRADED)).nvml), gaps)
    refused = sorted((g.what, g.detail) for g in gaps if g.reason is GapReason.PERMISSION)
    assert refused == [("ECC counts of 8 GPUs", "NoPermission"),
                       ("NVLink error counters of 8 GPUs", "NoPermission"),
                       ("temperature of 8 GPUs", "NoPermission")]


def test_port_counters_check_stops_at_its_deadline(monkeypatch):
    monkeypatch.setattr(nics, "COUNTERS_DEADLINE_S", 0.0)
    snap = _snapshot(DEGRADED)
    assert all(not p.counters for n in snap.nics for p in n.ports)
    (gap,) = [g for g in snap.gaps if g.what.startswith("port error counters")]
    assert gap.what == "port error counters of 8 ports" and "deadline had passed" in gap.detail


def test_a_lost_gpu_is_critical_in_kernel_xid():
    events = tuple(("dmesg", e) for e in kernel_log.parse(XID79))
    (finding,) = evaluate(Facts(kernel=events), [registry.get("kernel-xid")]).findings
    assert finding.severity is Severity.CRITICAL and "drain the node" in finding.fix


@pytest.fixture()
def policy_file(tmp_path, monkeypatch):
    def write(text: str):
        path = tmp_path / "xid.toml"
        path.write_text(text)
        monkeypatch.setenv(xid_catalog.POLICY_ENV, str(path))
        xid_catalog.reset_policy()
        return path

    yield write
    monkeypatch.delenv(xid_catalog.POLICY_ENV, raising=False)
    xid_catalog.reset_policy()


def test_operator_policy_overrides_severity_and_action_and_names_itself(policy_file):
    path = policy_file('[xid.13]\nseverity = "critical"\naction = "drain_node"\nnote = "site rule 7"\n'
                       '[xid.999]\nseverity = "warning"\naction = "reset_gpu"\n')
    (event,) = kernel_log.parse("NVRM: Xid (PCI:0000:3a:00): 13, pid=1, Graphics Exception: ESR 0x1")
    assert (event.severity, event.action) == ("critical", "drain_node")
    assert ("policy", f"{path} (site rule 7)") in event.detail
    (unknown,) = kernel_log.parse("NVRM: Xid (PCI:0000:3a:00): 999, pid=1, something new")
    assert (unknown.severity, unknown.action) == ("warning", "reset_gpu")


@pytest.mark.parametrize("text", ['[xid.13]\nseverity = "fatal"\n', '[xid.abc]\naction = "rma"\n',
                                  '[xid.13]\naction = "pray"\n', "[other]\n",
                                  "[xid.999]\nseverity = 'error'\n", "not toml ["])
def test_a_bad_policy_file_is_one_line_exit_2(policy_file, text, tmp_path):
    path = policy_file(text)
    log = tmp_path / "dmesg.txt"
    log.write_text(XID79 + "\n")
    env = {"TOPODOC_XID_POLICY": str(path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", str(log)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"topodoc: TOPODOC_XID_POLICY={path}")
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr


class _OldFabricDriver:
    """A driver without nvmlDeviceGetGpuFabricInfoV: only the older call, without the health mask."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def call(self, fn, *args):
        if fn == "nvmlDeviceGetGpuFabricInfoV":
            raise NvmlError(13)
        if fn == "nvmlDeviceGetGpuFabricInfo":
            info = dict(self.inner.call("nvmlDeviceGetGpuFabricInfoV", *args))
            info.pop("healthMask", None)
            return info
        return self.inner.call(fn, *args)


def test_fabric_info_falls_back_to_the_call_older_drivers_have():
    gaps = []
    old = _OldFabricDriver(open_recording(example_path("gb200-nvl72-tray")).nvml)
    _driver, gpus, _pairs = collect_nvml(old, gaps)
    assert all(g.fabric is not None and g.fabric.state == "completed" for g in gpus)
    assert all(g.fabric.health_mask is None for g in gpus)
    assert not [g for g in gaps if g.what.startswith("fabric info")]


def test_live_answers_of_the_health_calls_become_the_plain_values_the_collector_reads():
    """What pynvml returns for the health calls (a ctypes struct, a tuple of ints), through the live
    adapter's converter, has the shape nvml_health reads (nvidia-ml-py 13.615)."""
    import pynvml as real

    from topodoc.probe.nvml_live import plain

    histogram = real.c_nvmlRowRemapperHistogramValues(max=636, high=2, partial=1, low=1, none=0)
    assert plain(histogram) == {"max": 636, "high": 2, "partial": 1, "low": 1, "none": 0}
    assert plain((0, 2, 1, 0)) == [0, 2, 1, 0]  # nvmlDeviceGetRemappedRows
    assert plain([real.c_ulonglong(0x1000).value]) == [0x1000]  # nvmlDeviceGetRetiredPages
    old = real.c_nvmlGpuFabricInfo_t()
    old.state, old.cliqueId = 3, 7
    fields = {k: v for k, v in plain(old).items() if k != "clusterUuid"}
    assert fields == {"status": 0, "cliqueId": 7, "state": 3}
