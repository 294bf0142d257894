"""The real-log corpus (fixtures/logs/real): every case has a well-formed truth file whose catalogue
signatures really occur in its log, and benchmarks/real_logs.py scores it end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import regex

from topodoc import catalogue
from topodoc.logmodel import ERROR_CATEGORIES

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "logs" / "real"
CASES = sorted(REAL.glob("*.log"))
KEYS = {"source", "transport", "gdr", "nccl_version", "nodes", "error_categories", "signatures", "launcher",
        "notes"}
OPTIONAL = {"nodes_min"}  # the lower bound an excerpt proves, set where ``nodes`` (the total) is null
TRANSPORTS = {"IB", "RoCE", "EFA", "Socket", "TCPX", "TCPXO", "gIB", "Slingshot", "IBext", "none"}
VERSION = regex.compile(r"2\.\d++\.\d++")


def truth(log: Path) -> dict:
    return json.loads(log.with_name(log.stem + ".truth.json").read_text())


def test_corpus_size_and_spread():
    assert len(CASES) >= 40
    truths = [truth(c) for c in CASES]
    assert {t["transport"] for t in truths} >= {"IB", "RoCE", "EFA", "IBext", "Slingshot", "none"}
    minors = {int(t["nccl_version"].split(".")[1]) for t in truths if t["nccl_version"]}
    assert min(minors) <= 4 and max(minors) >= 25
    assert sorted(p.name for p in REAL.glob("*.truth.json")) == sorted(c.stem + ".truth.json" for c in CASES)


@pytest.mark.parametrize("log", CASES, ids=[c.stem for c in CASES])
def test_truth_file(log):
    t = truth(log)
    assert KEYS <= set(t) <= KEYS | OPTIONAL
    assert t["source"].startswith("https://github.com/")
    assert t["transport"] is None or t["transport"] in TRANSPORTS
    assert t["gdr"] in (None, True, False)
    assert t["nccl_version"] is None or VERSION.fullmatch(t["nccl_version"])
    assert t["nodes"] is None or (isinstance(t["nodes"], int) and t["nodes"] >= 1)
    assert t.get("nodes_min") is None or (t["nodes"] is None and isinstance(t["nodes_min"], int)
                                          and t["nodes_min"] >= 1)
    assert t["error_categories"] is None or set(t["error_categories"]) <= set(ERROR_CATEGORIES)
    assert t["transport"] != "none" or t["nodes"] == 1, "transport none is a single-node verdict"


@pytest.mark.parametrize("log", CASES, ids=[c.stem for c in CASES])
def test_truth_signatures_occur_in_the_log(log):
    """Each signature a truth file names is matched by the catalogue on at least one line of the log."""
    matched = {sig.id for line in log.read_text().splitlines() if (sig := catalogue.match(line))}
    assert set(truth(log)["signatures"]) <= matched


def test_benchmark_prints_every_field():
    out = subprocess.run([sys.executable, "benchmarks/real_logs.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert f"{len(CASES)} cases" in out.stdout
    for field in ("transport", "gdr", "nccl_version", "nodes", "nodes_min", "error_categories"):
        assert regex.search(rf"^  {field}\s++\d++/\d++\s++right", out.stdout, regex.M), field


def test_benchmark_json_and_empty_dir(tmp_path):
    out = subprocess.run([sys.executable, "benchmarks/real_logs.py", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    verdicts = json.loads(out.stdout)
    assert [v["case"] for v in verdicts] == [c.stem for c in CASES]
    empty = subprocess.run([sys.executable, "benchmarks/real_logs.py", str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
    assert empty.returncode == 2 and "no <case>.log" in empty.stderr and "Traceback" not in empty.stderr
