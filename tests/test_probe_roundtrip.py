"""Record this very machine, replay it, and get the same snapshot; the committed recording of it
replays to its golden snapshot."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from conftest import gpu_box, load_tape, make_tree, run_cli

from topodoc import codec
from topodoc.probe.collect import collect
from topodoc.probe.host import Host, RootFs, TapeNvml, TapeRunner
from topodoc.probe.pci import DEVICES, _udev_names
from topodoc.probe.record import open_recording, write_recording
from topodoc.probe.source import load_snapshot

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "hosts" / "vm-1s-virtio-nogpu"


def comparable(snapshot):
    # source names where the snapshot came from, recorded_at when it was taken: both differ by design.
    return dataclasses.replace(snapshot, source="", recorded_at=None)


def test_record_then_replay_equals_live(tmp_path):
    live = collect(Host.live())
    summary = write_recording(Host.live(), tmp_path / "this.tar.gz")
    replayed = collect(open_recording(tmp_path / "this.tar.gz"), "this")
    assert summary.files > 10 and summary.links > 0
    assert replayed.source == "this"
    assert comparable(replayed) == comparable(live)
    assert live.pci and live.numa and live.net  # this machine has a PCI tree, a NUMA node and NICs


def test_replay_carries_recording_time_and_version(tmp_path):
    write_recording(Host.live(), tmp_path / "t.tar.gz")
    host = open_recording(tmp_path / "t.tar.gz")
    snapshot = collect(host)
    assert snapshot.recorded_at == host.meta["recorded_at"]
    assert snapshot.topodoc_version == host.meta["topodoc_version"]


def test_udev_enumeration_matches_sysfs_listing():
    names = _udev_names()
    listed = sorted(n for n in RootFs("/").listdir(DEVICES))
    if names is not None:  # libudev present: both views of the bus agree
        assert sorted(names) == listed
    assert listed


def test_committed_recording_replays_to_its_golden_snapshot():
    snapshot = load_snapshot(str(FIXTURE / "recording.tar.gz"))
    expected = codec.load((FIXTURE / "expected.json").read_text())
    assert snapshot == expected
    assert snapshot.host.sockets == 1 and not snapshot.gpus
    assert any(gap.what == "NVIDIA driver (NVML)" for gap in snapshot.gaps)


def test_cli_record_and_probe_from_round_trip(tmp_path):
    out = tmp_path / "cli.tar.gz"
    rec = subprocess.run(
        [sys.executable, "-m", "topodoc", "record", "-o", str(out)], capture_output=True, text=True
    )
    assert rec.returncode == 0, rec.stderr
    assert "wrote" in rec.stdout and out.is_file()
    replay = subprocess.run(
        [sys.executable, "-m", "topodoc", "probe", "--from", str(out), "--json"],
        capture_output=True,
        text=True,
    )
    live = subprocess.run(
        [sys.executable, "-m", "topodoc", "probe", "--json"], capture_output=True, text=True
    )
    assert replay.returncode == 0 and live.returncode == 0
    a, b = json.loads(replay.stdout), json.loads(live.stdout)
    for doc in (a, b):  # two processes: their own source/time, and each its own cpuset
        doc.pop("source"), doc.pop("recorded_at"), doc.pop("process_cpuset")
    assert a == b


def test_cli_probe_text_on_a_machine_without_gpus():
    out = run_cli("probe", "--from", str(FIXTURE / "recording.tar.gz"))
    assert out.returncode == 0
    assert "no NVIDIA GPU/driver found" in out.stdout
    assert "NUMA: 1 node(s)" in out.stdout and "eth0" in out.stdout


def test_source_date_epoch_gives_identical_archive_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    files, links = gpu_box()
    root = make_tree(tmp_path / "root", files, links)
    first, second = tmp_path / "a" / "box.tar.gz", tmp_path / "b" / "box.tar.gz"
    for out in (first, second):
        out.parent.mkdir()
        write_recording(Host(RootFs(root), TapeNvml(load_tape("healthy-8xh100")), TapeRunner({})), out)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1700000000}
    assert collect(open_recording(first)).recorded_at == "2023-11-14T22:13:20+00:00"


def test_bad_source_date_epoch_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "SOURCE_DATE_EPOCH": "yesterday"}
    out = subprocess.run([sys.executable, "-m", "topodoc", "record", "-o", str(tmp_path / "x.tar.gz")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "SOURCE_DATE_EPOCH" in out.stderr
