"""Faults at the seam: unreadable, vanished and garbage files, numa_node -1, nvidia-smi hung or absent.
Each yields gaps and a snapshot, never a traceback."""

from __future__ import annotations

import os
import sys
import time

import pytest
from conftest import gpu_box, load_tape, make_tree

from topodoc.model import GapReason
from topodoc.probe.collect import collect
from topodoc.probe.host import CommandResult, FsError, Host, LiveRunner, RootFs, TapeNvml, TapeRunner
from topodoc.probe.smi import collect_smi_topo

GPU = "/sys/bus/pci/devices/0000:1a:00.0"


def box(tmp_path, edit=None, failures=None, runner=None):
    files, links = gpu_box()
    if edit:
        edit(files, links)
    root = make_tree(tmp_path / "root", files, links)
    fs = RootFs(root, failures)
    return collect(Host(fs, TapeNvml(load_tape("healthy-8xh100")), runner or TapeRunner({})))


def gaps_about(snapshot, text):
    return [g for g in snapshot.gaps if text in g.what]


def test_the_box_reads_clean(tmp_path):
    snap = box(tmp_path)
    gpu = snap.pci["0000:1a:00.0"]
    assert gpu.parent == "0000:17:00.0" and gpu.host_bridge == "pci0000:15" and gpu.driver == "nvidia"
    assert [snap.pci[a].port_type for a in ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0")] == [
        "root_port",
        "upstream",
        "downstream",
    ]
    assert gpu.link.speed_gts == 16.0 and gpu.link.max_speed_gts == 32.0 and gpu.link.width == 16
    nic = snap.nics[0]
    assert (nic.name, nic.kind, nic.pci_address, nic.vendor_id, nic.netdevs) == (
        "mlx5_0",
        "ib",
        "0000:18:00.0",
        0x15B3,
        ("ib0",),
    )
    port = nic.ports[0]
    assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == (
        "ACTIVE",
        "LinkUp",
        400.0,
        "InfiniBand",
    )
    assert [(g.index, g.type) for g in port.gids] == [(0, "IB/RoCE v1"), (2, "RoCE v2")]
    assert (
        snap.kernel.peermem_module == "nvidia_peermem" and snap.kernel.dmabuf_supported is True
    )  # open module, 5.15
    assert not gaps_about(snap, "of 0000")


def test_dmabuf_needs_kernel_5_12(tmp_path):
    snap = box(tmp_path, lambda f, _l: f.update({"/proc/sys/kernel/osrelease": "5.4.0-150-generic\n"}))
    assert snap.kernel.dmabuf_supported is False and snap.kernel.nvidia_open_kernel_module is True


def test_unreadable_file_is_a_permission_gap(tmp_path):
    failures = {f"{GPU}/current_link_speed": (GapReason.PERMISSION, "Permission denied")}
    snap = box(tmp_path, failures=failures)
    assert snap.pci["0000:1a:00.0"].link.speed_gts is None
    assert snap.pci["0000:1a:00.0"].link.width == 16
    (gap,) = gaps_about(snap, "current_link_speed")
    assert gap.reason is GapReason.PERMISSION


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_mode_000_file_reads_as_permission(tmp_path):
    root = make_tree(tmp_path / "r", {"/proc/cmdline": "quiet\n"})
    os.chmod(root / "proc" / "cmdline", 0)
    with pytest.raises(FsError) as err:
        RootFs(root).read_text("/proc/cmdline")
    assert err.value.reason is GapReason.PERMISSION


def test_vanished_device_and_file(tmp_path):
    def edit(files, links):
        links["/sys/bus/pci/devices/0000:99:00.0"] = "../../../devices/pci0000:99/0000:99:00.0"  # dangling
        del files["/proc/sys/kernel/hostname"]

    snap = box(tmp_path, edit)
    assert snap.host.hostname is None and gaps_about(snap, "hostname")[0].reason is GapReason.MISSING
    ghost = snap.pci["0000:99:00.0"]
    assert (
        ghost.class_code is None and gaps_about(snap, "class of 0000:99:00.0")[0].reason is GapReason.MISSING
    )
    assert snap.pci["0000:1a:00.0"].class_code == 0x030200  # the others are untouched


