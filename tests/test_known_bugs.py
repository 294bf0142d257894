"""The known-bugs table (topodoc/catalogue/known_bugs.toml) and the rule that matches it, nccl-known-bug:
every row cites https sources and names catalogue signatures that exist; a row fires only on the release
AND the symptom."""

from __future__ import annotations

import dataclasses

import pytest

from topodoc import catalogue
from topodoc.catalogue.known_bugs import known_bugs, release
from topodoc.logmodel import Evidence, LogAnalysis, LogSummary, PluginInfo
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate


def test_every_row_cites_sources_and_real_signatures():
    ids = {sig.id for sig in catalogue.signatures()}
    rows = known_bugs()
    assert len(rows) >= 5 and len({r.id for r in rows}) == len(rows)
    for row in rows:
        assert row.sources and all(s.startswith("https://") for s in row.sources), row.id
        assert set(row.symptom_signatures) <= ids, row.id
        assert row.settle.startswith("1. "), row.id  # ranked outputs that settle it


@pytest.mark.parametrize(("text", "want"), [
    ("2.20.3+cuda12.2", (2, 20, 3)), ("1.9.1-aws", (1, 9, 1)), ("2.20", (2, 20, 0)), ("v1.19.2", (1, 19, 2)),
    ("", None), ("2", None), ("2.x.1", None), ("9" * 50 + ".1", None),
])
def test_release_parsing(text, want):
    assert release(text) == want


def test_affected_range_is_exclusive_of_the_fix_and_wordings_must_fit_whole():
    (peermem,) = [r for r in known_bugs() if r.id.startswith("nccl-peermem")]
    assert peermem.affects("2.22.3") and not peermem.affects("2.23.4") and not peermem.affects(None)
    assert peermem.affects_range("2.18", "2.20") and peermem.affects_range("2.18", "2.22")
    assert not peermem.affects_range("2.18", "2.23") and not peermem.affects_range("2.24", None)


def _log(version: str, plugin: PluginInfo) -> LogAnalysis:
    ev = Evidence("x.log", 1, f"NCCL version {version}")
    return LogAnalysis(summary=LogSummary(nccl_version=version, nccl_versions=(version,),
                                          evidence={"nccl_version": (ev,)}), plugins=(plugin,))


def test_plugin_row_needs_the_plugin_release_the_old_nccl_and_the_failure():
    failed = PluginInfo(kind="net", name="aws-ofi-nccl", status="failed", version="1.19.2",
                        evidence=Evidence("x.log", 2, "NET/OFI Initializing aws-ofi-nccl 1.19.2"))
    rule = [registry.get("nccl-known-bug")]
    (finding,) = evaluate(Facts(logs=_log("2.14.3", failed)), rule).findings
    assert "2.17.1" in finding.message and "releases/tag/v1.19.2" in finding.message
    assert not evaluate(Facts(logs=_log("2.18.1", failed)), rule).findings  # a supported NCCL
    older = dataclasses.replace(failed, version="1.9.1-aws")
    assert not evaluate(Facts(logs=_log("2.14.3", older)), rule).findings  # a plugin release before 1.19
    used = dataclasses.replace(failed, status="loaded", selected=True)
    assert not evaluate(Facts(logs=_log("2.14.3", used)), rule).findings  # no symptom
