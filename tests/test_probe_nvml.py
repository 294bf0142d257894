"""NVML scenarios replayed from tapes through the real collector (no pynvml in sight)."""

from __future__ import annotations

import pytest
from conftest import gpu_box, load_tape

from topodoc.model import GapReason
from topodoc.probe.collect import collect
from topodoc.probe.host import Host, NotRecorded, NvmlError, RecordingNvml, RootFs, TapeNvml, TapeRunner
from topodoc.probe.nvml_gpus import collect_nvml, mask_to_cpulist


def run(name: str):
    gaps = []
    driver, gpus, pairs = collect_nvml(TapeNvml(load_tape(name)), gaps)
    return driver, gpus, pairs, gaps


def test_healthy_eight_gpu_box():
    driver, gpus, pairs, gaps = run("healthy-8xh100")
    assert (driver.driver_version, driver.cuda_driver_version, driver.nvml_available) == (
        "550.54.15",
        12040,
        True,
    )
    assert [g.index for g in gpus] == list(range(8)) and not gaps
    gpu = gpus[5]
    assert gpu.pci_address == "0000:c3:00.0" and gpu.name == "NVIDIA H100 80GB HBM3"
    assert (gpu.pcie_gen, gpu.pcie_width, gpu.compute_capability) == (5, 16, "9.0")
    assert gpu.numa_node == 1 and gpu.cpu_affinity == "56-111,168-223"
    assert len(gpu.nvlinks) == 18 and all(
        link.remote_type == "switch" and link.version == 6 for link in gpu.nvlinks
    )
    assert gpu.nvlinks[1].remote_pci_address == "0000:06:00.0"
    assert gpu.mig_mode is False and gpu.persistence_mode is True and gpu.fabric.state == "not_supported"
    assert len(pairs) == 28
    ancestors = {(p.a, p.b): p.common_ancestor for p in pairs}
    assert ancestors[(0, 3)] == "NODE" and ancestors[(3, 4)] == "SYS"
    assert all(p.p2p_read == "OK" and p.p2p_nvlink == "OK" for p in pairs)


def test_one_lost_gpu_spoils_nothing_else():
    _driver, gpus, pairs, gaps = run("one-gpu-lost")
    assert [g.lost for g in gpus] == [i == 3 for i in range(8)]
    assert gpus[4].name == "NVIDIA H100 80GB HBM3" and len(gpus[4].nvlinks) == 18
    assert len(pairs) == 21 and all(3 not in (p.a, p.b) for p in pairs)
    assert [(g.what, g.reason) for g in gaps] == [("GPU 3", GapReason.ERROR)]


def test_not_supported_is_data_not_failure():
    _driver, gpus, pairs, gaps = run("not-supported-fields")
    gpu = gpus[0]
    assert gpu.serial is None and gpu.fabric is None and gpu.nvlinks == () and gpu.persistence_mode is None
    assert gpu.name and gpu.pci_address == "0000:1b:00.0"
    reasons = {(g.what, g.reason) for g in gaps}
    assert ("serial of GPU 0", GapReason.UNSUPPORTED) in reasons
    assert not any("NVLink" in g.what for g in gaps)  # a board without NVLink is not a gap
    assert {p.p2p_nvlink for p in pairs} == {"NS"} and {p.p2p_read for p in pairs} == {"OK"}


def test_old_driver_lacks_newer_functions():
    driver, gpus, _pairs, gaps = run("old-driver")
    assert driver.cuda_driver_version == 11000  # the pre-_v2 call answered
    assert gpus[0].numa_node is None and gpus[0].pcie_gpu_max_gen is None
    assert gpus[0].nvlinks[0].remote_type is None and gpus[0].nvlinks[0].remote_pci_address == "0000:05:00.0"
    missing = {g.what for g in gaps if g.reason is GapReason.MISSING and g.detail == "FunctionNotFound"}
    assert "remote type of 18 NVLinks of GPU 0" in missing and "NUMA node of GPU 7" in missing


@pytest.mark.parametrize(
    "name, words", [("library-not-found", "not found"), ("driver-not-loaded", "not loaded")]
)
def test_no_driver(name, words):
    driver, gpus, pairs, gaps = run(name)
    assert not driver.nvml_available and gpus == () and pairs == ()
    assert gaps[0].reason is GapReason.MISSING and words in gaps[0].detail


def test_gpu_numa_falls_back_to_sysfs_when_nvml_lacks_it(tmp_path):
    from conftest import make_tree

    files, links = gpu_box()
    root = make_tree(tmp_path / "r", files, links)
    tape = load_tape("old-driver")
    for call in tape["calls"]:  # put GPU 0 at the box's only GPU address
        if call["fn"] == "nvmlDeviceGetPciInfo" and call["args"] == [0]:
            call["value"]["busId"] = "00000000:1A:00.0"
    snapshot = collect(Host(RootFs(root), TapeNvml(tape), TapeRunner({})))
    assert snapshot.gpus[0].pci_address == "0000:1a:00.0" and snapshot.gpus[0].numa_node == 0
    assert snapshot.gpus[1].numa_node is None


def test_recording_nvml_keeps_error_codes():
    inner = TapeNvml(load_tape("not-supported-fields"))
    recorder = RecordingNvml(inner)
    collect_nvml(recorder, [])
    replayed = TapeNvml(recorder.tape)
    with pytest.raises(NvmlError) as err:
        replayed.call("nvmlDeviceGetSerial", 2)
    assert err.value.code == 3
    with pytest.raises(NotRecorded):
        replayed.call("nvmlDeviceGetBoardId", 0)


def test_affinity_words_to_cpulist():
    assert mask_to_cpulist([0b1111, 1 << 63]) == "0-3,127"
    assert mask_to_cpulist([0] * 4) is None
