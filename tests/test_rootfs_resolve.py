"""RootFs resolves a path with one open + readlink by the kernel when that is provably what the
part-by-part walk gives (issue 13); these compare the two on every path of real recordings, on paths
that do not exist, and on trees whose links would make them differ (there the kernel is not used)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topodoc.probe.host import RootFs, links_stay_inside
from topodoc.probe.record import open_recording

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def machine_paths(fs: RootFs) -> list[str]:
    paths = []
    for folder, dirs, files in os.walk(fs.root):
        rel = "/" + os.path.relpath(folder, fs.root).lstrip(".")
        for name in dirs + files:
            paths.append(os.path.normpath(f"{rel}/{name}").replace("//", "/"))
    return paths


@pytest.mark.parametrize("name", ["dgx-a100", "gb200-nvl72-tray", "vm-1s-virtio-nogpu"])
def test_kernel_and_part_by_part_resolution_agree_on_a_recording(name):
    fs = open_recording(HOSTS / name / "recording.tar.gz").fs
    assert fs._kernel  # the recording's links all stay inside its tree
    paths = machine_paths(fs)
    assert len(paths) > 50
    for path in paths + [p + "/missing/x" for p in paths[::7]] + [p + "/../.." for p in paths[::11]]:
        norm = os.path.normpath(path)
        assert fs._resolve(norm) == fs._resolve_parts(norm), path


def test_a_tree_with_an_absolute_or_climbing_link_is_walked_part_by_part(tmp_path):
    root = tmp_path / "fs"
    (root / "sys" / "b").mkdir(parents=True)
    (root / "sys" / "b" / "x").write_text("inside")
    assert links_stay_inside(str(root))
    (root / "sys" / "up").symlink_to("../../fs/sys/b")  # climbs out of the root and back in by name
    assert not links_stay_inside(str(root))
    fs = RootFs(root, {}, links_inside=links_stay_inside(str(root)))
    assert not fs._kernel
    assert fs._resolve("/sys/up/x") == "/fs/sys/b/x"  # ".." stops at the root, as it always did
    (root / "sys" / "up").unlink()
    (root / "sys" / "abs").symlink_to("/sys/b")
    assert not links_stay_inside(str(root))
    assert RootFs(root, {}).read_text("/sys/abs/x") == "inside"  # re-rooted, never the host's /sys
