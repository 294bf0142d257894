"""Score today's log analyzer on the real-log corpus (``fixtures/logs/real/``).

    python benchmarks/real_logs.py [--json] [DIR]

Each ``<case>.log`` there is a real NCCL log (or excerpt) copied from a public thread, host names and
addresses rewritten; its ``<case>.truth.json`` says what an expert reading the thread concludes, ``null``
where the log does not prove it. For every field a truth file sets, the case is *right* when
:func:`topodoc.parsers.nccl_log.analyze` says the same thing:

- ``transport``, ``gdr``, ``nccl_version``, ``nodes``, ``nodes_min``: equal to ``summary.transport``,
  ``summary.gdr``, ``summary.nccl_version``, ``summary.nnodes``, ``summary.nnodes_min`` (``nodes_min``: the
  lower bound an excerpt proves when it does not prove the total);
- ``error_categories``: every expected category is among the categories of ``summary.errors``, and a case
  whose truth is ``[]`` (nothing failed, benign lines only) gets no error at all.

An input the analyzer rejects (no NCCL line found, unreadable) or any exception counts as wrong for every
field that case scores. The figure is printed per field as right/scored, so it can be followed from
release to release. ``--json`` prints the per-case verdicts instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze

FIELDS = ("transport", "gdr", "nccl_version", "nodes", "nodes_min", "error_categories")
LITERALS = catalogue.scan_literals()  # what `logs` and `diagnose` pass: the failure catalogue's prefilters
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"


def observed(log: Path) -> dict | None:
    """What the analyzer says about one log, in the truth files' vocabulary; None when it fails."""
    try:
        summary = analyze([str(log)], LITERALS).summary
    except Exception:  # noqa: BLE001 - any analyzer failure counts as wrong, and the run goes on
        return None
    return {
        "transport": summary.transport,
        "gdr": summary.gdr,
        "nccl_version": summary.nccl_version,
        "nodes": summary.nnodes,
        "nodes_min": summary.nnodes_min,
        "error_categories": sorted({e.category for e in summary.errors}),
    }


def right(field: str, expected, seen: dict | None) -> bool:
    if seen is None:
        return False
    if field == "error_categories":
        got = set(seen[field])
        return not got if not expected else set(expected) <= got
    return seen[field] == expected


def score(cases: list[Path]) -> tuple[dict[str, list[int]], list[dict]]:
    totals = {field: [0, 0] for field in FIELDS}  # right, scored
    verdicts = []
    for log in cases:
        truth = json.loads(log.with_name(log.stem + ".truth.json").read_text())
        seen = observed(log)
        verdict = {"case": log.stem, "analyzer_failed": seen is None, "fields": {}}
        for field in FIELDS:
            if truth.get(field) is None:
                continue
            ok = right(field, truth[field], seen)
            totals[field][0] += ok
            totals[field][1] += 1
            verdict["fields"][field] = {"expected": truth[field], "seen": seen and seen[field], "right": ok}
        verdicts.append(verdict)
    return totals, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--json", action="store_true", help="print per-case verdicts as JSON")
    args = parser.parse_args(argv)
    cases = sorted(p for p in args.dir.glob("*.log") if p.with_name(p.stem + ".truth.json").exists())
    if not cases:
        print(f"real_logs: no <case>.log with a <case>.truth.json in {args.dir}", file=sys.stderr)
        return 2
    totals, verdicts = score(cases)
    if args.json:
        print(json.dumps(verdicts, indent=1))
        return 0
    failed = sum(v["analyzer_failed"] for v in verdicts)
    print(f"real-log corpus: {len(cases)} cases in {args.dir}; analyzer failed on {failed}")
    for field in FIELDS:
        ok, scored = totals[field]
        share = f"{100 * ok / scored:5.1f}%" if scored else "  n/a"
        print(f"  {field:<17} {ok:3d}/{scored:<3d} right  {share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
