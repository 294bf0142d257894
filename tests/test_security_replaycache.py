"""Replay-cache integrity (issue 22, item 3): a same-size edit of a cached tree or of the stored Snapshot
is never served; cached trees are read-only (files 0444, folders 0555) and still removable; the pytest
plugin's ``sysfs_root`` is that read-only tree; ``.tmp-*`` folders of killed builds are swept. Real
processes, each with its own cache folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from test_replay_cache import OTHER, SMALL, entry_of, root_of, topodoc

from topodoc.probe import replaycache

NUMA = "fs/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/numa_node"  # "0" in SMALL


def test_same_size_edit_of_a_cached_tree_is_not_served(tmp_path):
    cache = tmp_path / "c"
    want = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    entry = entry_of(cache, SMALL)
    (entry / replaycache.SNAPSHOT).unlink()  # so the next run reads the tree, as record/testing do
    target = entry / replaycache.TREE / NUMA
    assert target.read_text().strip() == "0"
    target.chmod(0o644)
    target.write_text(target.read_text().replace("0", "1"))  # same size: counts and bytes unchanged
    got = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    assert got == want  # rebuilt from the archive, not the edited tree
    assert (entry / replaycache.TREE / NUMA).read_text().strip() == "0"


def test_same_size_edit_of_the_stored_snapshot_is_not_served(tmp_path):
    cache = tmp_path / "c"
    want = topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout
    stored = entry_of(cache, SMALL) / replaycache.SNAPSHOT
    raw = stored.read_bytes()
    name = json.loads(want)["host"]["hostname"]
    poisoned = raw.replace(f'"hostname":"{name}"'.encode(), f'"hostname":"{"x" * len(name)}"'.encode())
    assert poisoned != raw and len(poisoned) == len(raw)
    stored.write_bytes(poisoned)
    assert topodoc(cache, "probe", "--from", str(SMALL), "--json").stdout == want


def _modes(tree: Path) -> set[tuple[str, int]]:
    found = set()
    for folder, dirs, files in os.walk(tree):
        for name in dirs + files:
            info = os.lstat(os.path.join(folder, name))
            if not stat.S_ISLNK(info.st_mode):
                found.add(("dir" if stat.S_ISDIR(info.st_mode) else "file", info.st_mode & 0o777))
    return found


def test_cached_trees_are_read_only(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    tree = entry_of(cache, SMALL) / replaycache.TREE
    assert _modes(tree) == {("dir", 0o555), ("file", 0o444)}
    assert tree.stat().st_mode & 0o777 == 0o555
    assert entry_of(cache, SMALL).stat().st_mode & 0o777 == 0o700  # the entry: marker and snapshot.json


def test_a_sealed_entry_is_unsealed_to_be_removed(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    tree = entry_of(cache, SMALL) / replaycache.TREE
    replaycache._unseal(str(tree))
    assert {mode for kind, mode in _modes(tree) if kind == "dir"} == {0o700}
    replaycache._seal(str(tree))
    topodoc(cache, "probe", "--from", str(OTHER), mb="1")  # over 1 MB: the older entry is evicted
    assert not entry_of(cache, SMALL).exists()


def test_pytest_plugin_sysfs_root_is_the_read_only_tree(tmp_path):
    code = ("import os, sys; from topodoc.testing import machine; m = machine(sys.argv[1]); "
            "print(m.sysfs_root); print(oct(os.stat(m.sysfs_root).st_mode & 0o777))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c")}
    out = subprocess.run([sys.executable, "-c", code, str(SMALL)], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    root = Path(out[0])
    assert out[1] == "0o555" and _modes(root) == {("dir", 0o555), ("file", 0o444)}
    if os.geteuid() != 0:  # root writes through any mode
        try:
            (root / NUMA).write_text("7")
        except PermissionError:
            pass
        else:
            raise AssertionError("sysfs_root is writable")


def test_tmp_folders_of_killed_builds_are_swept(tmp_path):
    cache = tmp_path / "c"
    topodoc(cache, "probe", "--from", str(SMALL))
    dead = root_of(cache) / f"{replaycache.TMP}{'a' * 64}-killed"
    (dead / "tree" / "fs").mkdir(parents=True)
    (dead / "tree" / "fs" / "f").write_text("left by a killed build")
    replaycache._seal(str(dead / "tree"))
    topodoc(cache, "probe", "--from", str(OTHER))  # any build sweeps what dead builders left
    assert not dead.exists()
    assert not (root_of(cache) / f"{'a' * 64}.lock").exists()
