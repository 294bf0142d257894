import json
import subprocess
import sys
from pathlib import Path

import pytest
from bandwidth_machines import ib_nics, two_socket

from topodoc.bandwidth import links
from topodoc.bandwidth.compare import compare_run, peak_busbw
from topodoc.bandwidth.model import best_ring, build, inter_node_expectations
from topodoc.parsers.nccl_tests import parse
from topodoc.topology.derive import derive

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl_tests"


@pytest.mark.parametrize(("gen", "width", "line", "nccl"), [
    (1, 16, 4.0, 3.0), (2, 16, 8.0, 6.0), (3, 16, 15.75, 12.0), (4, 16, 31.51, 24.0), (5, 16, 63.02, 48.0),
    (4, 8, 15.75, 12.0), (6, 16, 121.0, 96.0),
])
def test_pcie_line_and_nccl_figures(gen, width, line, nccl):
    rate = links.pcie(gen, width)
    assert rate.line_gbps == pytest.approx(line, abs=0.02)
    assert rate.nccl_gbps == nccl


def test_pcie_unknown_speed_uses_nccl_fallback():
    assert links.pcie_from_speed(12.3, 0).nccl_gbps == 12.0  # speed code 60, width 0 -> 16
    assert links.pcie_from_speed(16.0, 16).label == "PCIe Gen4 x16"


@pytest.mark.parametrize(("cc", "count", "line", "nccl"), [
    ("8.0", 12, 300.0, 240.0), ("9.0", 18, 450.0, 370.8), ("10.0", 18, 900.0, 721.8), ("6.0", 4, 80.0, 72.0),
    ("8.6", 4, 56.25, 48.0), ("8.0", 3, 75.0, 60.0),
])
def test_nvlink_per_generation(cc, count, line, nccl):
    rate = links.nvlink(links.sm_number(cc), count)
    assert (rate.line_gbps, rate.nccl_gbps) == (line, nccl)


@pytest.mark.parametrize(("vendor", "name", "gbps"), [
    ("AuthenticAMD", "AMD EPYC 7742 64-Core Processor", 16.0),
    ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", 22.0),
    ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8592+", 40.0),
    ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", 10.0),
    ("GenuineIntel", "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz", 6.0),
    ("CentaurHauls", "ZHAOXIN KH-40000", 6.0),
])
def test_cpu_interconnect_as_nccl_models_it(vendor, name, gbps):
    assert links.cpu_interconnect(vendor, name).nccl_gbps == gbps


def test_intel_cpuid_model_thresholds():
    assert [links.intel_class(None, m) for m in (0x4F, 0x55, 0x8F, 0xCF)] == ["bdw", "skl", "srp", "erp"]


@pytest.mark.parametrize(("rate", "text", "gbps", "label"), [
    (200.0, "200 Gb/sec (4X HDR)", 25.0, "IB 4X HDR 200 Gb/s"),
    (None, "400 Gb/sec (4X NDR)", 50.0, "IB 4X NDR 400 Gb/s"),
    (None, "800 Gb/sec (4X XDR)", 100.0, "IB 4X XDR 800 Gb/s"),
    (None, "10 Gb/sec (4X SDR)", 1.25, "IB 4X SDR 10 Gb/s"),
])
def test_nic_rates(rate, text, gbps, label):
    port = links.nic(rate, "ib", text)
    assert (port.nccl_gbps, port.label) == (gbps, label)


def test_efa_and_unknown_nic():
    assert links.nic(100.0, "efa").label == "EFA 100 Gb/s"
    assert links.nic(None, "ethernet").nccl_gbps == 1.25


def test_cross_socket_pair_names_the_amd_fabric():
    snap = two_socket()
    bw = build(derive(snap), snap)
    (pair,) = bw.pairs
    assert pair.reason == "GPU0↔GPU1: SYS through AMD Infinity Fabric, 16 GB/s effective"
    ring = bw.expectations[0]
    assert (ring.algorithm, ring.busbw_gbps) == ("ring", 16.0)


def test_same_box_on_emerald_rapids_is_limited_by_pcie():
    snap = two_socket("GenuineIntel", "Intel(R) Xeon(R) Platinum 8592+", gen=4)
    (pair,) = build(derive(snap), snap).pairs
    assert (pair.limiter, pair.nccl_gbps, pair.line_gbps) == ("PCIe Gen4 x16", 24.0, 31.51)


