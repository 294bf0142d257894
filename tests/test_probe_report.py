"""The text ``topodoc probe`` prints: one line per distinct answer, not one per GPU or pair."""

from __future__ import annotations

import pytest

from topodoc.probe.source import load_snapshot
from topodoc.report.probe import index_ranges, render_probe


@pytest.fixture(scope="module")
def dgx_text() -> str:
    return render_probe(load_snapshot("example:dgx-a100"))


def test_gaps_repeated_per_gpu_are_one_line(dgx_text):
    # (a PCIe GPU's NotSupported GPU NUMA ID / C2C links is "none", not a gap: tests/test_probe_grace.py)
    # (Ampere remaps rows instead of retiring pages: NVML's NotSupported there is said once as well)
    section = dgx_text.split("Could not read (9):\n")[1].splitlines()
    assert section == ["  fabric info of GPUs 0-7: unsupported -- NotSupported",
                       "  retired pages of 8 GPUs: unsupported -- NotSupported"]


def test_gpu_pairs_grouped_by_answer(dgx_text):
    section = dgx_text.split("GPU pairs (NVML common ancestor / P2P read / NVLink P2P):\n")[1]
    lines = section.split("\n\n")[0].splitlines()
    assert lines == [
        "  PXB, P2P read OK, NVLink P2P OK: GPU0-GPU1, GPU2-GPU3, GPU4-GPU5, GPU6-GPU7",
        "  SYS, P2P read OK, NVLink P2P OK: the other 24 pairs",
    ]


def test_gpu_off_the_nvlink_fabric_stands_out():
    text = render_probe(load_snapshot("example:hgx-h100-degraded-nvswitch-incomplete"))
    off_fabric = [line for line in text.splitlines() if "NVLink P2P NS" in line]
    assert off_fabric and all("GPU6" in line for line in off_fabric)
    assert sum(line.count("GPU6") for line in off_fabric) == 7


def test_a_gap_on_one_gpu_names_that_gpu():
    from dataclasses import replace

    from topodoc.model import Gap, GapReason

    snap = load_snapshot("example:dgx-a100")
    lost = Gap(what="NVLink 7 of GPU 2", reason=GapReason.ERROR, source="nvml", detail="GpuIsLost")
    text = render_probe(replace(snap, gaps=(*snap.gaps, lost)))
    assert "  NVLink 7 of GPU 2: error -- GpuIsLost" in text.splitlines()


@pytest.mark.parametrize(
    "indexes, text", [([0, 1, 2, 3], "0-3"), ([5], "5"), ([7, 0, 1, 3, 3], "0-1,3,7"), ([2, 4, 6], "2,4,6")]
)
def test_index_ranges(indexes, text):
    assert index_ranges(indexes) == text


def test_nvswitch_functions_are_named():
    from topodoc.probe.source import load_snapshot
    from topodoc.report.probe import render_probe

    text = render_probe(load_snapshot("example:dgx-a100"))
    assert text.count(" NVSwitch [10de:1af1]") == 6  # DGX A100: six NVSwitch chips


def test_ethernet_nics_show_their_link_speed():
    from topodoc.probe.source import load_snapshot
    from topodoc.report.probe import render_probe

    text = render_probe(load_snapshot("example:gcp-a3-highgpu-8g"))
    assert "eth1 [gvnic] at 0000:06:00.0 driver=gve netdevs eth1: eth1 up 200 Gb/s MTU 8244" in text


def test_health_values_and_error_counters_are_shown_where_they_are():
    text = render_probe(load_snapshot("example:hgx-h100-degraded-health"))
    health = [line.strip() for line in text.splitlines() if line.strip().startswith("health:")]
    assert len(health) == 8
    assert "uncorrected 2 since load / 2 lifetime" in health[2] and "2 uncorrected PENDING" in health[2]
    assert "88 C (slowdown 89 C)" in health[5] and "clocks hw_slowdown/hw_thermal" in health[5]
    assert "NVLink errors since the driver loaded: link 4 replay=37 recovery=2 crc_flit=1520" in text
    assert "errors symbol_error=418 link_downed=1 link_error_recovery=3" in text
