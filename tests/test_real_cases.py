"""fixtures/cases/ and benchmarks/real_cases.py: every case is well formed; the scorer runs end to end.

The scorer is run on three cases for its structure only (verdict vocabulary, counts), never for a score: the
figures themselves are the benchmark's job (fixtures/cases/BLIND.md).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "cases"
_spec = importlib.util.spec_from_file_location("real_cases", ROOT / "benchmarks" / "real_cases.py")
real_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_cases)

CASE_DIRS = sorted(p for p in CASES.iterdir() if p.is_dir())


def test_collection_is_big_enough_and_spread():
    cases = [real_cases.load_case(d) for d in CASE_DIRS]
    assert len(cases) >= 40
    assert len({c["class"] for c in cases}) >= 10
    assert len({c["source"] for c in cases}) == len(cases), "one thread, one case"


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_case_is_well_formed(case_dir):
    case = real_cases.load_case(case_dir)  # raises CaseError on a missing key or file
    assert case["cause"].strip() and case["fix"].strip() and case.get("confirmed_by", "").strip()
    assert isinstance(case.get("source_in_project_before"), bool)
    listed = set(case["files"]) | {"case.json"}
    assert {p.name for p in case_dir.iterdir()} == listed, "every file is listed, every listed file exists"
    for name in case["files"]:
        assert (case_dir / name).read_text(encoding="utf-8").strip(), f"{name} is empty"


def test_load_case_rejects_missing_keys_and_files(tmp_path):
    bad = tmp_path / "bad-case"
    bad.mkdir()
    (bad / "case.json").write_text(json.dumps({"id": "bad-case", "source": "https://x"}))
    with pytest.raises(real_cases.CaseError, match="missing"):
        real_cases.load_case(bad)
    doc = {"id": "bad-case", "source": "https://x", "class": "c", "cause": "c", "fix": "f",
           "files": ["gone.txt"], "expect": {"rules": [], "area_words": ["a"], "fix_words": ["b"]}}
    (bad / "case.json").write_text(json.dumps(doc))
    with pytest.raises(real_cases.CaseError, match="does not exist"):
        real_cases.load_case(bad)


def test_score_rules_are_explicit():
    case = {"expect": {"rules": ["sig-x"], "area_words": ["shm"], "fix_words": ["shm-size"]},
            "false_if": ["nonsense"]}
    benign = {"rule": "nccl-benign-lines", "severity": "info", "message": "benign [failure catalogue: sig-x]"}
    named = {"rule": "r", "severity": "error", "message": "see [failure catalogue: sig-x]", "fix": ""}
    area = {"rule": "r2", "severity": "warning", "message": "the shm is small", "fix": "look"}
    other = {"rule": "r3", "severity": "error", "message": "says nonsense", "fix": ""}
    assert real_cases.score(case, 1, {"findings": [named]})["verdict"] == "right-fix"
    assert real_cases.score(case, 1, {"findings": [area]})["verdict"] == "right-area"
    out = real_cases.score(case, 0, {"findings": [benign]})
    assert out["verdict"] == "silent" and len(out["false"]) == 1, "calling the cause benign is false"
    out = real_cases.score(case, 1, {"findings": [other]})
    assert out["verdict"] == "wrong" and out["false"]
    assert real_cases.score(case, 2, {"findings": []})["verdict"] == "refused"
    assert real_cases.score(case, None, None)["verdict"] == "refused"


def test_scorer_runs_the_cli_on_three_cases():
    picked = ["speedrun-2-docker-shm-segment", "nccl-304-plx-acs-gdr-crash",
              "gpu-operator-544-fm-530-mismatch-journal"]
    results = [real_cases.score_case(CASES / name, timeout=60) for name in picked]
    for r in results:
        assert r["verdict"] in real_cases.VERDICTS
        assert r["rc"] in (0, 1, 2)
        assert isinstance(r["false"], list) and r["findings"] >= 0 and r["unread_files"] >= 0
    tot = real_cases.totals(results)
    assert tot["all"]["cases"] == 3
    assert sum(tot["all"][v] for v in real_cases.VERDICTS) == 3
