"""`topodoc topo --from SPEC`: the derived matrix, its reading, the machine's shape and the comparison
with nvidia-smi's own matrix, from a real CLI run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
PAIRS = "8xa100-pcie-2s-nvbridge-pairs"


def topo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topodoc", "topo", *args], capture_output=True, text=True,
                          timeout=120)


def test_topo_from_example_prints_matrix_reading_shape_and_agreement():
    done = topo("--from", f"example:{PAIRS}")
    assert done.returncode == 0, done.stderr
    assert "NV3" in done.stdout
    assert "Machine: NVLink bridge pairs (NV3): GPUs 0-1, 2-3, 4-5, 6-7" in done.stdout
    assert "nvidia-smi's own matrix agrees cell for cell." in done.stdout


def test_topo_from_json_is_the_golden_matrix_plus_extras():
    done = topo("--from", str(HOSTS / PAIRS / "recording.tar.gz"), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    golden = json.loads((HOSTS / PAIRS / "expected-matrix.json").read_text())
    assert data["links"] == golden["links"] and data["gpus"] == golden["gpus"]
    assert data["machine"]["nvlink"] == "bridge-pairs"
    assert data["nccl_paths"]["GPU0"]["GPU1"] == "NVL" and data["nccl_paths"]["GPU1"]["GPU2"] == "PIX"
    assert data["smi_diffs"] == []
    assert "reading" in data


def test_topo_from_and_file_together_is_a_usage_error(tmp_path):
    text = tmp_path / "m.txt"
    text.write_text("GPU0\tCPU Affinity\nGPU0\t X \t0-7\n")
    done = topo(str(text), "--from", f"example:{PAIRS}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_topo_from_unknown_example_is_one_line_exit_2():
    done = topo("--from", "example:no-such-box")
    assert done.returncode == 2
    assert "no bundled example named 'no-such-box'" in done.stderr and "Traceback" not in done.stderr
