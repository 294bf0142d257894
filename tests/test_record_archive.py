"""Hostile archives are refused with one clear error; the CLI turns that into exit 2 and one line."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import archives
import pytest

from topodoc.probe.archive import ArchiveError, check_member, extract_archive
from topodoc.probe.record import open_recording, safe_target
from topodoc.probe.source import SourceError, load_snapshot

archive = archives.build


META = ("meta.json", "file", b'{"format": 1, "unreadable": []}')


@pytest.mark.parametrize(
    "members, words",
    [
        ([("../../etc/evil", "file", b"x")], "'..'"),
        ([("fs/../../evil", "file", b"x")], "'..'"),
        ([("/etc/evil", "file", b"x")], "absolute path"),
        ([("fs/sys/up", "sym", "../../../outside")], "leaving the archive"),
        ([("fs/sys/abs", "sym", "/etc/passwd")], "absolute target"),
        ([("fs/dev/null", "chr", None)], "device"),
        ([("fs/hard", "lnk", "meta.json")], "hard link"),
    ],
)
def test_hostile_members_are_refused(tmp_path, members, words):
    path = archive(tmp_path / "bad.tar.gz", [META, *members])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match=words):
        extract_archive(str(path), str(dest))
    assert not (tmp_path / "evil").exists() and not (tmp_path / "outside").exists()


def test_link_chain_escape_is_refused(tmp_path):
    # each link stays inside on paper ("fs/l1/.." is "fs"), but l1 is itself a link to the top, so
    # l2 really points at the extraction directory's parent
    path = archive(tmp_path / "chain.tar.gz", [META, ("fs/l1", "sym", ".."), ("fs/l2", "sym", "l1/..")])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match="leaving the archive: 'fs/l2'"):
        extract_archive(str(path), str(dest))
    assert not os.listdir(dest)  # refused before anything was written


def test_write_through_a_symlinked_directory_is_refused(tmp_path):
    (tmp_path / "victim").mkdir()
    path = archive(tmp_path / "through.tar.gz", [META, ("fs/d", "sym", "."), ("fs/d/x", "file", b"ok")])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match="under a symlink member: 'fs/d/x'"):
        extract_archive(str(path), str(dest))  # a recording never holds one: refused, not guessed
    assert not os.listdir(dest)


def test_oversized_member_is_refused():
    info = tarfile.TarInfo("fs/huge")
    info.size = 10**12
    with pytest.raises(ArchiveError, match="oversized"):
        check_member(info)


def test_not_an_archive(tmp_path):
    bogus = tmp_path / "x.tar.gz"
    bogus.write_bytes(b"this is not gzip")
    with pytest.raises(SourceError, match="not a readable recording"):
        load_snapshot(str(bogus))


def test_archive_without_meta_is_not_a_recording(tmp_path):
    path = archive(tmp_path / "nometa.tar.gz", [("fs/proc/cmdline", "file", b"quiet\n")])
    with pytest.raises(ArchiveError, match="no meta.json"):
        open_recording(path)


def test_absolute_and_escaping_link_targets_are_made_relative_when_recording():
    assert (
        safe_target("/sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0")
        == "../../../devices/pci0000:00/0000:00:01.0"
    )
    assert safe_target("/etc/os-release", "/usr/lib/os-release") == "../usr/lib/os-release"
    assert safe_target("/sys/x", "../../../../y") == "../y"


def test_cli_refuses_a_hostile_archive_with_one_line(tmp_path):
    path = archive(tmp_path / "evil.tar.gz", [META, ("../escape", "file", b"x")])
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "probe", "--from", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "'..'" in out.stderr


def _tiny_recording(path, stamp: bytes):
    meta = b'{"format": 1, "name": "tiny"}'
    return archive(path, [("meta.json", "file", meta), ("fs/proc/cmdline", "file", stamp)])


def test_replay_trees_go_to_tmpfs_unless_tmpdir_is_set(tmp_path, monkeypatch):
    """Extracting ~2,000 files to a VM disk took 1.6 s per --from; /dev/shm takes 0.2 s."""
    from topodoc.probe import scratch

    monkeypatch.delenv("TMPDIR", raising=False)
    expected = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    assert scratch.scratch_dir() == expected
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert scratch.scratch_dir() is None


def test_replay_falls_back_when_the_scratch_place_is_unusable(tmp_path, monkeypatch):
    from topodoc.probe import scratch

    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x")
    monkeypatch.setattr(scratch, "scratch_dir", lambda: str(not_a_dir))
    host = open_recording(_tiny_recording(tmp_path / "tiny.tar.gz", b"fallback-test\n"))
    assert host.fs.read_text("/proc/cmdline") == "fallback-test\n"


@pytest.mark.parametrize("content", [b"", b"plain text, not gzip\n"])
@pytest.mark.parametrize("command", ["probe", "bandwidth"])
def test_empty_or_non_gzip_recording_is_one_line_naming_it_once(tmp_path, content, command):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "topodoc", command, "--from", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.count(str(bad)) == 1
    assert "not a readable recording archive" in proc.stderr
