"""``topodoc record -o`` (issue 10): the archive is created 0600, an existing symlink at the output
path is replaced and never followed, and a failed write leaves no partial file (the old archive, if
any, stays whole)."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
import tarfile

import pytest

from topodoc.probe import archive as arch
from topodoc.probe.archive import Members, write_archive


def members() -> Members:
    found = Members()
    found.dirs = {"fs", "fs/proc"}
    found.files = {"meta.json": b'{"format": 1}', "fs/proc/cmdline": b"quiet\n" * 1000}
    found.links = {"fs/self": "proc"}
    return found


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(".topodoc-record-")]


def test_archive_is_created_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        write_archive(str(tmp_path / "r.tar.gz"), members(), mtime=0)
    finally:
        os.umask(old)
    assert mode(tmp_path / "r.tar.gz") == 0o600 and leftovers(tmp_path) == []


def test_an_existing_symlink_at_the_output_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    out = tmp_path / "r.tar.gz"
    out.symlink_to(victim)
    write_archive(str(out), members(), mtime=0)
    assert victim.read_bytes() == b"precious\n"
    assert not out.is_symlink() and mode(out) == 0o600
    with tarfile.open(out) as tar:
        assert tar.extractfile("fs/proc/cmdline").read() == b"quiet\n" * 1000


def test_a_failed_write_leaves_the_old_archive_whole_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "r.tar.gz"
    out.write_bytes(b"the previous recording")
    calls = []

    def full_disk(self, info, fileobj=None):
        calls.append(info.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, info, fileobj)

    real = tarfile.TarFile.addfile
    monkeypatch.setattr(tarfile.TarFile, "addfile", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_archive(str(out), members(), mtime=0)
    assert out.read_bytes() == b"the previous recording" and leftovers(tmp_path) == []


def test_same_members_still_give_the_same_bytes(tmp_path):
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    write_archive(str(first), members(), mtime=1700000000)
    write_archive(str(second), members(), mtime=1700000000)
    assert first.read_bytes() == second.read_bytes()
    dest = tmp_path / "out"
    dest.mkdir()
    arch.extract_archive(str(first), str(dest))
    assert (dest / "fs" / "self").readlink() == tmp_path.joinpath("proc").relative_to(tmp_path)


def record(out, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topodoc", "record", "-o", str(out)],
                          capture_output=True, text=True, **kwargs)


def test_cli_record_through_a_symlink_writes_a_private_file_and_leaves_the_target(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    out = tmp_path / "box.tar.gz"
    out.symlink_to(victim)
    proc = record(out)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_bytes() == b"precious\n" and not out.is_symlink() and mode(out) == 0o600
    assert leftovers(tmp_path) == []


def test_cli_record_on_a_full_disk_is_one_line_exit_2_and_no_partial_file(tmp_path):
    out = tmp_path / "box.tar.gz"
    out.write_bytes(b"the previous recording")

    def small_disk():  # every file this process writes stops at 2 KiB (EFBIG; Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    proc = record(out, preexec_fn=small_disk)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "cannot write" in proc.stderr
    assert out.read_bytes() == b"the previous recording" and leftovers(tmp_path) == []