@pytest.mark.parametrize(
    "attr, content",
    [("numa_node", "banana\n"), ("current_link_width", "x16\n"), ("class", "\x00\x01garbage\n")],
)
def test_garbage_in_numeric_files(tmp_path, attr, content):
    path = f"/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:1a:00.0/{attr}"
    snap = box(tmp_path, lambda f, _l: f.update({path: content}))
    (gap,) = gaps_about(snap, f"{attr} of 0000:1a:00.0")
    assert gap.reason is GapReason.ERROR and "cannot parse" in gap.detail
    assert snap.pci["0000:1a:00.0"].vendor_id == 0x10DE


def test_numa_node_minus_one_is_kept(tmp_path):
    path = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:1a:00.0/numa_node"
    snap = box(tmp_path, lambda f, _l: f.update({path: "-1\n"}))
    assert snap.pci["0000:1a:00.0"].numa_node == -1
    assert not gaps_about(snap, "numa_node")


def test_garbage_in_a_nic_port_and_numa_files(tmp_path):
    def edit(files, _links):
        files["/sys/class/infiniband/mlx5_0/ports/1/rate"] = "fast\n"
        files["/sys/devices/system/node/node0/distance"] = "10 ten\n"

    snap = box(tmp_path, edit)
    assert snap.nics[0].ports[0].rate_gbps is None and snap.nics[0].ports[0].rate_text == "fast"
    assert snap.numa[0].distances == () and gaps_about(snap, "distances of NUMA node 0")


class FixedRunner:
    def __init__(self, result):
        self.result = result

    def run(self, argv, timeout):
        return CommandResult(argv, **self.result)


@pytest.mark.parametrize(
    "result, reason, words",
    [
        ({"timed_out": True}, GapReason.ERROR, "no answer within"),
        ({"missing": True}, GapReason.MISSING, "not installed"),
        (
            {
                "returncode": 9,
                "stderr": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            },
            GapReason.ERROR,
            "exit 9",
        ),
    ],
)
def test_nvidia_smi_failures(result, reason, words):
    gaps = []
    assert collect_smi_topo(FixedRunner(result), gaps) is None
    assert gaps[0].reason is reason and words in gaps[0].detail


def test_nvidia_smi_output_parsed_beside_probe(tmp_path):
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t0-55\t0\t\tN/A\n"
        "GPU1\tNV18\t X \t0-55\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
    )
    gaps = []
    matrix = collect_smi_topo(FixedRunner({"returncode": 0, "stdout": text}), gaps)
    assert matrix is not None and matrix.links["GPU0"]["GPU1"] == "NV18" and not gaps


def test_live_runner_cuts_a_hung_command_at_the_timeout():
    start = time.monotonic()
    result = LiveRunner().run(
        [sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(30)"], 1.0
    )
    assert result.timed_out and result.returncode is None and time.monotonic() - start < 10
    assert "hi" in result.stdout


def test_live_runner_reports_a_missing_binary():
    result = LiveRunner().run(["nvidia-smi-that-does-not-exist", "topo", "-m"], 5)
    assert result.missing and not result.timed_out


def test_hung_smi_in_a_full_probe_is_a_gap(tmp_path):
    snap = box(tmp_path, runner=FixedRunner({"timed_out": True}))
    assert snap.smi_topo is None and gaps_about(snap, "nvidia-smi")[0].reason is GapReason.ERROR
    assert len(snap.gpus) == 8


def test_symlinks_cannot_lead_outside_the_root(tmp_path):
    outside = tmp_path / "secret"
    outside.write_text("do not read")
    root = make_tree(
        tmp_path / "r", {"/sys/x": "in\n"}, {"/sys/abs": str(outside), "/sys/up": "../../../../secret"}
    )
    fs = RootFs(root)
    with pytest.raises(FsError):
        fs.read_text("/sys/abs")  # absolute targets are re-rooted: <root>/<tmp>/secret does not exist
    with pytest.raises(FsError):
        fs.read_text("/sys/up")  # '..' stops at the root
    assert fs.realpath("/sys/up") == "/secret"
