"""Grace NVML values on tapes: NVLink-C2C links and bandwidth, the GPU NUMA ID, and how quietly a PCIe
GPU, an older driver and an older recording say they have none."""

from __future__ import annotations

from conftest import load_tape
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.model import GapReason
from topodoc.probe.host import NvmlError, TapeNvml
from topodoc.probe.nvml_gpus import collect_nvml
from topodoc.probe.nvml_grace import c2c


def call(fn: str, args: list, value=None, code: int = 0) -> dict:
    return {"fn": fn, "args": args, "code": code, "value": value}


def field(fid: int, value, code: int = 0, scope: int = 0) -> dict:
    return {"fieldId": fid, "scopeId": scope, "nvmlReturn": code, "valueType": 1,
            "value": value if code == 0 else None}


def grace_calls(i: int, numa_id: int, links: list[tuple[int, int]]) -> list[dict]:
    """A GB200 GPU's answers: its NUMA id, the C2C link count, then (status, MB/s) per link."""
    pairs = [[f, n] for n in range(len(links)) for f in (171, 172)]
    per_link = [field(f, (status if f == 171 else bw), scope=n)
                for n, (status, bw) in enumerate(links) for f in (171, 172)]
    return [call("nvmlDeviceGetNumaNodeId", [i], numa_id),
            call("nvmlDeviceGetFieldValues", [i, [170]], [field(170, len(links))]),
            call("nvmlDeviceGetFieldValues", [i, pairs], per_link)]


def pcie_calls(i: int) -> list[dict]:
    """What a non-Grace driver answers: NotSupported for the call and for the field."""
    return [call("nvmlDeviceGetNumaNodeId", [i], code=3),
            call("nvmlDeviceGetFieldValues", [i, [170]], [field(170, None, code=3)])]


def tape_with(extra: list[dict]) -> dict:
    tape = load_tape("healthy-8xh100")
    keys = {(c["fn"], repr(c["args"])) for c in extra}
    tape["calls"] = [c for c in tape["calls"] if (c["fn"], repr(c["args"])) not in keys] + extra
    return tape


def collect(tape: dict):
    """The GPUs and gaps, less the one gap a tape without the health checks' answers adds."""
    gaps = []
    _driver, gpus, _pairs = collect_nvml(TapeNvml(tape), gaps)
    return gpus, [g for g in gaps if not g.what.startswith("GPU health checks of")]


def grace_gaps(gaps) -> list:
    return [(g.what, g.reason) for g in gaps if g.what.startswith(("C2C links", "GPU NUMA ID"))]


def test_gb200_c2c_links_bandwidth_and_gpu_numa_ids():
    numa_ids = [2, 10, 18, 26, 34, 42, 50, 58]
    gpus, gaps = collect(tape_with([c for i, n in enumerate(numa_ids)
                                    for c in grace_calls(i, n, [(1, 45000)] * 5)]))
    assert [g.gpu_numa_id for g in gpus] == numa_ids
    assert {(g.c2c_links, g.c2c_bandwidth_gbps) for g in gpus} == {(5, 225.0)}
    assert grace_gaps(gaps) == []


def test_a_c2c_link_down_is_not_counted_as_nccl_does():
    gpus, _gaps = collect(tape_with(grace_calls(0, 2, [(1, 45000), (0, 45000), (1, 45000)])))
    assert (gpus[0].c2c_links, gpus[0].c2c_bandwidth_gbps) == (2, 90.0)


def test_pcie_gpus_have_no_c2c_and_no_gpu_numa_id_and_no_gaps_for_it():
    gpus, gaps = collect(tape_with([c for i in range(8) for c in pcie_calls(i)]))
    assert {(g.c2c_links, g.c2c_bandwidth_gbps, g.gpu_numa_id) for g in gpus} == {(0, None, None)}
    assert grace_gaps(gaps) == [] and gaps == []


def test_an_older_recording_gives_one_gap_per_value_not_one_per_gpu():
    tape = load_tape("healthy-8xh100")
    tape["calls"] = [c for c in tape["calls"] if c["fn"] != "nvmlDeviceGetNumaNodeId"]
    gpus, gaps = collect(tape)
    assert {(g.c2c_links, g.gpu_numa_id) for g in gpus} == {(None, None)}
    assert sorted(grace_gaps(gaps)) == [("C2C links of 8 GPUs", GapReason.NOT_RECORDED),
                                        ("GPU NUMA ID of 8 GPUs", GapReason.NOT_RECORDED)]


def test_an_older_driver_without_the_numa_call_is_one_missing_gap():
    gpus, gaps = collect(tape_with([call("nvmlDeviceGetNumaNodeId", [i], code=13) for i in range(8)]
                                   + [c for i in range(8) for c in pcie_calls(i)[1:]]))
    assert grace_gaps(gaps) == [("GPU NUMA ID of 8 GPUs", GapReason.MISSING)]
    assert gaps[-1].detail == "FunctionNotFound" and all(g.c2c_links == 0 for g in gpus)


def test_a_failing_field_on_one_gpu_is_named_for_that_gpu_only():
    broken = call("nvmlDeviceGetFieldValues", [3, [170]], [field(170, None, code=4)])
    calls = [broken if c["args"] == [3, [170]] else c for i in range(8) for c in pcie_calls(i)]
    gpus, gaps = collect(tape_with(calls))
    assert grace_gaps(gaps) == [("C2C links of GPU 3", GapReason.PERMISSION)]
    assert gpus[3].c2c_links is None and gpus[2].c2c_links == 0


class FieldNvml:
    """Answers the two C2C field calls from a list of (status code, status, MB/s) per link."""

    def __init__(self, links):
        self.links = links

    def __call__(self, fn, i, ids):
        if ids == [170]:
            return [field(170, len(self.links))]
        out = []
        for fid, link in ids:
            code, status, bw = self.links[link]
            out.append(field(fid, status if fid == 171 else bw, code=code, scope=link))
        return out


links_strategy = st.lists(st.tuples(st.sampled_from([0, 0, 3, 4]), st.integers(0, 2),
                                    st.integers(0, 100_000)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(links_strategy)
def test_c2c_bandwidth_is_nccls_formula(links):
    misses = []
    count, gbps = c2c(FieldNvml(links), 0, misses)
    up = [bw for code, status, bw in links if code == 0 and status == 1]
    assert count == len(up) and not misses
    assert gbps == (round(up[-1] * len(up) / 1000, 3) if up else None)


def test_a_whole_call_not_supported_means_none():
    def refuse(fn, *args):
        raise NvmlError(3)

    misses = []
    assert c2c(refuse, 0, misses) == (0, None) and misses == []
