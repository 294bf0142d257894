"""Every ``fixtures/logs/<case>.log`` analyzes to exactly its reviewed ``<case>.json``."""

from __future__ import annotations

import json

import pytest
from nccl_log_golden import cases, golden_view

from topodoc.logmodel import ERROR_CATEGORIES


@pytest.mark.parametrize("log", cases(), ids=lambda p: p.stem)
def test_fixture_matches_golden(log):
    expected = json.loads(log.with_suffix(".json").read_text())
    assert golden_view(log) == expected


def test_fixtures_cover_every_transport_and_error_category():
    summaries = [json.loads(p.with_suffix(".json").read_text())["summary"] for p in cases()]
    transports = {s["transport"] for s in summaries}
    assert {"IB", "RoCE", "EFA", "Socket", "TCPX", "TCPXO", "gIB", "Slingshot", "IBext", "none"} <= transports
    categories = {e["category"] for s in summaries for e in s["errors"]}
    missing = set(ERROR_CATEGORIES) - categories
    assert missing == set(), f"no fixture shows {sorted(missing)}"


def test_every_golden_claim_points_at_its_own_file():
    for log in cases():
        data = json.loads(log.with_suffix(".json").read_text())
        lines = log.read_bytes().split(b"\n")
        for error in data["summary"]["errors"]:
            assert error["file"] == log.name
            assert 1 <= error["line"] <= len(lines)
        for row in data["connections"]:
            assert row["evidence"]["file"] == log.name
