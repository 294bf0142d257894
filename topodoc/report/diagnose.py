"""Renderers for ``topodoc diagnose`` and ``topodoc rules``: one screen, worst first, evidence and fix.

Pure: each function returns text (or JSON-able data) and never prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import click

from topodoc.codec import to_data
from topodoc.report.safe import human
from topodoc.rules.engine import Finding, Report, Rule, Severity

STYLE = {
    Severity.CRITICAL: {"fg": "red", "bold": True},
    Severity.ERROR: {"fg": "red"},
    Severity.WARNING: {"fg": "yellow"},
    Severity.INFO: {"fg": "cyan"},
}
MAX_EVIDENCE = 2
MAX_SKIP_LINES = 8  # the most common reasons a rule was skipped; the rest summed in one line


def json_data(report: Report, inputs: dict) -> dict:
    """``{"inputs", "summary", "findings", "skipped", "errors"}``; findings as :func:`to_data` writes them."""
    data = to_data(report)
    data["summary"] = dict(Counter(f.severity.value for f in report.findings))
    return {"inputs": inputs, **data}


@human
def render_text(report: Report, inputs: dict, color: bool = False, quiet: bool = False) -> str:
    """The findings worst first; ``quiet`` leaves out the notes (skipped rules, the explain hint)."""
    lines = [_headline(report, inputs, color), ""]
    for finding in report.findings:
        lines += _finding_lines(finding, color)
    if report.skipped and not quiet:
        reasons = Counter(s.reason for s in report.skipped).most_common()
        shown = reasons if len(reasons) <= MAX_SKIP_LINES else reasons[: MAX_SKIP_LINES - 1]
        for reason, count in shown:
            lines.append(_dim(f"skipped {count} rule(s): {reason}", color))
        rest = reasons[len(shown):]
        if rest:
            more = f"skipped {sum(n for _r, n in rest)} more rule(s) for {len(rest)} other missing input(s)"
            lines.append(_dim(f"{more} (`--json` lists each rule and what would let it run)", color))
    for err in report.errors:
        lines.append(
            click.style(f"internal error in rule {err.rule}: {err.error}", fg="red")
            if color
            else f"internal error in rule {err.rule}: {err.error}"
        )
    if report.findings and not quiet:
        lines.append(_dim("`topodoc explain RULE` tells why a rule matters and how to fix it.", color))
    return "\n".join(lines).rstrip() + "\n"


def _headline(report: Report, inputs: dict, color: bool) -> str:
    what = " + ".join(f"{k} {v}" for k, v in inputs.items() if v) or "nothing"
    counts = Counter(f.severity for f in report.findings)
    parts = [_plural(counts[s], s.value) for s in sorted(counts, key=lambda s: -s.rank)]
    verdict = ", ".join(parts) if parts else "no findings"
    head = f"topodoc diagnose · {what}\n{verdict} ({report.rules_run} rules, {len(report.skipped)} skipped)"
    return click.style(head, bold=True) if color else head


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 or word == "info" else f"{count} {word}s"


def _finding_lines(finding: Finding, color: bool) -> list[str]:
    tag = f"{finding.severity.value.upper():8}"
    if color:
        tag = click.style(tag, **STYLE[finding.severity])
    confidence = f" (confidence {finding.confidence:.0%})" if finding.confidence < 1 else ""
    lines = [f"{tag} {finding.rule} · {finding.subject}{confidence}", f"  {finding.message}"]
    for ev in finding.evidence[:MAX_EVIDENCE]:
        lines.append(_dim(f"  evidence: {ev.source} {ev.where} = {_short(ev.value)}", color))
    if len(finding.evidence) > MAX_EVIDENCE:
        lines.append(_dim(f"  (+{len(finding.evidence) - MAX_EVIDENCE} more in --json)", color))
    if finding.fix:
        lines.append(f"  fix: {finding.fix}")
    return [*lines, ""]


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dim(text: str, color: bool) -> str:
    return click.style(text, dim=True) if color else text


@dataclass(frozen=True)
class RuleRow:
    """One rule as ``topodoc rules --json`` lists it."""

    id: str
    severity: Severity
    title: str
    tags: tuple[str, ...]
    needs: tuple[str, ...]
    fix: str


def rules_json(rules: Iterable[Rule]) -> list[dict]:
    return [to_data(RuleRow(r.id, r.severity, r.title, tuple(r.tags), tuple(r.needs), r.fix)) for r in rules]


def rules_text(rules: Iterable[Rule]) -> str:
    rows = list(rules)
    width = max(len(r.id) for r in rows)
    lines = [f"{'RULE':{width}}  {'SEVERITY':8}  {'NEEDS':15}  TITLE"]
    for r in rows:
        needs = "+".join("log" if n == "logs" else n.replace("snapshot", "hardware") for n in r.needs)
        lines.append(f"{r.id:{width}}  {r.severity.value:8}  {needs:15}  {r.title}")
    return "\n".join(lines) + "\n"
