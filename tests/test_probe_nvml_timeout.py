"""NVML calls that never return, through the Host seam: ``TimedNvml`` wraps any object with ``call``
(here a tape that blocks on chosen calls), so a hung GPU becomes one gap, its later calls are not made,
the other GPUs are read in full, and the overall deadline stops the rest. Bounds are generous: what is
asserted is that the probe ends, not how fast."""

from __future__ import annotations

import threading
import time

from conftest import gpu_box, load_tape, make_tree, run_cli

from topodoc.model import GapReason
from topodoc.probe.collect import collect
from topodoc.probe.host import Deadline, Host, NvmlError, RootFs, TapeNvml, TapeRunner, TimedNvml
from topodoc.probe.record import open_recording, write_recording

FOREVER = 3600


class HangingNvml:
    """The healthy 8x H100 tape, except that calls accepted by ``hangs`` block (as a GPU that fell off
    the bus blocks inside the driver) until the test ends."""

    def __init__(self, hangs) -> None:
        self.tape = TapeNvml(load_tape("healthy-8xh100"))
        self.hangs = hangs
        self.calls: list[tuple] = []
        self.release = threading.Event()

    def call(self, fn, *args):
        self.calls.append((fn, *args))
        if self.hangs(fn, args):
            self.release.wait(FOREVER)
            raise NvmlError(15)
        return self.tape.call(fn, *args)


def probe(tmp_path, nvml, deadline=None):
    files, links = gpu_box()
    root = make_tree(tmp_path / "root", files, links)
    host = Host(RootFs(root), TimedNvml(nvml, call_timeout=1.0, deadline=deadline), TapeRunner({}))
    start = time.monotonic()
    try:
        return collect(host), time.monotonic() - start
    finally:
        nvml.release.set()


def test_a_call_that_never_returns_is_one_gap_and_that_gpu_is_asked_nothing_more(tmp_path):
    nvml = HangingNvml(lambda fn, args: fn == "nvmlDeviceGetCudaComputeCapability" and args[:1] == (2,))
    snap, took = probe(tmp_path, nvml)
    assert took < 60
    gaps = [g for g in snap.gaps if g.what == "GPU 2"]
    assert len(gaps) == 1 and gaps[0].reason is GapReason.ERROR and "did not return" in gaps[0].detail
    after = nvml.calls[nvml.calls.index(("nvmlDeviceGetCudaComputeCapability", 2)) + 1 :]
    pair = ("nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor")
    assert not [c for c in after if c[0].startswith("nvmlDevice") and 2 in c[1 : 3 if c[0] in pair else 2]]
    assert [g.index for g in snap.gpus if g.uuid] == [0, 1, 3, 4, 5, 6, 7]
    assert not snap.gpus[2].lost  # a GPU that hangs is not known to be lost


def test_a_hung_system_call_stops_every_later_call(tmp_path):
    nvml = HangingNvml(lambda fn, args: fn == "nvmlDeviceGetCount")
    snap, took = probe(tmp_path, nvml)
    assert took < 60 and snap.gpus == ()
    assert nvml.calls[-1] == ("nvmlDeviceGetCount",)
    assert any(g.what == "GPU count" and "did not return" in g.detail for g in snap.gaps)


def test_the_overall_deadline_reports_what_was_read_and_the_rest_as_gaps(tmp_path):
    # every GPU hangs: without a deadline that is 8 x the call timeout; the deadline ends it sooner
    nvml = HangingNvml(lambda fn, args: fn == "nvmlDeviceGetPciInfo")
    snap, took = probe(tmp_path, nvml, Deadline.after(2.5))
    assert took < 60
    assert snap.driver.driver_version and len(snap.gpus) == 8 and snap.pci  # what it had
    details = " ".join(g.detail for g in snap.gaps if g.what.startswith("GPU "))
    assert "did not return" in details and "overall deadline of 2.5 s had passed" in details
    assert len(nvml.calls) < 20


def test_a_timeout_recorded_replays_as_the_same_gaps(tmp_path):
    nvml = HangingNvml(lambda fn, args: fn == "nvmlDeviceGetMemoryInfo" and args[:1] == (5,))
    files, links = gpu_box()
    root = make_tree(tmp_path / "root", files, links)
    live = Host(RootFs(root), TimedNvml(nvml, call_timeout=1.0), TapeRunner({}))
    try:
        write_recording(live, tmp_path / "hung.tar.gz")
    finally:
        nvml.release.set()
    replay = collect(open_recording(tmp_path / "hung.tar.gz"))
    gap = [g for g in replay.gaps if g.what == "GPU 5"]
    assert len(gap) == 1 and gap[0].detail.startswith("Timeout")
    assert [g.index for g in replay.gpus if g.uuid] == [0, 1, 2, 3, 4, 6, 7]


def test_deadline_option_is_validated():
    for command in ("probe", "diagnose", "record"):
        extra = ("-o", "x.tar.gz") if command == "record" else ()
        result = run_cli(command, *extra, "--deadline", "-1")
        assert result.returncode == 2 and "--deadline" in result.stderr