def test_nvswitch_h100_expects_ring_and_nvls():
    snap = two_socket("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", gen=5, name="NVIDIA H100 80GB HBM3",
                      cc="9.0", nvswitch_links=18, per_socket=4,
                      nics=ib_nics(8, 400.0, "400 Gb/sec (4X NDR)"))
    bw = build(derive(snap), snap)
    assert {p.nccl_gbps for p in bw.pairs} == {370.8}
    by_algo = {(e.scope, e.algorithm): e.busbw_gbps for e in bw.expectations}
    assert by_algo[("intra-node", "ring")] == 370.8
    assert by_algo[("intra-node", "nvls")] == 480.0
    assert bw.node_nic_gbps == 400.0
    assert by_algo[("inter-node", "ring")] == 370.8  # capped by the node's own ring
    # B_node·(N-1)/N·k/(k-1) = 750 GB/s, but each node reduces over its NVSwitch first: NVLS caps it
    tree = next(e for e in bw.expectations if e.algorithm == "hierarchical")
    assert tree.busbw_gbps == 480.0 and tree.limiter == "NVSwitch (NVLS)"
    assert "= 750 GB/s" in tree.reason and "capped at the intra-node nvls bound 480 GB/s" in tree.reason


def test_hierarchical_bound_formula():
    ring, tree = inter_node_expectations(8, 200.0, "8x ib", (), nodes=4)
    assert ring.busbw_gbps == 200.0
    assert tree.busbw_gbps == pytest.approx(200 * 31 / 32 * 4 / 3, abs=0.01)


def test_best_ring_avoids_slow_hops():
    weights = {frozenset(p): w for p, w in {("A", "B"): 20, ("B", "C"): 5, ("C", "D"): 20, ("A", "D"): 5,
                                             ("A", "C"): 10, ("B", "D"): 10}.items()}
    order, slowest = best_ring(["A", "B", "C", "D"], weights)
    assert slowest == 10


def test_compare_far_below_on_pcie_box():
    snap = two_socket("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", gen=4, per_socket=2)
    run = parse((FIXTURES / "all-reduce-4xv100-pcie.txt").read_text())
    (cmp,) = compare_run(run, build(derive(snap), snap))
    assert cmp.verdict == "far-below" and cmp.expected_busbw_gbps == 22.0
    assert cmp.percent == pytest.approx(peak_busbw(run.rows)[0] / 22.0 * 100, abs=0.1)


def test_compare_nvls_run_is_above_ring_but_ok_against_nvls():
    snap = two_socket("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", gen=5, name="NVIDIA H100 80GB HBM3",
                      cc="9.0", nvswitch_links=18, per_socket=4)
    run = parse((FIXTURES / "all-reduce-8xh100-nvswitch.txt").read_text())
    verdicts = {c.algorithm: c.verdict for c in compare_run(run, build(derive(snap), snap))}
    assert verdicts == {"ring": "above", "nvls": "ok"}


def test_compare_two_node_run_uses_inter_node_bounds():
    snap = two_socket(gen=4, name="NVIDIA A100-SXM4-80GB", cc="8.0", nvswitch_links=12, per_socket=4,
                      nics=ib_nics(8, 200.0, "200 Gb/sec (4X HDR)"))
    run = parse((FIXTURES / "all-reduce-2x8xa100-ib.txt").read_text())
    comparisons = compare_run(run, build(derive(snap), snap))
    result = {c.algorithm: (c.expected_busbw_gbps, c.verdict) for c in comparisons}
    assert result["ring"] == (200.0, "ok")
    # 375 GB/s by B_node·(N-1)/N·k/(k-1), capped by the node's own NVSwitch ring (240)
    assert result["hierarchical"][0] == pytest.approx(240.0)


def test_bandwidth_cli_bad_source_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "topodoc", "bandwidth", "--from", "/nonexistent.tar.gz"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
RECORDED = sorted(p.parent.name for p in HOSTS.glob("*/recording.tar.gz"))


@pytest.mark.parametrize("name", RECORDED)
def test_every_fixture_host_matches_its_golden(name):
    """After a reviewed change: topodoc bandwidth --from example:NAME --json > NAME/expected-bandwidth.json"""
    from topodoc.codec import to_data
    from topodoc.commands.bandwidth import model_from_source

    golden = HOSTS / name / "expected-bandwidth.json"
    assert golden.is_file(), f"{golden} missing"
    assert to_data(model_from_source(f"example:{name}")) == json.loads(golden.read_text())


