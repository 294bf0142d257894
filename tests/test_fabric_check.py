"""``topodoc fabric check PLAN.json --fleet INPUT... --logs DIR``: a fleet of bundled recordings (copied
under node names) and a real two-node NCCL log (fixtures/logs/ib-2node-gdr-srun.log, sources in
fixtures/logs/README.md) compared with plans."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli, run_cli_process
from fleet_logs import rail_log
from jsonschema import Draft202012Validator

from topodoc import jsonschema_gen
from topodoc.examples_index import example_path

LOG = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "ib-2node-gdr-srun.log"


def _fleet(tmp_path: Path, **nodes: str) -> Path:
    folder = tmp_path / "recs"
    folder.mkdir(exist_ok=True)
    for name, example in nodes.items():
        shutil.copyfile(example_path(example), folder / f"{name.replace('_', '-')}.tar.gz")
    return folder


def _plan(tmp_path: Path, *args: str) -> Path:
    out = run_cli("fabric", "plan", "--json", *args)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "plan.json"
    path.write_text(out.stdout)
    return path


def _check(plan: Path, *args: str, fmt: str = "--json"):
    out = run_cli("fabric", "check", str(plan), *args, fmt)
    data = json.loads(out.stdout) if fmt == "--json" and out.stdout.strip() else None
    return out, data


def test_a_fleet_that_matches_the_plan_is_clean(tmp_path):
    fleet = _fleet(tmp_path, node_a="dgx-a100", node_b="dgx-a100")
    out, data = _check(_plan(tmp_path, "--nodes", "2"), "--fleet", str(fleet))
    assert out.returncode == 0, out.stdout + out.stderr
    assert data["observed_nodes"] == 2 and data["findings"] == []
    assert any("rail map" in u for u in data["unknown"])  # no --logs: said, not guessed


def test_a_dark_rail_is_an_error_naming_node_and_nic(tmp_path):
    fleet = _fleet(tmp_path, node_a="dgx-a100", node_b="dgx-a100-degraded-ib-port-down")
    out, data = _check(_plan(tmp_path, "--nodes", "2"), "--fleet", str(fleet))
    assert out.returncode == 1
    (port,) = [f for f in data["findings"] if f["check"] == "port-state"]
    assert port["severity"] == "error" and port["nodes"] == ["node-b"]
    assert port["evidence"] == ["node-b: mlx5_3 state = DOWN"]


def test_a_rate_below_the_plan_is_a_warning(tmp_path):
    fleet = _fleet(tmp_path, node_a="hgx-h100-8x400g-ib", node_b="hgx-h100-degraded-nic-rate")
    out, data = _check(_plan(tmp_path, "--nodes", "2", "--switch", "QM9700"), "--fleet", str(fleet))
    assert out.returncode == 1
    (rate,) = [f for f in data["findings"] if f["check"] == "nic-rate"]
    assert rate["nodes"] == ["node-b"] and rate["evidence"] == ["node-b: mlx5_3 rate = 200 Gb/s"]
    passing, _ = _check(_plan(tmp_path, "--nodes", "2", "--switch", "QM9700"), "--fleet", str(fleet),
                        "--fail-on", "error")
    assert passing.returncode == 0  # --fail-on like diagnose


def test_missing_rails_are_errors(tmp_path):
    fleet = _fleet(tmp_path, node_a="aws-p4d-24xlarge", node_b="gcp-a3-highgpu-8g")
    out, data = _check(_plan(tmp_path, "--nodes", "2"), "--fleet", str(fleet))
    assert out.returncode == 1
    rails = {f["nodes"][0]: f["message"] for f in data["findings"] if f["check"] == "rail-nics"}
    assert "4 rail NIC(s), the plan has 8 rails" in rails["node-a"]
    assert "0 rail NIC(s)" in rails["node-b"] and "no RDMA NIC" in rails["node-b"]


def test_nodes_beyond_what_the_switches_hold(tmp_path):
    plan = _plan(tmp_path, "--nodes", "2", "--switch-radix", "4", "--port-speed", "200",
                 "--gpus-per-node", "8", "--nics-per-node", "8")
    fleet = _fleet(tmp_path, **{f"n{i}": "dgx-a100" for i in range(5)})
    out, data = _check(plan, "--fleet", str(fleet))
    assert out.returncode == 1
    (count,) = [f for f in data["findings"] if f["check"] == "node-count"]
    assert count["severity"] == "error" and "beyond the 4" in count["message"]


def test_cross_rail_traffic_breaks_a_rail_only_plan_but_not_a_joined_one(tmp_path):
    """The real 2-node log: GPU0 -> mlx5_0 and GPU1 -> mlx5_1, with connections joining the two."""
    isolated = _plan(tmp_path, "--nodes", "2", "--gpus-per-node", "2", "--nics-per-node", "2")
    out, data = _check(isolated, "--logs", str(LOG))
    assert out.returncode == 1, out.stderr
    (cross,) = [f for f in data["findings"] if f["check"] == "cross-rail"]
    assert cross["severity"] == "error" and "cannot reach" in cross["message"]
    assert data["log_hosts"] == 2
    joined = _plan(tmp_path, "--nodes", "2", "--gpus-per-node", "2", "--nics-per-node", "2",
                   "--reference", "superpod")
    out, data = _check(joined, "--logs", str(LOG))
    assert out.returncode == 0 and [f["severity"] for f in data["findings"]] == ["info"]


def test_real_process_json_validates(tmp_path):
    fleet = _fleet(tmp_path, node_a="dgx-a100", node_b="dgx-a100-degraded-ib-port-down")
    plan = _plan(tmp_path, "--nodes", "2")
    out = run_cli_process("fabric", "check", str(plan), "--fleet", str(fleet), "--logs", str(LOG), "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["schema"] == "topodoc.fabric-check"
    schema = json.loads((jsonschema_gen.SCHEMAS_DIR / "topodoc.fabric-check.json").read_text())
    assert not list(Draft202012Validator(schema).iter_errors(data))
    text = run_cli_process("fabric", "check", str(plan), "--fleet", str(fleet))
    assert text.returncode == 1 and "[error] port-state: node-b" in text.stdout


@pytest.mark.parametrize(
    "content", ["not json", '{"schema": "topodoc.fleet"}', '{"schema": "topodoc.fabric"}', "[1, 2]"]
)
def test_a_plan_that_is_not_a_plan_exits_2(tmp_path, content):
    bad = tmp_path / "plan.json"
    bad.write_text(content)
    out = run_cli("fabric", "check", str(bad), "--logs", str(LOG))
    assert out.returncode == 2 and out.stderr.startswith("topodoc fabric check:")
    assert len(out.stderr.strip().splitlines()) == 1


def test_no_inputs_or_missing_plan_exit_2(tmp_path):
    assert run_cli("fabric", "check", str(tmp_path / "nope.json"), "--logs", str(LOG)).returncode == 2
    out = run_cli("fabric", "check", str(_plan(tmp_path, "--nodes", "2")))
    assert out.returncode == 2 and "--fleet" in out.stderr


def test_a_fleet_of_unreadable_inputs_exits_2(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("{}")
    out = run_cli("fabric", "check", str(_plan(tmp_path, "--nodes", "2")), "--fleet", str(junk))
    assert out.returncode == 2 and "junk.json" in out.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [("nodes", 3), ("switches", {"leaf": 1, "spine": 0, "core": 0}), ("nodes_per_unit", 0)],
)
def test_an_edited_plan_is_refused_not_trusted(tmp_path, field, value):
    path = _plan(tmp_path, "--nodes", "20", "--reference", "superpod")
    doc = json.loads(path.read_text())
    doc[field] = value
    path.write_text(json.dumps(doc))
    check = ("fabric", "check", str(path), "--logs", str(LOG))
    for argv in (check, ("fabric", "diagram", "--plan", str(path))):
        out = run_cli(*argv)
        assert out.returncode == 2 and "plan again" in out.stderr, out.stderr


def test_a_plan_with_an_absurd_switch_is_refused(tmp_path):
    path = _plan(tmp_path, "--nodes", "2")
    doc = json.loads(path.read_text())
    doc["switch"]["ports"] = 10**9
    path.write_text(json.dumps(doc))
    out = run_cli("fabric", "check", str(path), "--logs", str(LOG))
    assert out.returncode == 2 and "not a plan topodoc makes" in out.stderr


def test_a_host_whose_gpu_takes_another_rail_is_named_with_the_log_line(tmp_path):
    """Three hosts of two GPUs; node-c's GPU1 goes out through mlx5_0 (synthetic lines in NCCL 2.21's
    wording, as tests/test_fleet.py builds them; copied so the two files change apart)."""
    log = tmp_path / "job.log"
    log.write_text(rail_log({"node-a": (0, 1), "node-b": (0, 1), "node-c": (0, 0)}))
    plan = _plan(tmp_path, "--nodes", "3", "--gpus-per-node", "2", "--nics-per-node", "2", "--reference",
                 "superpod")
    out, data = _check(plan, "--logs", str(log))
    assert out.returncode == 1
    (broken,) = [f for f in data["findings"] if f["check"] == "rail-map"]
    assert broken["nodes"] == ["node-c"] and "GPU1 uses mlx5_0" in broken["message"]
    assert "job.log:" in broken["evidence"][0] and "NET/IB/0" in broken["evidence"][0]


