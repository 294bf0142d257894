"""Replay scratch (issue 10): extracted trees go away on SIGTERM/SIGHUP/SIGINT and at exit, trees a
killed process left are swept by the next one (never a live process's), and what a replay may unpack
into /dev/shm is bounded. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from topodoc.probe import record, replaycache, scratch
from topodoc.probe.record import open_recording

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
RECORDING = HOSTS / "vm-1s-virtio-nogpu" / "recording.tar.gz"
HOLD = (
    "import sys, time\n"
    "from topodoc.probe.record import open_recording\n"
    "print(open_recording(sys.argv[1]).fs.root, flush=True)\n"
    "time.sleep(120)\n"
)


def env_with(tmp: Path) -> dict:
    """Replays into scratch under ``tmp`` (the per-user replay cache off: it is what these test)."""
    return {**os.environ, "TMPDIR": str(tmp), replaycache.ENV_MB: "0"}


def replay_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(scratch.PREFIX + "*"))


def holding(tmp: Path) -> tuple[subprocess.Popen, Path]:
    """A process that replays the recording and waits; returns it and its extracted tree."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(RECORDING)], stdout=subprocess.PIPE,
                            text=True, env=env_with(tmp))
    tree = Path(proc.stdout.readline().strip()).parent
    assert (tree / "meta.json").is_file() and tree.parent.parent == tmp
    return proc, tree


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_a_replay_removes_the_extracted_tree(tmp_path, signum):
    proc, tree = holding(tmp_path)
    assert tree.parent.name.startswith(f"{scratch.PREFIX}{proc.pid}-")  # named with its pid
    proc.send_signal(signum)
    code = proc.wait(timeout=60)
    proc.stdout.close()
    assert code == -signum  # the handler cleans up, then dies of the same signal
    assert not tree.exists() and replay_dirs(tmp_path) == []


def test_the_next_replay_sweeps_what_a_killed_process_left(tmp_path):
    proc, tree = holding(tmp_path)
    proc.kill()  # SIGKILL: no handler runs
    proc.wait(timeout=60)
    proc.stdout.close()
    assert tree.exists()
    out = subprocess.run([sys.executable, "-m", "topodoc", "probe", "--from", str(RECORDING)],
                         capture_output=True, text=True, env=env_with(tmp_path))
    assert out.returncode == 0, out.stderr
    assert not tree.parent.exists() and replay_dirs(tmp_path) == []  # swept, and its own removed at exit


def test_a_live_process_tree_is_never_swept(tmp_path):
    proc, tree = holding(tmp_path)
    try:
        out = subprocess.run([sys.executable, "-m", "topodoc", "probe", "--from", str(RECORDING)],
                             capture_output=True, text=True, env=env_with(tmp_path))
        assert out.returncode == 0, out.stderr
        assert (tree / "meta.json").is_file()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stdout.close()
    assert replay_dirs(tmp_path) == []


def test_sweep_keeps_locked_other_users_and_unrelated_folders(tmp_path):
    dead = tmp_path / f"{scratch.PREFIX}999999999-abc"  # a pid that cannot be running
    dead.mkdir()
    (dead / "tree-x").mkdir()
    unrelated = tmp_path / f"{scratch.PREFIX}abcdefgh"  # an older topodoc's random name: not ours to judge
    unrelated.mkdir()
    link = tmp_path / f"{scratch.PREFIX}999999998-abc"
    link.symlink_to(unrelated)
    assert scratch.sweep(str(tmp_path)) == [str(dead)]
    assert unrelated.is_dir() and link.is_symlink()


def test_big_trees_go_to_disk_not_to_tmpfs(tmp_path, monkeypatch):
    fake_shm, disk = tmp_path / "shm", tmp_path / "disk"
    fake_shm.mkdir(), disk.mkdir()
    monkeypatch.setattr(scratch, "scratch_dir", lambda: str(fake_shm))
    monkeypatch.setattr("tempfile.tempdir", str(disk))
    assert scratch.place_for(scratch.SHM_MAX_BYTES) == str(fake_shm)
    assert scratch.place_for(scratch.SHM_MAX_BYTES + 1) is None
    monkeypatch.setattr(scratch, "SHM_MAX_BYTES", 4096)  # the recording's ~120 entries exceed it
    monkeypatch.setattr(record, "_cache", {})
    monkeypatch.setenv(replaycache.ENV_MB, "0")
    host = open_recording(RECORDING)
    assert Path(host.fs.root).is_relative_to(disk) and not any(fake_shm.iterdir())


def members_of_zeros(path: Path, count: int, mib: int) -> Path:
    """``count`` members of ``mib`` MiB of zeros each, as concatenated gzip members (a small file)."""
    import tarfile

    def gz(data: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()

    zeros = gz(bytes(1024 * 1024))
    with open(path, "wb") as out:
        for n in range(count):
            info = tarfile.TarInfo(f"fs/zero{n}")
            info.size = mib * 1024 * 1024
            out.write(gz(info.tobuf(format=tarfile.USTAR_FORMAT)))
            out.write(zeros * mib)
        out.write(gz(bytes(1024)))
    return path


def test_a_small_recording_that_unpacks_to_504_mb_is_refused(tmp_path):
    path = members_of_zeros(tmp_path / "fat.tar.gz", 8, 63)  # 8 x 63 MiB = 504 MiB
    assert path.stat().st_size < 3 * 1024 * 1024
    out = subprocess.run([sys.executable, "-m", "topodoc", "probe", "--from", str(path)],
                         capture_output=True, text=True, env=env_with(tmp_path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "unpacks to more than 268435456 bytes" in out.stderr
    assert replay_dirs(tmp_path) == []
