"""A corpus of hostile recordings (issue 10): each is refused before anything is written, nothing
outside the scratch folder changes, and every ``--from`` command exits 2 with one short line.

The archives are built here with tarfile. ``VICTIM`` paths are the files an attacker would write:
a sentinel tree in the test's folder, snapshotted before and after.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import archives
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topodoc.probe import archive as arch
from topodoc.probe.archive import ArchiveError, extract_archive

META = ("meta.json", "file", b'{"format": 1, "unreadable": []}')
UP = "../" * 40  # more than any scratch folder is deep: ".." at / stays at /


def build(path, members) -> str:
    return str(archives.build(path, members))


def up_to(path) -> str:
    """A relative target that climbs to / from anywhere and then names ``path``."""
    return UP + str(path).lstrip("/")


DEEP = "/".join(f"p{n}" for n in range(1, 18))  # 17 folders: links deep enough to hide 20 ".."


def chain(links: int, victim) -> list:
    """The issue's exploit through ``links`` symlinks: each link lies deep and, read as text, stays
    inside; in fact each resolves to ``fs/`` through the one before it. ``fs/esc`` then goes through
    the last link and 20 ``..``, which on paper come back to the top of the archive but in fact climb
    to ``/``, and a regular member ``fs/esc`` follows (the old code opened it, following the link)."""
    members = [(f"fs/d1/{DEEP}/lnk", "sym", "../" * 18)]
    for n in range(2, links + 1):
        members.append((f"fs/d{n}/{DEEP}/lnk", "sym", "../" * 18 + f"d{n - 1}/{DEEP}/lnk/d{n - 1}/.."))
    through = f"d{links}/{DEEP}/lnk/" + "../" * 20 + str(victim).lstrip("/")
    return members + [("fs/esc", "sym", through), ("fs/esc", "file", b"pwned\n")]


def corpus(victims) -> dict[str, list]:
    new, old, folder = victims["new"], victims["existing"], victims["dir"]
    return {
        "issue-exploit-one-link": chain(1, new),
        "issue-exploit-overwrites": chain(1, old),
        "through-two-links": chain(2, new),
        "through-three-links": chain(3, old),
        "absolute-target-then-file": [("fs/esc", "sym", str(old)), ("fs/esc", "file", b"x")],
        "relative-target-then-file": [("fs/esc", "sym", up_to(new)), ("fs/esc", "file", b"x")],
        "link-to-dir-then-file-under": [("fs/d", "sym", up_to(folder)), ("fs/d/pwned", "file", b"x")],
        "deep-link-to-dir-then-file-under": [
            *chain(1, folder)[:-2], ("fs/d", "sym", chain(1, folder)[-2][2]), ("fs/d/pwned", "file", b"x")],
        "chained-link-to-dir-then-file": [
            ("fs/l1", "sym", "."), ("fs/d", "sym", "l1/" + up_to(folder)), ("fs/d/pwned", "file", b"x")],
        "link-then-dir-of-same-name": [
            ("fs/d", "sym", up_to(folder)), ("fs/d", "dir", None), ("fs/d/pwned", "file", b"x")],
        "hard-link-then-file": [("fs/h", "lnk", str(old)), ("fs/h", "file", b"x")],
        "hard-link-relative": [("fs/h", "lnk", up_to(old))],
        "duplicate-file-names": [("fs/x", "file", b"a"), ("fs/x", "file", b"b")],
        "duplicate-through-dot-slash": [("fs/esc", "sym", up_to(new)), ("./fs//esc", "file", b"x")],
        "inside-link-then-file-of-same-name": [("fs/a", "file", b""), ("fs/b", "sym", "a"),
                                               ("fs/b", "file", b"x")],
        "symlink-loop": [("fs/a", "sym", "b"), ("fs/b", "sym", "a")],
        "dotdot-name": [("fs/../../pwned", "file", b"x")],
        "absolute-name": [(str(new), "file", b"x")],
        "device": [("fs/dev/null", "chr", None)],
        "fifo": [("fs/fifo", "fifo", None)],
    }


def snapshot(root) -> dict:
    """Every path under ``root`` with its kind and content or target."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                seen[full] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                seen[full] = ("dir",)
            else:
                with open(full, "rb") as handle:
                    seen[full] = ("file", handle.read())
    return seen


