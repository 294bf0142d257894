"""topodoc fleet: planted differences found on the right node and nowhere else, split fleets, unreadable
inputs, agent URLs (a real HTTP server on loopback), the rail map from multi-node NCCL logs."""

from __future__ import annotations

import http.server
import json
import random
import subprocess
import sys
import threading
import time

import pytest
from fleet_logs import rail_log

from topodoc.fleet.compare import compare
from topodoc.fleet.fingerprint import fingerprint
from topodoc.fleet.nodes import expand, load_all, load_one
from topodoc.fleet.plant import PLANTERS, vary_identity


@pytest.fixture(scope="module")
def base() -> dict:
    from topodoc.codec import to_data
    from topodoc.probe.source import load_snapshot

    return to_data(load_snapshot("example:hgx-h100-8x400g-ib"))


def _write(tmp_path, name: str, data: dict, indent: int | None = None) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data, indent=indent))
    return str(path)


def _fleet(paths: list[str]):
    items, errors = expand(paths)
    groups, load_errors = load_all(items, jobs=1)
    return compare(groups, errors + load_errors)


def _fp(data: dict):
    from topodoc.codec import snapshot_from_data

    return fingerprint(snapshot_from_data(data))


def test_identity_never_counts(base):
    """Host names, serials, UUIDs, MACs, GUIDs and boot ids differ on every node and are not compared."""
    assert _fp(vary_identity(base, 1)) == _fp(vary_identity(base, 2)) == _fp(base)


def test_digest_shortcut_gives_the_full_fingerprint(tmp_path, base):
    """The blanked-identity digest lookup returns exactly what parsing the file returns."""
    a = _write(tmp_path, "a", vary_identity(base, 1), indent=2)
    b = _write(tmp_path, "b", vary_identity(base, 2), indent=2)
    cache: dict = {}
    ref_a, fp_a = load_one(a, cache)
    ref_b, fp_b = load_one(b, cache)  # served from the digest cache
    assert fp_b == fp_a == load_one(b, {})[1]
    assert (ref_a.hostname, ref_b.hostname) == ("node-00001", "node-00002")


@pytest.mark.parametrize("planter", sorted(PLANTERS))
def test_each_planted_difference_is_found_on_its_node_only(tmp_path, base, planter):
    paths = [_write(tmp_path, f"node-{n}", vary_identity(base, n)) for n in range(5)]
    odd = vary_identity(base, 9)
    key = PLANTERS[planter](odd, random.Random(3))
    paths.append(_write(tmp_path, "node-9", odd))
    report = _fleet(paths)
    by_key = {d.key: d for d in report.differences}
    assert key in by_key, f"{planter} planted {key}, not reported"
    for diff in report.differences:
        assert [n for o in diff.outliers for n in o.nodes] == ["node-9"], diff
        assert diff.majority_count == 5
    assert report.groups[0].count == 5


def test_what_matters_and_what_does_not(tmp_path, base):
    kernel = vary_identity(base, 1)
    PLANTERS["kernel"](kernel, random.Random(1))
    width = vary_identity(base, 2)
    PLANTERS["width"](width, random.Random(1))
    paths = [_write(tmp_path, f"n{n}", vary_identity(base, n + 10)) for n in range(3)]
    paths += [_write(tmp_path, "kernel", kernel), _write(tmp_path, "width", width)]
    diffs = {d.family: d for d in _fleet(paths).differences}
    assert diffs["kernel"].matters is False and diffs["kernel"].severity == "info"
    assert diffs["pcie.width"].matters is True and diffs["pcie.width"].rule == "pcie-width-reduced"
    assert diffs["pcie.width"].severity == "error"


def test_idle_gen1_is_not_called_a_fault(tmp_path, base):
    idle = vary_identity(base, 1)
    gpu = idle["gpus"][0]
    idle["pci"][gpu["pci_address"]]["link"]["speed_gts"] = 2.5
    paths = [_write(tmp_path, f"n{n}", vary_identity(base, n + 10)) for n in range(3)]
    paths.append(_write(tmp_path, "idle", idle))
    (diff,) = _fleet(paths).differences
    assert diff.key == "GPU0.pcie.gen" and not diff.matters
    assert "idle" in diff.outliers[0].note


def test_no_majority_is_said_not_guessed(tmp_path, base):
    paths = []
    for n in range(4):
        data = vary_identity(base, n)
        if n % 2:
            PLANTERS["driver"](data, random.Random(1))
        paths.append(_write(tmp_path, f"n{n}", data))
    report = _fleet(paths)
    (diff,) = report.differences
    assert diff.split and diff.majority is None
    assert sorted(o.count for o in diff.outliers) == [2, 2]
    from topodoc.report.fleet import render_text

    assert "no majority" in render_text(report)


def test_fleet_of_one(tmp_path, base):
    report = _fleet([_write(tmp_path, "only", base)])
    assert report.nodes == 1 and report.differences == ()
    from topodoc.report.fleet import render_text

    assert "nothing to compare" in render_text(report)


