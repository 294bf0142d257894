import json
import subprocess
import sys

import pytest

from topodoc.bandwidth.estimate import GB, GIB, EstimateError, TpJob, estimate_tp, parse_range

SEED = TpJob(layers=48, hidden=8192, seq=4096, micro_batch=1, dtype="bf16", tp=8)


def test_seed_bytes_per_gpu():
    est = estimate_tp(SEED, (0.25, 0.5), (23 * GB, 29 * GB))
    assert est.bytes_per_allreduce == 112 * 2**20
    assert est.bytes_per_gpu == 112 * 2**20 * 4 * 48
    assert est.bytes_per_gpu / GIB == pytest.approx(21.0)
    assert [v / GIB for v in est.required_bytes_per_s] == pytest.approx([42.0, 84.0])


@pytest.mark.parametrize(("bandwidth", "low", "high"), [((23, 29), 0.60, 0.80), ((48, 58), 0.42, 0.65)])
def test_seed_comm_fraction(bandwidth, low, high):
    est = estimate_tp(SEED, (0.25, 0.5), (bandwidth[0] * GB, bandwidth[1] * GB))
    assert est.comm_fraction[0] == pytest.approx(low, abs=0.02)
    assert est.comm_fraction[1] == pytest.approx(high, abs=0.01)


def test_more_bandwidth_means_less_communication():
    slow = estimate_tp(SEED, (0.3, 0.3), (20 * GB, 20 * GB))
    fast = estimate_tp(SEED, (0.3, 0.3), (200 * GB, 200 * GB))
    assert fast.comm_fraction[0] < slow.comm_fraction[0]


def test_two_way_tp_moves_half_the_message():
    est = estimate_tp(TpJob(1, 1024, 1024, 1, "fp16", 2, 1), (1.0, 1.0), (GB, GB))
    assert est.bytes_per_gpu == 1024 * 1024 * 2


@pytest.mark.parametrize("text", ["1:x", "1:2:3", ""])
def test_bad_ranges(text):
    with pytest.raises(EstimateError):
        parse_range(text)


def test_rejects_inverted_range_and_unknown_dtype():
    with pytest.raises(EstimateError):
        estimate_tp(SEED, (0.5, 0.25), (GB, GB))
    with pytest.raises(EstimateError):
        estimate_tp(TpJob(48, 8192, 4096, 1, "int3", 8), (0.25, 0.5), (GB, GB))


def _cli(*args):
    argv = ["estimate", "tp", "--layers", "48", "--hidden", "8192", "--seq", "4096", "--micro-batch", "1",
            "--tp", "8", "--compute-time", "0.25:0.5", *args]
    return subprocess.run([sys.executable, "-m", "topodoc", *argv], capture_output=True, text=True)


def test_cli_json_matches_seed():
    proc = _cli("--dtype", "bf16", "--bandwidth", "23:29", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["bytes_per_gpu"] == 22548578304
    assert [round(v / GIB) for v in data["required_bytes_per_s"]] == [42, 84]
    assert [round(v, 2) for v in data["comm_fraction"]] == [0.61, 0.8]


def test_cli_text_and_bad_input():
    assert "21.0 GiB" in _cli("--bandwidth", "48:58").stdout
    bad = _cli("--dtype", "int3", "--bandwidth", "1")
    assert bad.returncode == 2 and "unknown dtype" in bad.stderr and "Traceback" not in bad.stderr