@pytest.fixture
def victims(tmp_path):
    folder = tmp_path / "sentinel"
    folder.mkdir()
    (folder / "existing").write_bytes(b"precious\n")
    return {"dir": folder, "existing": folder / "existing", "new": folder / "pwned", "root": folder}


NAMES = sorted(corpus({"new": "/n", "existing": "/e", "dir": "/d"}))


@pytest.mark.parametrize("case", NAMES)
def test_hostile_archive_is_refused_before_writing_anything(tmp_path, victims, case):
    path = build(tmp_path / f"{case}.tar.gz", [META, *corpus(victims)[case]])
    before = snapshot(victims["root"])
    dest = tmp_path / "scratch"
    dest.mkdir()
    with pytest.raises(ArchiveError) as caught:
        extract_archive(path, str(dest))
    assert os.listdir(dest) == []  # validated whole before the first write
    assert snapshot(victims["root"]) == before
    assert "\n" not in str(caught.value) and len(str(caught.value)) <= arch.MAX_ERROR


@pytest.mark.parametrize("case", NAMES)
def test_every_from_command_exits_2_with_one_line(tmp_path, victims, case):
    path = build(tmp_path / f"{case}.tar.gz", [META, *corpus(victims)[case]])
    before = snapshot(victims["root"])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    commands = [["probe"], ["diagnose"], ["topo"]] if case.startswith("issue-") else [["probe"], ["diagnose"]]
    for command in commands:
        proc = subprocess.run([sys.executable, "-m", "topodoc", *command, "--from", path],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 2, (command, proc.stderr)
        assert proc.stdout == "" and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "refusing" in proc.stderr
        assert snapshot(victims["root"]) == before
        assert not [p for p in scratch.rglob("*") if "tree-" in p.name]  # no tree left behind


def test_the_exploit_is_refused_for_its_link_not_by_luck(tmp_path, victims):
    path = build(tmp_path / "e.tar.gz", [META, *chain(1, victims["new"])[:-1]])  # links only
    with pytest.raises(ArchiveError, match="leaving the archive: 'fs/esc'"):
        extract_archive(path, str(tmp_path / "x"))


@pytest.mark.parametrize("links", [1, 2, 3])
def test_links_through_links_that_stay_inside_still_extract(tmp_path, links):
    """The same shapes, pointing back inside: resolved against the archive's link graph, kept."""
    members = chain(links, "/fs/target")[:-2]
    last = members[-1][0].removeprefix("fs/")
    members += [("fs/target", "file", b"ok\n"), ("fs/ok", "sym", f"{last}/d1/../target")]
    path = build(tmp_path / "fine.tar.gz", [META, *members])
    dest = tmp_path / "out"
    dest.mkdir()
    extract_archive(path, str(dest))
    assert (dest / "fs" / "ok").read_bytes() == b"ok\n"


# -- bombs: refused at the first limit, in bounded memory --------------------------------------


def gzip_repeat(path, block: bytes, copies: int, head: bytes = b"", tail: bytes = b"") -> str:
    """A gzip file decompressing to ``head + block * copies + tail``, written as concatenated gzip
    members (one compressed ``block`` reused), so a 10 GiB stream is a 10 MB file built at once."""
    def member(data: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()

    one = member(block)
    with open(path, "wb") as out:
        out.write(member(head))
        for _ in range(copies):
            out.write(one)
        out.write(member(tail))
    return str(path)


def header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.USTAR_FORMAT if size < 8**11 else tarfile.GNU_FORMAT)


MIB = 1024 * 1024


def pax_bomb(path) -> str:
    """One 1 GiB PAX header (a path record of a billion 'a's) in a ~1 MB file."""
    size = 1024 * MIB
    text = b"path="
    length = len(str(size)) + 1 + len(text) + 1
    record_head = f"{size} ".encode() + text
    body = size - length + 1  # bytes of 'a' so the record's length prefix is exact
    pax = header("././@PaxHeader", size, tarfile.XHDTYPE)
    return gzip_repeat(path, b"a" * MIB, body // MIB, pax + record_head, b"a" * (body % MIB) + b"\n")


def zero_bomb(path) -> str:
    """One member declaring 10 GiB, and 10 GiB of zeros behind it."""
    return gzip_repeat(path, bytes(MIB), 10 * 1024, header("fs/zero", 10 * 1024 * MIB))


def many_members(path, count: int) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for n in range(count):
            tar.addfile(tarfile.TarInfo(f"fs/m{n}"))
    return str(path)


def run_measured(args, env=None) -> tuple[subprocess.CompletedProcess, int]:
    """Run the CLI in a child of a small wrapper; returns the result and the CLI's peak RSS in KiB."""
    wrapper = ("import resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
               "sys.exit(p.returncode)\n")
    proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "topodoc", *args],
                          capture_output=True, text=True, env=env)
    lines = proc.stderr.strip().splitlines()
    proc.stderr = "\n".join(lines[:-1]) + "\n"
    return proc, int(lines[-1])


