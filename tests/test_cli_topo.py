import json
import subprocess
import sys
from pathlib import Path

from topodoc.report.document import document

FIXTURES = Path(__file__).parent.parent / "fixtures" / "topo"


def topodoc(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "topodoc", "topo", *args], input=stdin, capture_output=True, text=True
    )


def test_json_matches_the_golden_file():
    case = FIXTURES / "dgx-a100-nv12-mlx5.txt"
    result = topodoc(str(case), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data == document("topodoc.topo", json.loads(case.with_suffix(".json").read_text()))
    assert data["links"]["GPU0"]["GPU1"] == "NV12" and data["nics"][0] == {"name": "NIC0", "device": "mlx5_0"}


def test_human_output_explains_the_seed_bridge_pairs():
    result = topodoc(str(FIXTURES / "seed-8xa100-pcie-nvbridge-pairs.txt"))
    assert result.returncode == 0, result.stderr
    assert "Bridged pairs: GPU0-GPU1 (NV3)" in result.stdout
    assert "Cross a CPU socket (SYS)" in result.stdout
    assert "GPU4, GPU5, GPU6, GPU7: CPUs 32-63, NUMA node 1" in result.stdout


def test_stdin_and_truncated_paste_warns_but_succeeds():
    text = (FIXTURES / "truncated-8xh100-cut-mid-row.txt").read_text()
    result = topodoc("-", "--json", stdin=text)
    assert result.returncode == 0
    assert any("no row for GPU6" in w for w in json.loads(result.stdout)["warnings"])


def test_text_without_a_matrix_exits_2_with_one_line():
    result = topodoc("-", stdin="NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert "no nvidia-smi topo matrix found" in result.stderr and "Traceback" not in result.stderr


def test_missing_file_and_missing_argument_exit_2():
    missing = topodoc("/nonexistent/topo.txt")
    assert missing.returncode == 2 and "cannot read /nonexistent/topo.txt" in missing.stderr
    bare = topodoc()
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