def test_bandwidth_cli_on_an_example_explains_each_expectation():
    proc = subprocess.run([sys.executable, "-m", "topodoc", "bandwidth", "--from",
                           "example:8xa100-pcie-2s-nvbridge-pairs"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    grouped = "  NV3 through 3x NVLink3, 60 GB/s effective, line rate 75 GB/s:\n    GPU0↔GPU1, GPU2↔GPU3"
    assert grouped in proc.stdout
    assert "limiter: GPU0↔GPU7: SYS through AMD Infinity Fabric, 16 GB/s effective" in proc.stdout


def _model_of(name: str):
    from topodoc.commands.bandwidth import model_from_source

    return model_from_source(f"example:{name}")


def test_node_bandwidth_is_paced_by_the_slowest_rail_and_skips_storage_nics():
    healthy = {e.algorithm: e for e in _model_of("dgx-a100").expectations if e.scope == "inter-node"}
    assert "mlx5_8" in healthy["ring"].limiter and healthy["ring"].busbw_gbps <= 200.0  # 8 rails x 25 GB/s
    slow = {e.algorithm: e for e in _model_of("hgx-h100-degraded-nic-rate").expectations
            if e.scope == "inter-node"}
    assert slow["ring"].busbw_gbps == 200.0  # one CX-7 at 200G paces all eight rails


def test_nvls_is_not_expected_when_a_gpu_is_off_the_nvswitch_fabric():
    algorithms = {e.algorithm for e in _model_of("hgx-h100-degraded-nvswitch-incomplete").expectations}
    assert "nvls" not in algorithms
    assert "nvls" in {e.algorithm for e in _model_of("hgx-h100-8x400g-ib").expectations}


def test_arm_cpu_implementer_code_is_recognised():
    rate = links.cpu_interconnect("0x41", None)
    assert rate.label == "ARM inter-socket" and rate.nccl_gbps == 6.0


def test_inter_node_figures_never_beat_the_node_itself():
    """2x DGX A100: 200 GB/s of rails, NVSwitch ring 240 GB/s -> the hierarchical bound is 240, not 375."""
    bw = bandwidth_of("example:dgx-a100")
    by_algo = {(e.scope, e.algorithm): e for e in bw.expectations}
    ring, tree = by_algo[("inter-node", "ring")], by_algo[("inter-node", "hierarchical")]
    assert ring.busbw_gbps == 200.0 and "capped" not in ring.reason and ring.limiter.startswith("8x ib")
    assert tree.busbw_gbps == 240.0 and tree.limiter.startswith("GPU0↔GPU1: NV12")


def test_ring_capped_by_the_node_says_so_where_it_gives_the_figure():
    bw = bandwidth_of("example:hgx-h100-8x400g-ib")
    ring = next(e for e in bw.expectations if (e.scope, e.algorithm) == ("inter-node", "ring"))
    assert ring.busbw_gbps == 370.8 and "capped at the intra-node ring bound 370.8 GB/s" in ring.reason
    assert ring.limiter.startswith("GPU0↔GPU1: NV18")


def test_pxn_pairs_name_the_relay_instead_of_contradicting_their_class():
    bw = bandwidth_of("example:dgx-a100")
    pair = next(p for p in bw.gpu_nic if (p.a, p.b) == ("GPU0", "NIC2"))
    assert pair.reason.startswith("GPU0↔NIC2: SYS (NCCL: PXN via GPU2) through PCIe Gen4 x16, 24 GB/s")


def test_gvnic_rails_give_an_inter_node_bound_without_rdma():
    bw = bandwidth_of("example:gcp-a3-highgpu-8g")
    assert bw.node_nic_gbps == 100.0 and not bw.node_nic_rdma
    ring = next(e for e in bw.expectations if (e.scope, e.algorithm) == ("inter-node", "ring"))
    assert ring.limiter == "4x gvnic at 200 Gb/s = 100 GB/s (not counted: eth0)"
    assert ring.assumptions[0].startswith("no RDMA NIC")


def test_text_groups_identical_pairs():
    from topodoc.report.bandwidth import render_model

    text = render_model(bandwidth_of("example:dgx-a100"))
    assert "  all 28 GPU pairs: NV12 through NVSwitch (12x NVLink3 per GPU), 240 GB/s effective" in text
    assert text.count("↔NIC") == 32  # the 16 PXB and 16 storage-NIC pairs by name, 48 PXN pairs counted
    assert "  SYS (NCCL: PXN) through PCIe Gen4 x16, 24 GB/s effective, line rate 31.51 GB/s:" \
        " the other 48 GPU-NIC pairs" in text
    text = render_model(bandwidth_of("example:dgx1-v100-hybrid-cube-mesh"))
    assert "    GPU0↔NIC2 via GPU4, GPU2↔NIC3 via GPU6, GPU4↔NIC0 via GPU0, GPU6↔NIC1 via GPU2" in text
    text = render_model(bandwidth_of("example:8xa100-pcie-2s-nvbridge-pairs"))
    assert "  NV3 through 3x NVLink3, 60 GB/s effective, line rate 75 GB/s:\n" \
        "    GPU0↔GPU1, GPU2↔GPU3, GPU4↔GPU5, GPU6↔GPU7\n" in text


def bandwidth_of(spec: str):
    from topodoc.probe.source import load_snapshot

    snap = load_snapshot(spec)
    return build(derive(snap), snap)