@pytest.mark.parametrize("maker, words", [
    (pax_bomb, "extended (PAX/GNU) header of 1073741824 bytes"),
    (zero_bomb, "oversized member 'fs/zero' (10737418240 bytes)"),
])
def test_bombs_are_refused_at_their_header_in_bounded_memory(tmp_path, maker, words):
    path = maker(tmp_path / "bomb.tar.gz")
    assert os.path.getsize(path) < 16 * MIB
    proc, peak_kib = run_measured(["probe", "--from", path])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr
    assert len(proc.stderr) < 400  # the 1 GiB name is never echoed
    assert peak_kib < 200 * 1024


def test_members_past_the_count_limit_are_refused_while_streaming(tmp_path, monkeypatch):
    monkeypatch.setattr(arch, "MAX_MEMBERS", 500)  # 20,000 in earnest; same code path
    path = many_members(tmp_path / "many.tar.gz", arch.MAX_MEMBERS + 10)
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match=f"more than {arch.MAX_MEMBERS} members"):
        extract_archive(path, str(dest))
    assert os.listdir(dest) == []


def test_total_size_is_refused_at_the_first_header_past_it(tmp_path, monkeypatch):
    monkeypatch.setattr(arch, "MAX_TOTAL_BYTES", 3 * MIB)
    members = [META] + [(f"fs/f{n}", "file", bytes(MIB)) for n in range(5)]
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match="unpacks to more than 3145728 bytes"):
        extract_archive(build(tmp_path / "big.tar.gz", members), str(dest))
    assert os.listdir(dest) == []


@pytest.mark.parametrize("name", ["fs/" + "a" * 300, "fs/" + "/".join(["d" * 200] * 30)])
def test_over_long_names_are_refused_with_a_short_line(tmp_path, name):
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError) as caught:
        extract_archive(build(tmp_path / "long.tar.gz", [META, (name, "file", b"x")]), str(dest))
    assert len(str(caught.value)) <= arch.MAX_ERROR and "refusing member name" in str(caught.value)


def test_chained_extended_headers_are_refused(tmp_path):
    record = b"20 comment=xxxxxxxx\n"
    blocks = b"".join(header("././@PaxHeader", len(record), tarfile.XHDTYPE) + record.ljust(512, b"\0")
                      for _ in range(arch.MAX_HEADER_CHAIN + 2))
    data = blocks + header("fs/x", 0) + bytes(1024)
    path = tmp_path / "chain.tar.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(packer.compress(data) + packer.flush())
    with pytest.raises(ArchiveError, match="extended headers in a row"):
        extract_archive(str(path), str(tmp_path))