def test_same_hostname_is_never_merged(tmp_path, base):
    """Redacted recordings and copies of one golden image share a host name: each input is a node."""
    same = [_write(tmp_path, f"copy{n}", base) for n in range(3)]
    report = _fleet(same)
    assert report.nodes == 3 and report.groups[0].nodes == ("copy0", "copy1", "copy2")


def test_unreadable_and_foreign_inputs_are_reported_and_the_rest_compared(tmp_path, base):
    good = [_write(tmp_path, f"n{n}", vary_identity(base, n)) for n in range(2)]
    (tmp_path / "broken.json").write_text('{"gpus": [')
    (tmp_path / "other.json").write_text('{"hello": "world"}')
    (tmp_path / "wrongtype.json").write_text('{"gpus": 7, "pci": "x"}')
    report = _fleet(
        [
            *good,
            str(tmp_path / "broken.json"),
            str(tmp_path / "other.json"),
            str(tmp_path / "wrongtype.json"),
            str(tmp_path / "missing.json"),
        ]
    )
    assert report.nodes == 2
    errors = {e.input.rsplit("/", 1)[-1]: e.message for e in report.errors}
    assert set(errors) == {"broken.json", "other.json", "wrongtype.json", "missing.json"}
    assert "not JSON" in errors["broken.json"] and "no such file" in errors["missing.json"]


def test_recordings_and_directories(tmp_path):
    """Real recordings as inputs, through the real CLI: the degraded A100 is the odd one out."""
    from topodoc.examples_index import example_path

    rec = tmp_path / "recs"
    rec.mkdir()
    for n in range(2):
        (rec / f"good{n}.tar.gz").write_bytes(example_path("dgx-a100").read_bytes())
    (rec / "bad.tar.gz").write_bytes(example_path("dgx-a100-degraded-gpu-x8").read_bytes())
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(rec), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr  # a pcie-width-reduced difference is an error
    data = json.loads(out.stdout)
    assert data["schema"] == "topodoc.fleet" and data["nodes"] == 3
    (diff,) = data["differences"]
    assert diff["key"] == "GPU3.pcie.width" and diff["outliers"][0]["nodes"] == ["bad"]
    csv_out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(rec), "--csv", "--fail-on", "critical"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert csv_out.returncode == 0
    assert csv_out.stdout.splitlines()[1].startswith(
        "bad,GPU3 PCIe width,x8,x16,error,yes,pcie-width-reduced"
    )


class _Agent(http.server.BaseHTTPRequestHandler):
    snapshot: dict = {}
    delay = 0.0

    def do_GET(self):  # noqa: N802 - http.server's name
        time.sleep(self.delay)
        body = json.dumps(self.snapshot).encode()
        self.send_response(200 if self.path == "/snapshot" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(snapshot: dict, delay: float):
    handler = type("H", (_Agent,), {"snapshot": snapshot, "delay": delay})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_agent_urls_fetched_and_timeouts_reported(tmp_path, base, monkeypatch):
    import topodoc.fleet.nodes as nodes

    monkeypatch.setattr(nodes, "URL_TIMEOUT_S", 0.5)
    fast = _serve(vary_identity(base, 1), 0.0)
    slow = _serve(vary_identity(base, 2), 3.0)
    try:
        urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in (fast, slow)]
        report = _fleet([*urls, _write(tmp_path, "n3", vary_identity(base, 3))])
    finally:
        fast.shutdown()
        slow.shutdown()
    assert report.nodes == 2
    assert [e.input for e in report.errors] == [urls[1]]
    assert "cannot fetch" in report.errors[0].message




def test_rail_map_from_logs(tmp_path):
    from topodoc.fleet.raillog import rail_map

    path = tmp_path / "job.log"
    path.write_text(rail_log({"node-a": (0, 1), "node-b": (0, 1), "node-c": (0, 0)}))
    rails = rail_map((str(path),))
    assert rails.majority == {"0": "mlx5_0", "1": "mlx5_1"}
    breaks = [f for f in rails.findings if f.severity == "warning"]
    assert len(breaks) == 1 and breaks[0].message.startswith("node-c: GPU1 uses mlx5_0")
    assert breaks[0].rule == "rail-map-broken"
    assert breaks[0].evidence and "NET/IB/0" in breaks[0].evidence[0]
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", "--logs", str(path), "--fail-on", "warning"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "node-c" in out.stdout and "Rail map" in out.stdout


def test_no_inputs_is_a_usage_error():
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "give recordings" in out.stderr


def test_slurm_recipe_record_then_compare(tmp_path):
    """The documented flow minus srun: each node records itself into a shared folder, then one fleet run.
    Recorded here on this machine (no GPU) twice: two inputs, one group, nothing differs."""
    shared = tmp_path / "recs"
    shared.mkdir()
    for node in ("node-a", "node-b"):
        rec = subprocess.run(
            [sys.executable, "-m", "topodoc", "record", "--redact", "-o", str(shared / f"{node}.tar.gz")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert rec.returncode == 0, rec.stderr
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", str(shared), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["nodes"] == 2 and [g["nodes"] for g in data["groups"]] == [["node-a", "node-b"]]
