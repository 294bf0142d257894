"""The golden view of an analysis: what ``fixtures/logs/<case>.json`` holds, and how to rewrite them.

    python tests/nccl_log_golden.py            # rewrite every golden after a reviewed change
"""

from __future__ import annotations

import json
from pathlib import Path

from topodoc import catalogue
from topodoc.codec import to_data
from topodoc.parsers.nccl_log import analyze

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def golden_view(path: Path) -> dict:
    """Summary, hosts, communicators, plugins and connection table of one fixture, named by its file name;
    the cross-line inferences and a hang's phases when there are any."""
    with path.open("rb") as stream:
        analysis = analyze([(path.name, stream)], catalogue.scan_literals())
    view = {
        "summary": to_data(analysis.summary),
        "hosts": to_data(analysis.hosts),
        "communicators": to_data(analysis.communicators),
        "plugins": to_data(analysis.plugins),
        "connections": to_data(analysis.connections),
    }
    for name in ("inferences", "phases"):
        if getattr(analysis, name):
            view[name] = to_data(getattr(analysis, name))
    return view


def cases() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.log") if p.with_suffix(".json").exists())


if __name__ == "__main__":
    for log in sorted(FIXTURES.glob("*.log")):
        if log.name.startswith("not_nccl"):
            continue
        log.with_suffix(".json").write_text(json.dumps(golden_view(log), indent=1) + "\n")
        print("wrote", log.with_suffix(".json").name)