# -- any mix of members: refused whole, or extracted with every link inside ---------------------

NAMES_POOL = ["fs", "fs/a", "fs/a/b", "fs/a/b/c", "fs/l", "fs/a/l", "fs/a/b/l", "fs/m", "x"]
TARGETS = [".", "..", "../..", "../../..", "a", "l", "l/..", "l/../..", "a/l/../..", "m/../l/..",
           "b/l/../../..", "/", "/etc", "l/l", "m"]
MEMBER = st.tuples(
    st.sampled_from(NAMES_POOL),
    st.sampled_from(["file", "dir", "sym", "lnk"]),
    st.sampled_from(TARGETS),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(MEMBER, min_size=1, max_size=8))
def test_any_member_mix_is_refused_before_writing_or_stays_inside(tmp_path_factory, mix):
    base = tmp_path_factory.mktemp("mix")
    sentinel = base / "sentinel"
    sentinel.mkdir()
    (sentinel / "existing").write_bytes(b"precious\n")
    members = [(name, kind, b"x" if kind == "file" else (None if kind == "dir" else target))
               for name, kind, target in mix]
    path = build(base / "mix.tar.gz", [META, *members])
    dest = base / "scratch" / "deep" / "er"
    dest.mkdir(parents=True)
    before = snapshot(base)
    try:
        extract_archive(path, str(dest))
    except ArchiveError as err:
        assert os.listdir(dest) == [] and "\n" not in str(err)
    else:
        root = os.path.realpath(dest)
        for full in snapshot(dest):
            real = os.path.realpath(full)
            assert real == root or real.startswith(root + os.sep), (full, real)
    after = {p: v for p, v in snapshot(base).items() if not p.startswith(str(dest) + os.sep)}
    assert after == before


@pytest.mark.parametrize("pax", [
    {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "fs/s", "GNU.sparse.realsize": "9"},
    {"GNU.sparse.map": "0,1", "GNU.sparse.size": "1", "GNU.sparse.name": "fs/s"},
])
def test_sparse_members_are_refused(tmp_path, pax):
    info = tarfile.TarInfo("fs/s")
    info.size, info.pax_headers = 1, pax
    path = tmp_path / "sparse.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ArchiveError, match="sparse member"):
        extract_archive(str(path), str(tmp_path / "none"))


def test_large_archives_are_read_twice_and_must_not_change_in_between(tmp_path, monkeypatch):
    monkeypatch.setattr(arch, "KEEP_BYTES", 16)  # past it the write pass reads the archive again
    members = [META, ("fs/a", "file", b"a" * 100), ("fs/l", "sym", "a")]
    path = build(tmp_path / "ok.tar.gz", members)
    dest = tmp_path / "out"
    dest.mkdir()
    assert extract_archive(path, str(dest)).data is None
    assert (dest / "fs" / "l").read_bytes() == b"a" * 100
    with arch.SafeArchive(path) as opened:  # checked; then swapped in place for a hostile one
        evil = build(tmp_path / "evil.tar.gz", [*members[:2], ("fs/l", "sym", up_to(tmp_path / "x"))])
        with open(path, "r+b") as same_file:
            same_file.write(Path(evil).read_bytes())
        other = tmp_path / "other"
        other.mkdir()
        with pytest.raises(ArchiveError, match="changed while it was being read"):
            opened.extract(str(other))
    assert not (other / "fs" / "l").is_symlink()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_named_like_a_recording_is_refused_without_blocking(tmp_path, kind):
    path = tmp_path / "endless.tar.gz"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes: opening it for reading would wait forever
    else:
        path.symlink_to("/dev/zero")  # endless zeros
    proc = subprocess.run([sys.executable, "-m", "topodoc", "probe", "--from", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "not a regular file" in proc.stderr
