"""The rule engine: rule declarations, the facts they read, and the results they produce.

A rule is a small check function wrapped by :func:`rule` with a stable kebab-case id, a severity, tags,
a title and a one-line fix; the facts it needs are its parameter names; its explanation lives in
``topodoc/rules/docs/<id>.md``. A check reads :class:`Facts` (never the machine) and yields
:class:`Hit` objects; :func:`evaluate` turns them into :class:`Finding` results, reports a rule whose
facts are absent as :class:`Skipped`, and turns an exception inside a rule into an
:class:`InternalError` instead of a crash.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from topodoc.model import Snapshot

DOCS_DIR = Path(__file__).resolve().parent / "docs"
DOC_HEADINGS = ("## What it checks", "## Why it matters", "## How to fix", "## Example")


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


@dataclass(frozen=True)
class Evidence:
    """One observed fact: where it was read (``source`` kind and ``where``) and what it said."""

    source: str  # "sysfs", "procfs", "nvml", "log", "nccl-tests", "command", "derived"
    where: str  # a path, an NVML call, "file:line", or the derivation used
    value: str


@dataclass(frozen=True)
class Hit:
    """What a check yields; the engine adds the rule's id and defaults."""

    subject: str
    message: str
    evidence: tuple[Evidence, ...] = ()
    fix: str | None = None
    severity: Severity | None = None
    confidence: float = 1.0


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    confidence: float
    subject: str
    message: str
    evidence: tuple[Evidence, ...]
    fix: str | None
    title: str = ""


@dataclass(frozen=True)
class Skipped:
    rule: str
    reason: str


@dataclass(frozen=True)
class InternalError:
    rule: str
    error: str


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    errors: tuple[InternalError, ...] = ()
    rules_run: int = 0


@dataclass(frozen=True)
class Facts:
    """Everything a rule may read; each part is optional.

    ``snapshot`` is a :class:`~topodoc.model.Snapshot`, ``topology`` its derived
    :class:`~topodoc.topology.Topology`, ``logs`` a :class:`~topodoc.logmodel.LogAnalysis`, and
    ``nccl_tests`` a :class:`~topodoc.rules.bandwidth.NcclTestsInput`: the parsed ``--nccl-tests``
    run, where it came from (file and lines), and its comparison with this machine's bandwidth model.
    """

    snapshot: Snapshot | None = None
    topology: Any = None
    logs: Any = None
    nccl_tests: Any = None
    kernel: Any = None  # kernel-log events: ((path, topodoc.parsers.kernel_log.KernelEvent), ...)


NEEDS = {
    "snapshot": "a hardware snapshot (live, or --from RECORDING)",
    "topology": "the derived topology of a hardware snapshot",
    "logs": "an NCCL log (--log FILE)",
    "nccl_tests": "an nccl-tests output (--nccl-tests FILE)",
    "kernel": "a kernel log (dmesg / journalctl -k output given to diagnose FILE...)",
}


class MissingFacts(Exception):
    """Raised by a check when the facts it needs are present but lack what it must read."""


Check = Callable[[Facts], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    severity: Severity
    tags: tuple[str, ...]
    needs: tuple[str, ...]
    fix: str
    check: Check

    @property
    def doc_path(self) -> Path:
        return DOCS_DIR / f"{self.id}.md"


def rule(id: str, severity: str, tags: tuple[str, ...], *, title: str, fix: str) -> Callable[..., Rule]:
    """Declare a rule, the one way: ``@rule("gpu-lost", "critical", ("gpu",), title=..., fix=...)`` on a
    check whose parameters are named after the facts it reads (``snapshot``, ``topology``, ``logs``,
    ``nccl_tests``). A parameter without a default is needed (the rule is skipped without it); one with a
    default (``logs=None``) is read when present."""

    def wrap(check: Callable[..., Iterable[Hit]]) -> Rule:
        params = list(inspect.signature(check).parameters.values())
        names = tuple(p.name for p in params if p.name in NEEDS)
        needs = tuple(p.name for p in params if p.name in NEEDS and p.default is p.empty)
        unknown = [p.name for p in params if p.name not in NEEDS and p.default is p.empty]
        if unknown or not needs:
            raise ValueError(f"rule {id}: parameters must name facts ({', '.join(NEEDS)}), got {unknown}")

        @functools.wraps(check)
        def read(facts: Facts) -> Iterable[Hit]:
            return check(**{name: getattr(facts, name) for name in names})

        return Rule(id, title, Severity(severity), tuple(tags), needs, fix, read)

    return wrap


def evaluate(facts: Facts, rules: Iterable[Rule]) -> Report:
    """Run every rule over ``facts``; never raises because of a rule."""
    facts = with_topology(facts)
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[InternalError] = []
    count = 0
    for item in rules:
        count += 1
        missing = [NEEDS[name] for name in item.needs if getattr(facts, name) is None]
        if missing:
            skipped.append(Skipped(item.id, "needs " + " and ".join(missing)))
            continue
        try:
            hits = list(item.check(facts))
        except MissingFacts as gap:
            skipped.append(Skipped(item.id, str(gap)))
            continue
        except Exception as err:  # a bug in one rule must not hide the others' findings
            errors.append(InternalError(item.id, f"{type(err).__name__}: {err}"))
            continue
        findings.extend(_finding(item, hit) for hit in hits)
    findings.sort(key=lambda f: (-f.severity.rank, -f.confidence, f.rule, f.subject))
    return Report(tuple(findings), tuple(skipped), tuple(errors), count)


def with_topology(facts: Facts) -> Facts:
    """``facts`` with the snapshot's derived topology filled in when it was left out; a derivation that
    fails leaves it out (the rules that need it are then skipped, the others still run)."""
    if facts.snapshot is None or facts.topology is not None:
        return facts
    from topodoc.topology import derive

    try:
        return dataclasses.replace(facts, topology=derive(facts.snapshot))
    except Exception:  # diagnose reports the derivation error itself
        return facts


def _finding(item: Rule, hit: Hit) -> Finding:
    return Finding(
        rule=item.id,
        severity=hit.severity or item.severity,
        confidence=round(hit.confidence, 2),
        subject=hit.subject,
        message=hit.message,
        evidence=hit.evidence,
        fix=hit.fix if hit.fix is not None else item.fix,
        title=item.title,
    )


def at_or_above(report: Report, threshold: Severity) -> list[Finding]:
    return [f for f in report.findings if f.severity.rank >= threshold.rank]


def read_doc(item: Rule) -> str:
    return item.doc_path.read_text(encoding="utf-8")
