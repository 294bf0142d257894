"""The NVML replay reaches code that imported pynvml at its top level before the test, replays a recorded
nvmlInit failure, and puts the real module back afterwards."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pynvml
import pytest

from topodoc.testing import machine


@pytest.fixture()
def early_importer(tmp_path, monkeypatch):
    """A module that did ``import pynvml`` at its top level, imported before any replay."""
    (tmp_path / "gpu_inventory.py").write_text(textwrap.dedent("""
        import pynvml

        def count():
            pynvml.nvmlInit()
            return pynvml.nvmlDeviceGetCount()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("gpu_inventory")
    yield module
    sys.modules.pop("gpu_inventory", None)


def test_a_top_level_import_answers_from_the_recording_and_is_restored(early_importer):
    original = pynvml.nvmlDeviceGetCount
    with machine("dgx-a100").nvml():
        assert early_importer.count() == 8
        assert early_importer.pynvml is pynvml  # the very module object it bound, answering the replay
    assert pynvml.nvmlDeviceGetCount is original and sys.modules["pynvml"] is pynvml


def test_a_recorded_nvmlinit_failure_is_raised_again():
    with machine("vm-1s-virtio-nogpu").nvml() as replay:  # recorded where libnvidia-ml was absent
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            replay.nvmlInit()
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            pynvml.nvmlInit()  # through the real module object as well
        replay.nvmlShutdown()  # nothing to undo


def test_the_plugin_fixture_covers_a_module_imported_before_the_test(tmp_path):
    import subprocess

    early = "import pynvml\n\ndef count():\n    return pynvml.nvmlDeviceGetCount()\n"
    (tmp_path / "gpu_early.py").write_text(early)
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""
        import gpu_early
        import pytest

        @pytest.mark.topodoc_machines("dgx-a100", "hgx-h100-8x400g-ib")
        def test_count(topodoc_machine):
            assert gpu_early.count() == len(topodoc_machine.snapshot.gpus)
    """))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout[-2000:] + out.stderr[-1000:]
