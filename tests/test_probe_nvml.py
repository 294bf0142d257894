"""NVML scenarios replayed from tapes through the real collector (no pynvml in sight)."""

from __future__ import annotations

import pytest
from conftest import gpu_box, load_tape

from topodoc.model import GapReason
from topodoc.probe.collect import collect
from topodoc.probe.host import Host, NotRecorded, NvmlError, RecordingNvml, RootFs, TapeNvml, TapeRunner
from topodoc.probe.nvml_gpus import collect_nvml, mask_to_cpulist


def older(gaps) -> list:
    """The gaps other than the one machine-level 'C2C links' gap every tape recorded before the C2C
    fields were asked carries (tests/test_probe_grace.py covers that one)."""
    machine = ("C2C links of", "GPU health checks of")  # later calls: each one machine-level gap
    return [g for g in gaps if not (g.what.startswith(machine) and g.reason is GapReason.NOT_RECORDED)]


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
    assert [g.index for g in gpus] == list(range(8))
    # a tape recorded before the C2C fields and the health checks were asked: one gap for the machine each,
    # not one per GPU or per value
    assert [(g.what, g.reason) for g in gaps] == [("C2C links of 8 GPUs", GapReason.NOT_RECORDED),
                                                  ("GPU health checks of 8 GPUs", GapReason.NOT_RECORDED)]
    gpu = gpus[5]
    assert gpu.pci_address == "0000:c3:00.0" and gpu.name == "NVIDIA H100 80GB HBM3"
    assert (gpu.pcie_gen, gpu.pcie_width, gpu.compute_capability) == (5, 16, "9.0")
    assert gpu.cpu_affinity == "56-111,168-223"
    # nvmlDeviceGetNumaNodeId is the GPU NUMA ID (this tape answers the socket); the nearest CPU node
    # comes from sysfs in collect(), never from that call
    assert gpu.gpu_numa_id == 1 and gpu.numa_node is None and gpu.c2c_links is None
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
    assert [(g.what, g.reason) for g in older(gaps)] == [("GPU 3", GapReason.ERROR)]


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
    assert gpus[0].gpu_numa_id is None and gpus[0].pcie_gpu_max_gen is None
    assert gpus[0].nvlinks[0].remote_type is None and gpus[0].nvlinks[0].remote_pci_address == "0000:05:00.0"
    missing = {g.what for g in gaps if g.reason is GapReason.MISSING and g.detail == "FunctionNotFound"}
    assert "remote type of 18 NVLinks of GPU 0" in missing and "GPU NUMA ID of 8 GPUs" in missing
    assert not any("GPU NUMA ID of GPU" in g.what for g in gaps)


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


def edited(name: str, rule) -> dict:
    tape = load_tape(name)
    tape["calls"] = [c for c in map(rule, tape["calls"]) if c is not None]
    return tape


def link_state_calls(tape: dict) -> list[tuple[int, int]]:
    recorder = RecordingNvml(TapeNvml(tape))
    collect_nvml(recorder, [])
    return [tuple(c["args"]) for c in recorder.tape["calls"] if c["fn"] == "nvmlDeviceGetNvLinkState"]


def test_link_count_field_bounds_the_scan():
    calls = link_state_calls(load_tape("healthy-8xh100"))
    assert len(calls) == 8 * 18 and max(link for _gpu, link in calls) == 17  # no failing calls on the tape


def test_without_the_link_count_every_link_is_tried_and_absent_ones_skipped():
    assert len(link_state_calls(load_tape("old-driver"))) == 8 * 36
    _driver, gpus, _pairs, gaps = run("old-driver")
    assert all(len(g.nvlinks) == 18 for g in gpus) and not any(g.what.startswith("NVLink") for g in gaps)


def test_holes_in_the_link_numbering_are_allowed():
    def rule(call):
        args = call["args"]
        if call["fn"].startswith("nvmlDeviceGetNvLink") and args[0] == 0 and args[1] in (2, 5):
            return {**call, "code": 3, "value": None} if call["fn"].endswith("State") else None
        return call

    gaps = []
    _driver, gpus, _pairs = collect_nvml(TapeNvml(edited("healthy-8xh100", rule)), gaps)
    assert [link.link for link in gpus[0].nvlinks] == [0, 1, 3, 4] + list(range(6, 18))
    assert len(gpus[1].nvlinks) == 18 and older(gaps) == []


def test_tapes_recorded_before_the_link_count_still_replay():
    """The older recorder asked link after link until the first absent one and stopped there."""

    def legacy(call):
        return None if call["fn"] == "nvmlDeviceGetFieldValues" else call

    tape = edited("healthy-8xh100", legacy)
    tape["calls"] += [{"fn": "nvmlDeviceGetNvLinkState", "args": [i, 18], "code": 2} for i in range(8)]
    gaps = []
    _driver, gpus, _pairs = collect_nvml(TapeNvml(tape), gaps)
    assert [len(g.nvlinks) for g in gpus] == [18] * 8 and older(gaps) == []
    bare = edited("healthy-8xh100", lambda c: None if "NvLink" in c["fn"] or "Field" in c["fn"] else c)
    gaps = []
    collect_nvml(TapeNvml(bare), gaps)
    assert {(g.what, g.reason) for g in gaps if "NVLink" in g.what} == {
        (f"NVLink 0 of GPU {i}", GapReason.NOT_RECORDED) for i in range(8)
    }


def test_a_link_that_fails_otherwise_is_a_gap_and_the_scan_goes_on():
    def rule(call):
        if call["fn"] == "nvmlDeviceGetNvLinkState" and call["args"][0] == 2 and call["args"][1] in (4, 9):
            return {**call, "code": 4, "value": None}
        return call

    gaps = []
    _driver, gpus, _pairs = collect_nvml(TapeNvml(edited("healthy-8xh100", rule)), gaps)
    assert len(gpus[2].nvlinks) == 16 and gpus[2].nvlinks[-1].link == 17
    assert [(g.what, g.reason) for g in older(gaps)] == [("2 NVLinks of GPU 2", GapReason.PERMISSION)]
