"""The public Python API, its docs' examples, the pytest plugin and the example project that uses it."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

import topodoc
import topodoc.api
import topodoc.testing

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module", [topodoc.api, topodoc.testing])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_api_doc_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "API.md"), module_relative=False)
    assert result.attempted >= 8 and result.failed == 0


def test_public_names_are_exactly_all():
    assert set(topodoc.__all__) == {*topodoc.api.__all__, "__version__"}
    for name in topodoc.api.__all__:
        assert getattr(topodoc, name) is getattr(topodoc.api, name)


def test_importing_topodoc_loads_nothing_heavy():
    code = (
        "import sys, topodoc; "
        "print(sorted(m for m in sys.modules if m.startswith(('topodoc.', 'pynvml', 'pyudev', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bad_sources_raise_one_error_type(tmp_path):
    with pytest.raises(topodoc.TopodocError, match="no bundled example"):
        topodoc.load("example:nope")
    with pytest.raises(topodoc.TopodocError, match="no such recording"):
        topodoc.load(str(tmp_path / "missing.tar.gz"))
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(topodoc.TopodocError, match="not a topodoc snapshot"):
        topodoc.load(str(bad))


def test_probe_json_round_trips_through_load(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "probe", "--from", "example:dgx-a100", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    path = tmp_path / "snap.json"
    path.write_text(out.stdout)
    assert topodoc.load(str(path)) == topodoc.load("example:dgx-a100")


# -- NVML and command replay -------------------------------------------------------------------------


def test_nvml_replay_answers_like_pynvml_and_restores_the_module():
    import pynvml as real

    m = topodoc.testing.machine("dgx-a100")
    with m.nvml() as nv:
        import pynvml

        assert pynvml is nv and m.name == nv.TOPODOC_REPLAY
        nv.nvmlInit()
        assert nv.nvmlDeviceGetCount() == 8
        h = nv.nvmlDeviceGetHandleByPciBusId("0000:07:00.0")
        assert h == nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceGetCudaComputeCapability(h) == (8, 0)
        assert nv.nvmlDeviceGetTopologyCommonAncestor(h, nv.nvmlDeviceGetHandleByIndex(1)) == 20
        with pytest.raises(real.NVMLError_InvalidArgument):
            nv.nvmlDeviceGetHandleByIndex(8)
        with pytest.raises(real.NVMLError_NotSupported):
            nv.nvmlDeviceGetGpuFabricInfoV(h)
        with pytest.raises(topodoc.testing.NotRecordedError, match=r"nvmlDeviceGetClockInfo\(0, 1\)"):
            nv.nvmlDeviceGetClockInfo(h, 1)
    import pynvml

    assert pynvml is real


def test_command_shims_replay_and_refuse_the_unrecorded(tmp_path):
    m = topodoc.testing.machine("dgx-a100")
    # nvidia-smi answers; the tools topodoc record also ran and found absent replay as absent
    assert m.command_shims(str(tmp_path)) == ["ibstat", "ibv_devinfo", "journalctl", "lsmod", "lspci",
                                              "nvidia-smi", "systemctl"]
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    ok = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and ok.stdout.startswith("\tGPU0") or ok.stdout.split()[0] == "GPU0"
    bad = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, env=env)
    assert bad.returncode == 97 and "'nvidia-smi -q' was not recorded" in bad.stderr


def test_plugin_default_machine(topodoc_machine):
    """Without the marker the fixture gives the default machine, with pynvml replayed."""
    import pynvml

    assert topodoc_machine.name == "example:hgx-h100-8x400g-ib"
    assert pynvml.nvmlDeviceGetCount() == len(topodoc_machine.snapshot.gpus) == 8


@pytest.mark.topodoc_machines("gb200-nvl72-tray", "1s-2xgpu-desktop-pcie")
def test_plugin_marker_parametrizes(topodoc_machine):
    import pynvml

    assert pynvml.nvmlDeviceGetCount() == len(topodoc_machine.topology.gpus) in (2, 4)


def test_example_project_passes_on_recorded_machines():
    """examples/pytest-plugin: a rank-to-NIC mapper tested on four recorded GPU servers."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/pytest-plugin"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout


def test_completion_scripts():
    for shell, marker in (("bash", "_TOPODOC_COMPLETE"), ("zsh", "compdef"), ("fish", "complete")):
        out = subprocess.run(
            [sys.executable, "-m", "topodoc", "completion", shell], capture_output=True, text=True
        )
        assert out.returncode == 0 and marker in out.stdout
