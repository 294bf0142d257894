"""``topodoc estimate cluster``: the TP estimator's message sizes carried across nodes, with data,
pipeline and expert parallel collectives, on a plan, a fleet or a given NIC rate."""

import json
import shutil

import pytest
from conftest import run_cli, run_cli_process
from jsonschema import Draft202012Validator

from topodoc import jsonschema_gen
from topodoc.bandwidth.estimate import (
    GB,
    ClusterJob,
    EstimateError,
    Network,
    TpJob,
    estimate_cluster,
    estimate_tp,
)
from topodoc.examples_index import example_path

SEED = TpJob(layers=48, hidden=8192, seq=4096, micro_batch=1, dtype="bf16", tp=8)
DGX = Network(nodes=4, gpus_per_node=8, gpu_bytes_per_s=(25 * GB, 25 * GB), source="given")


def _row(est, name):
    return next(r for r in est.collectives if r.name.startswith(name))


def test_tp_inside_one_node_never_reaches_the_network():
    est = estimate_cluster(ClusterJob(SEED, dp=4), DGX, (0.25, 0.5))
    assert not _row(est, "tp all-reduce").crosses_nodes
    assert _row(est, "tp all-reduce").time_s == (0.0, 0.0)


def test_tp_across_two_four_gpu_nodes_carries_the_seed_bytes_over_four_nics():
    """The seed's 21 GiB per GPU per micro batch (TP=8); on 4-GPU nodes the ring leaves each node once,
    spread over the 4 GPUs' NICs there."""
    net = Network(2, 4, (25 * GB, 25 * GB), "given")
    est = estimate_cluster(ClusterJob(SEED), net, (0.25, 0.5))
    tp = _row(est, "tp all-reduce")
    seed = estimate_tp(SEED, (0.25, 0.5), (GB, GB)).bytes_per_gpu
    assert tp.crosses_nodes and tp.ranks_per_node == 4
    assert tp.bytes_per_gpu == seed // 4
    assert tp.time_s[0] == pytest.approx(seed / 4 / (25 * GB))


def test_dp_all_reduce_moves_2_n_minus_1_over_n_of_the_gradient_shard():
    job = ClusterJob(SEED, dp=4, params=8e9)
    est = estimate_cluster(job, DGX, (0.25, 0.5))
    dp = _row(est, "dp all-reduce")
    shard = int(8e9 / 8) * 2  # params / (tp x pp), bf16
    assert dp.crosses_nodes and dp.ranks_per_node == 1  # one DP rank per node: its own rail NIC
    assert dp.bytes_per_gpu == shard * 3 // 4 * 2
    sharded = estimate_cluster(ClusterJob(SEED, dp=4, params=8e9, sharded=True), DGX, (0.25, 0.5))
    kinds = {r.kind for r in sharded.collectives if r.crosses_nodes}
    assert kinds == {"all-gather", "reduce-scatter"}


def test_oversubscription_from_a_plan_widens_the_range(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(run_cli("fabric", "plan", "--nodes", "64", "--oversubscription", "4:1", "--json").stdout)
    out = run_cli("estimate", "cluster", "--plan", str(plan), "--layers", "48", "--hidden", "8192", "--seq",
                  "4096", "--tp", "8", "--dp", "64", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    worst, best = data["network"]["gpu_bytes_per_s"]
    assert best == 25 * GB and worst == best / 4
    dp = data["collectives"][1]
    assert dp["time_s"][1] == pytest.approx(dp["time_s"][0] * 4)


def test_ep_all_to_all_only_counts_what_leaves_the_node():
    job = ClusterJob(TpJob(8, 4096, 4096, 1, "bf16", 1), dp=16, ep=16, moe_topk=2)
    est = estimate_cluster(job, Network(2, 8, (50 * GB, 50 * GB), "given"), (0.1, 0.1))
    a2a = _row(est, "ep all-to-all")
    per = 4096 * 4096 * 2 * 2  # tokens x hidden x bf16 x topk
    assert a2a.ranks_per_node == 8 and a2a.bytes_per_gpu == 4 * per * 8 * 8 // 16


def test_the_verdict_follows_compute_against_communication():
    job = ClusterJob(SEED, dp=4, params=70e9)
    slow = estimate_cluster(job, Network(4, 8, (1 * GB, 1 * GB), "given"), (0.25, 0.5))
    fast = estimate_cluster(job, Network(4, 8, (1000 * GB, 1000 * GB), "given"), (0.25, 0.5))
    assert slow.verdict == "network-bound" and fast.verdict == "compute-bound"
    assert slow.comm_fraction[0] > 0.9 > fast.comm_fraction[1]


@pytest.mark.parametrize(("job", "says"), [
    (ClusterJob(SEED, dp=8), "the fabric has 4 nodes"),
    (ClusterJob(SEED, dp=4, ep=3), "must divide"),
    (ClusterJob(SEED, pp=64), "more stages"),
])
def test_impossible_layouts(job, says):
    with pytest.raises(EstimateError, match=says):
        estimate_cluster(job, DGX, (0.25, 0.5))


def test_real_process_json_validates_and_prints_assumptions():
    args = ["estimate", "cluster", "--nodes", "16", "--nic-gbps", "400", "--layers", "80", "--hidden", "8192",
            "--seq", "4096", "--tp", "8", "--dp", "16", "--params", "70B"]
    out = run_cli_process(*args, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    schema = json.loads((jsonschema_gen.SCHEMAS_DIR / "topodoc.estimate-cluster.json").read_text())
    assert not list(Draft202012Validator(schema).iter_errors(data))
    assert data["params"] == 70e9 and data["verdict"] in ("network-bound", "compute-bound", "depends")
    text = run_cli_process(*args)
    assert "assumptions:" in text.stdout and "no overlap" in text.stdout and "dp all-reduce" in text.stdout


def test_bandwidth_from_a_fleet_is_its_slowest_node(tmp_path):
    for name, example in (("n1", "hgx-h100-8x400g-ib"), ("n2", "hgx-h100-degraded-nic-rate")):
        shutil.copyfile(example_path(example), tmp_path / f"{name}.tar.gz")
    out = run_cli("estimate", "cluster", "--fleet", str(tmp_path), "--layers", "48", "--hidden", "8192",
                  "--seq", "4096", "--tp", "8", "--dp", "2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["network"]["nodes"] == 2
    # n2's mlx5_3 trained at 200G: its channel paces the collective, 8 x 200G / 8 GPUs
    assert data["network"]["gpu_bytes_per_s"][0] == 8 * 200 / 8 / 8 * GB


@pytest.mark.parametrize("extra", [
    (),
    ("--nodes", "4"),
    ("--nodes", "4", "--nic-gbps", "200", "--plan", "x.json"),
    ("--nodes", "4", "--nic-gbps", "200", "--params", "lots"),
    ("--nodes", "4", "--nic-gbps", "200", "--dp", "9"),
])
def test_usage_errors_exit_2(extra):
    out = run_cli("estimate", "cluster", "--layers", "48", "--hidden", "8192", "--seq", "4096", "--tp", "8",
                  *extra)
    assert out.returncode == 2 and out.stderr.startswith("topodoc estimate cluster:")
