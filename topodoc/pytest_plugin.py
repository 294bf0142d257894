"""pytest plugin (entry point ``pytest11``): recorded GPU servers as test fixtures.

    @pytest.mark.topodoc_machines("dgx-a100", "hgx-h100-8x400g-ib", "tests/data/our-node.tar.gz")
    def test_rank_to_nic(topodoc_machine):
        import pynvml                      # answers from the recording
        subprocess.run(["nvidia-smi", "topo", "-m"])   # prints the recorded output
        read_sysfs(root=topodoc_machine.sysfs_root)

``topodoc_machine`` runs the test once per machine named by the ``topodoc_machines`` marker (default:
``hgx-h100-8x400g-ib``). For the test's duration ``import pynvml`` gives the NVML replay, the real pynvml
module object answers from it too (so a module that did ``import pynvml`` at its top level is covered),
a recorded ``nvmlInit`` failure is raised again, and the recorded commands come first on ``PATH``; all
is undone afterwards. Importing this module loads nothing heavy.
"""

from __future__ import annotations

import os

import pytest

DEFAULT_MACHINE = "hgx-h100-8x400g-ib"
MARKER = "topodoc_machines"


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*specs): run the test once per recorded machine (bundled example name or .tar.gz)",
    )


def pytest_generate_tests(metafunc) -> None:
    if "topodoc_machine" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(MARKER)
    specs = tuple(marker.args) if marker and marker.args else (DEFAULT_MACHINE,)
    metafunc.parametrize(
        "topodoc_machine",
        specs,
        indirect=True,
        ids=[os.path.basename(str(s)).split(".tar")[0] for s in specs],
    )


@pytest.fixture
def topodoc_machine(request, tmp_path, monkeypatch):
    """A :class:`topodoc.testing.Machine` with its NVML replay and command shims installed."""
    from topodoc.probe.source import SourceError
    from topodoc.testing import Machine

    spec = getattr(request, "param", DEFAULT_MACHINE)
    try:
        machine = Machine(str(spec))
    except SourceError as err:
        pytest.fail(f"topodoc_machine: {err}", pytrace=False)
    shims = tmp_path / "topodoc-commands"
    if machine.command_shims(str(shims)):
        monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    with machine.nvml():
        yield machine
