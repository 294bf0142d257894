"""``topodoc logs`` as users run it: several files, stdin, --json, and a file that is not an NCCL log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def _topodoc(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topodoc", "logs", *args], input=stdin, capture_output=True)


def test_multi_file_json(tmp_path):
    lines = (FIXTURES / "ib-2node-gdr-srun.log").read_text().splitlines(keepends=True)
    node_a = tmp_path / "node-a.log"
    node_b = tmp_path / "node-b.log"
    node_a.write_text("".join(line for line in lines if "dgx-a02" not in line))
    node_b.write_text("".join(line for line in lines if "dgx-a02" in line))
    run = _topodoc(str(node_a), str(node_b), "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    summary = data["summary"]
    assert (summary["transport"], summary["gdr"], summary["nnodes"], summary["nranks"]) == ("IB", True, 2, 4)
    files = {row["evidence"]["file"] for row in data["connections"]}
    assert files == {str(node_a), str(node_b)}
    assert [i["name"] for i in data["inputs"]] == [str(node_a), str(node_b)]


def test_human_report_starts_with_the_verdict():
    run = _topodoc(str(FIXTURES / "roce-retry-exceeded-mpirun.log"))
    assert run.returncode == 0
    first = run.stdout.decode().splitlines()[0]
    assert first.startswith("2 nodes") and "RoCE with GPUDirect RDMA" in first and "3 warnings" in first
    assert "[ib_completion_error]" in run.stdout.decode()


def test_stdin_and_not_an_nccl_log():
    ok = _topodoc("-", stdin=(FIXTURES / "tcpx-gcp-a3.log").read_bytes())
    assert ok.returncode == 0 and "GPUDirect-TCPX" in ok.stdout.decode()
    bad = _topodoc("-", stdin=b"epoch 1 loss 2.0\n")
    assert bad.returncode == 2
    assert bad.stderr.decode().strip() == "topodoc logs: no NCCL lines found in <stdin>"
    assert bad.stdout == b""


def test_missing_file_is_one_line_and_exit_2(tmp_path):
    run = _topodoc(str(tmp_path / "nope.log"))
    assert run.returncode == 2
    assert len(run.stderr.decode().strip().splitlines()) == 1 and "Traceback" not in run.stderr.decode()


def test_plugin_fallback_is_shown_with_its_reason():
    run = _topodoc(str(FIXTURES / "ofi-init-failed-socket-fallback-p4d.log"))
    out = run.stdout.decode()
    assert run.returncode == 0 and out.startswith("2 nodes") and "TCP sockets" in out.splitlines()[0]
    plugins = out.split("Plugins\n", 1)[1].split("\n\n", 1)[0]
    assert "aws-ofi-nccl" in plugins and "(aws-ofi-nccl initialization failed)" in plugins
    data = json.loads(_topodoc(str(FIXTURES / "ofi-init-failed-socket-fallback-p4d.log"), "--json").stdout)
    assert [(p["name"], p["status"], p["selected"]) for p in data["plugins"] if p["kind"] == "net"] == [
        ("aws-ofi-nccl", "failed", False)]


def test_partial_log_says_at_least_two_nodes_and_json_has_the_bound():
    path = str(FIXTURES / "ib-loc-prot-err4-vendor81.log")
    human = _topodoc(path)
    assert human.returncode == 0
    assert human.stdout.decode().startswith("at least 2 nodes, 16 ranks, NCCL 2.18.1")
    summary = json.loads(_topodoc(path, "--json").stdout)["summary"]
    assert (summary["nnodes"], summary["nnodes_min"]) == (None, 2)
    assert sorted(ev["line"] for ev in summary["evidence"]["nnodes_min"]) == [1, 6]
    (error,) = summary["errors"]  # the two WARNs, each with the return-code chain its process printed
    assert error["count"] == 2 and [ev["line"] for ev in error["related"]] == [14, 19]


def _evidence_rows(text: str) -> list[tuple[str, str, int, str]]:
    """(field, file, line, text) of each row of the Evidence table."""
    block = text.split("\nEvidence\n", 1)[1].split("\n\n", 1)[0]
    rows = []
    for row in block.splitlines():
        parts = row.split(None, 2)
        if len(parts) == 3 and ":" in parts[1] and parts[1].rsplit(":", 1)[1].isdigit():
            where, line = parts[1].rsplit(":", 1)
            rows.append((parts[0], where, int(line), parts[2]))
    return rows


def test_evidence_table_lists_each_line_once_in_file_and_line_order():
    from topodoc.parsers.nccl_log import analyze
    from topodoc.report.logs import render

    for log in sorted(FIXTURES.glob("*.log")):
        if log.with_suffix(".json").exists():
            rows = _evidence_rows(render(analyze([str(log)])))
            for field in {r[0] for r in rows}:
                places = [(r[1], r[2]) for r in rows if r[0] == field]
                assert places == sorted(set(places)), (log.name, field)
            texts = [(r[1], r[2]) for r in rows if r[3] != "(line shown above)"]
            assert len(texts) == len(set(texts)), log.name


def test_evidence_table_of_a_partial_log_is_sorted():
    rows = _evidence_rows(_topodoc(str(FIXTURES / "ib-loc-prot-err4-vendor81.log")).stdout.decode())
    assert [r[2] for r in rows if r[0] == "transport"] == [4, 10, 11]
    above = "(line shown above)"
    assert [(r[2], r[3]) for r in rows if r[0] == "gdr"] == [(10, above), (11, above)]
