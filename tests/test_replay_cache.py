"""The per-user replay cache (issue 13): a recording is extracted once and its Snapshot collected once,
then reused by later processes; the output never depends on the cache; a damaged or partial entry is
rebuilt; archives never share an entry; two processes filling it at once agree. Real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topodoc.probe import replaycache

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SMALL = HOSTS / "1s-2xgpu-desktop-pcie" / "recording.tar.gz"
OTHER = HOSTS / "vm-1s-virtio-nogpu" / "recording.tar.gz"


def topodoc(cache: Path, *args: str, mb: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop(replaycache.ENV_MB, None)
    if mb is not None:
        env[replaycache.ENV_MB] = mb
    out = subprocess.run([sys.executable, "-m", "topodoc", *args], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode in (0, 1), out.stderr
    return out


def root_of(cache: Path) -> Path:
    return cache / "topodoc" / "replay"


def entry_of(cache: Path, archive: Path) -> Path:
    return root_of(cache) / replaycache.file_digest(str(archive))


def entries(cache: Path) -> list[str]:
    return sorted(p.name for p in root_of(cache).iterdir() if p.is_dir())


@pytest.mark.parametrize("command", ["probe", "topo", "diagnose", "bandwidth"])
def test_cold_warm_and_no_cache_print_the_same(tmp_path, command):
    spec = "example:1s-2xgpu-desktop-pcie"
    off = topodoc(tmp_path / "off", command, "--from", spec, "--json", mb="0")
    cold = topodoc(tmp_path / "c", command, "--from", spec, "--json")
    assert (entry_of(tmp_path / "c", SMALL) / replaycache.SNAPSHOT).is_file()  # the warm run reads it
    warm = topodoc(tmp_path / "c", command, "--from", spec, "--json")
    assert cold.stdout == warm.stdout == off.stdout
    assert not root_of(tmp_path / "off").exists()  # the replay cache off writes nothing (the user cache
    # folder may hold other caches: the compiled dataclass code, topodoc.dataclass_code)


def test_a_path_replay_is_labelled_by_its_own_spelling_not_the_cached_one(tmp_path):
    cache = tmp_path / "c"
    first = json.loads(topodoc(cache, "probe", "--from", "example:1s-2xgpu-desktop-pcie", "--json").stdout)
    copy = tmp_path / "mine.tar.gz"
    shutil.copyfile(SMALL, copy)
    second = json.loads(topodoc(cache, "probe", "--from", str(copy), "--json").stdout)
    assert entries(cache) == [replaycache.file_digest(str(SMALL))]  # the same bytes: the same entry
    assert first["source"] == "example:1s-2xgpu-desktop-pcie" and second["source"] != first["source"]
    assert {**first, "source": None} == {**second, "source": None}


def test_folders_are_private(tmp_path):
    topodoc(tmp_path / "c", "probe", "--from", str(SMALL))
    for folder in (tmp_path / "c" / "topodoc", root_of(tmp_path / "c")):
        assert folder.stat().st_mode & 0o777 == 0o700


def read_stored(path: Path) -> tuple[dict, dict]:
    """snapshot.json: (header line, Snapshot data)."""
    head, _, body = path.read_bytes().partition(b"\n")
    return json.loads(head), json.loads(body)


def write_stored(path: Path, head: dict, data: dict) -> None:
    """Write snapshot.json as topodoc does, the digest in the header recomputed."""
    import hashlib

    body = json.dumps(data).encode()
    path.write_bytes(json.dumps({**head, "sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n" + body)


def _damage_marker(entry: Path) -> None:
    (entry / replaycache.MARKER).unlink()


def _damage_file(entry: Path) -> None:
    meta = entry / replaycache.TREE / "meta.json"
    meta.chmod(0o644)  # the cached tree is read-only
    meta.write_bytes(meta.read_bytes()[:10])  # cut short, as a crash before the data reached the disk


def _damage_tree(entry: Path) -> None:
    replaycache._unseal(str(entry / replaycache.TREE))
    shutil.rmtree(entry / replaycache.TREE / "fs" / "proc", ignore_errors=True)


def _other_digest(entry: Path) -> None:
    marker = json.loads((entry / replaycache.MARKER).read_text())
    (entry / replaycache.MARKER).write_text(json.dumps({**marker, "digest": "0" * 64}))


@pytest.mark.parametrize("damage", [_damage_marker, _damage_file, _damage_tree, _other_digest])
def test_a_damaged_or_partial_entry_is_rebuilt(tmp_path, damage):
    cache = tmp_path / "c"
    want = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    entry = entry_of(cache, SMALL)
    (entry / replaycache.SNAPSHOT).unlink()  # so the next run must use the tree itself
    before = (entry / replaycache.MARKER).stat().st_ino
    damage(entry)
    assert topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout == want
    marker = json.loads((entry / replaycache.MARKER).read_text())
    assert marker["digest"] == entry.name and (entry / replaycache.MARKER).stat().st_ino != before
    assert replaycache.tree_counts(str(entry / replaycache.TREE))["files"] == marker["files"]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"format": 1, "code": "x", "code_files": [], '
                                     b'"name": null, "snapshot": {"schema": 1}}'])
def test_a_bad_or_stale_snapshot_is_ignored_and_replaced(tmp_path, content):
    cache = tmp_path / "c"
    want = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    stored = entry_of(cache, SMALL) / replaycache.SNAPSHOT
    stored.write_bytes(content)
    assert topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout == want
    assert read_stored(stored)[0]["code"] != "x"  # collected again and stored again


def test_a_warm_run_reads_the_stored_snapshot_instead_of_replaying(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    stored = entry_of(cache, SMALL) / replaycache.SNAPSHOT
    head, data = read_stored(stored)
    data["host"]["hostname"] = "from-the-cache"  # same code, digest rewritten: the stored Snapshot is used
    write_stored(stored, head, data)
    assert json.loads(topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout)["host"]["hostname"] \
        == "from-the-cache"


def test_a_snapshot_from_other_code_is_not_used(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    stored = entry_of(cache, SMALL) / replaycache.SNAPSHOT
    head, data = read_stored(stored)
    data["host"]["hostname"] = "not-what-collect-says"
    head["code_files"] = head["code_files"][:-1]  # as if another version of topodoc had collected it
    write_stored(stored, head, data)
    out = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    assert "not-what-collect-says" not in out


def test_different_archives_never_share_an_entry(tmp_path):
    cache = tmp_path / "c"
    one = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    two = topodoc(cache, "probe", "--from", str(OTHER), "--json").stdout
    assert one != two
    digests = [replaycache.file_digest(str(SMALL)), replaycache.file_digest(str(OTHER))]
    assert entries(cache) == sorted(digests)
    # an entry copied under another archive's name names the wrong digest: rebuilt, never used
    shutil.rmtree(entry_of(cache, OTHER))
    shutil.copytree(entry_of(cache, SMALL), entry_of(cache, OTHER), symlinks=True)
    assert topodoc(cache, "probe", "--from", str(OTHER), "--json").stdout == two


def test_two_processes_filling_the_cache_at_once_agree(tmp_path):
    cache = tmp_path / "c"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop(replaycache.ENV_MB, None)
    argv = [sys.executable, "-m", "topodoc", "probe", "--json", "--from", str(SMALL)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(3)]
    outs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _out, err in outs]
    assert len({out for out, _err in outs}) == 1
    names = sorted(p.name for p in root_of(cache).iterdir())
    digest = replaycache.file_digest(str(SMALL))
    assert names == [digest, digest + ".lock"]  # one entry, nothing half-built left behind


def test_a_dead_builders_leftover_is_removed(tmp_path):
    cache = tmp_path / "c"
    digest = replaycache.file_digest(str(SMALL))
    leftover = root_of(cache) / f"{replaycache.TMP}{digest}-dead"
    (leftover / replaycache.TREE).mkdir(parents=True)
    topodoc(cache, "probe", "--from", str(SMALL))
    assert not leftover.exists() and (root_of(cache) / digest / replaycache.MARKER).is_file()


def test_least_recently_used_entries_go_first_and_held_ones_stay(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    topodoc(cache, "probe", "--from", str(OTHER))
    small, other = entry_of(cache, SMALL), entry_of(cache, OTHER)
    os.utime(small / replaycache.MARKER, (1, 1))  # used long ago
    root = str(root_of(cache))
    assert replaycache.evict(root, limit=1) == [small.name, other.name]  # nothing held: both over 1 byte
    assert entries(cache) == [] and not (root_of(cache) / f"{small.name}.lock").exists()
    topodoc(cache, "probe", "--from", str(SMALL))
    topodoc(cache, "probe", "--from", str(OTHER))
    os.utime(entry_of(cache, OTHER) / replaycache.MARKER, (1, 1))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, root, other.name], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert replaycache.evict(root, limit=1) == [small.name]  # the older one is in use: skipped
    finally:
        holder.kill()
        holder.wait(timeout=60)
        holder.stdout.close()
    assert entries(cache) == [other.name]


HOLD = (
    "import sys, time\n"
    "from topodoc.probe import replaycache\n"
    "assert replaycache.open_entry(sys.argv[1], sys.argv[2]) is not None\n"
    "print('held', flush=True)\n"
    "time.sleep(120)\n"
)


def test_the_size_bound_evicts_after_a_build(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL), mb="1")
    topodoc(cache, "probe", "--from", str(OTHER), mb="1")  # each tree is over 1 MiB on a 4 KiB-page count
    assert entries(cache) == [replaycache.file_digest(str(OTHER))]


def test_an_unsafe_cache_folder_is_not_used(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "c"
    cache.mkdir()
    (cache / "topodoc").symlink_to(elsewhere)
    want = topodoc(tmp_path / "fresh", "probe", "--from", str(SMALL), "--json").stdout
    assert topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout == want
    assert list(elsewhere.iterdir()) == []


def test_a_refused_archive_leaves_no_entry_and_its_lock_goes_at_the_next_build(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not gzip at all" * 10)
    cache = tmp_path / "c"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop(replaycache.ENV_MB, None)
    out = subprocess.run([sys.executable, "-m", "topodoc", "probe", "--from", str(bad)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "not a readable recording archive" in out.stderr
    digest = replaycache.file_digest(str(bad))
    assert not (root_of(cache) / digest).exists() and entries(cache) == []
    topodoc(cache, "probe", "--from", str(SMALL))
    assert not (root_of(cache) / f"{digest}.lock").exists()


def test_the_kept_command_outputs_are_read_from_the_entry_and_a_changed_copy_is_ignored(tmp_path):
    """``diagnose --from`` reads a recording's commands.json from its entry (SHA-256 in the header line);
    a copy whose bytes no longer match is read from the archive again and rewritten."""
    cache = tmp_path / "c"
    spec = "example:dgx-a100-degraded-acs"
    cold = topodoc(cache, "diagnose", "--from", spec, "--json")
    archive = HOSTS / "dgx-a100-degraded-acs" / "recording.tar.gz"
    kept = entry_of(cache, archive) / (replaycache.MEMBER_PREFIX + "commands.json")
    raw = kept.read_bytes()
    head, body = raw.split(b"\n", 1)
    assert json.loads(head)["present"] is True and b"journalctl" in body
    kept.write_bytes(head + b"\n" + body.replace(b"journalctl", b"journalctX"))
    warm = topodoc(cache, "diagnose", "--from", spec, "--json")
    assert warm.stdout == cold.stdout
    assert kept.read_bytes() == raw  # rewritten from the archive
