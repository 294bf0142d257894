"""The wheel ships the package and the example recordings, and no fixture-building code (issue 11)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    wheels = list(out.glob("topodoc-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"cannot build the wheel here (setuptools/wheel unavailable): {done.stderr[-300:]}")
    return zipfile.ZipFile(wheels[0]).namelist()


def test_wheel_ships_no_builder_code(wheel_files):
    examples = [f for f in wheel_files if f.startswith("topodoc/_examples/")]
    assert any(f.endswith("/recording.tar.gz") for f in examples)
    assert [f for f in examples if f.endswith(".py")] == ["topodoc/_examples/__init__.py"]
    assert not [f for f in wheel_files if f.startswith("tools/") or "/builder/" in f]


def test_builders_live_in_tools_not_fixtures():
    code = [p.relative_to(ROOT).as_posix() for p in (ROOT / "fixtures").rglob("*.py")]
    assert code == ["fixtures/hosts/__init__.py"]  # the package marker that ships the examples
    assert (ROOT / "tools" / "goldens.py").is_file()


def test_goldens_entry_point_checks_a_family():
    done = subprocess.run([sys.executable, "-m", "tools.goldens", "rules", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "every golden is up to date"
