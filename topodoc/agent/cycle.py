"""One agent cycle: the ``diagnose`` computation (probe -> derive -> evaluate) within a time budget.

It calls what ``topodoc diagnose`` calls — :func:`topodoc.probe.source.resolve_source` (once, so a
recording is opened once), :func:`topodoc.probe.collect.collect`, :func:`topodoc.topology.derive`,
:func:`topodoc.rules.engine.evaluate` over :data:`topodoc.rules.registry.RULES` — and never raises: a
collector or derivation that fails becomes an error string in the result and the cycle carries on
with what it has, the way ``diagnose`` reports an internal error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from topodoc.rules.engine import Facts, Report, evaluate


@dataclass(frozen=True)
class CycleResult:
    number: int
    finished: float  # epoch seconds
    duration_s: float
    snapshot: object = None
    topology: object = None
    report: Report = field(default_factory=Report)
    errors: tuple[str, ...] = ()  # collector / derivation / budget problems (rule errors are in report)

    @property
    def inputs(self) -> dict:
        """The ``inputs`` block of the ``diagnose --json`` document."""
        hardware = self.snapshot.source if self.snapshot is not None else None
        return {"hardware": hardware, "log": None, "nccl-tests": None}


class Prober:
    """Resolves ``--from`` once; :meth:`run` probes, derives and evaluates once."""

    def __init__(self, spec: str | None, budget_s: float) -> None:
        from topodoc.probe.source import resolve_source

        self.spec = spec
        self.budget_s = budget_s
        self.host, self.source = resolve_source(spec)  # SourceError: the caller's one-line exit 2

    def run(self, number: int) -> CycleResult:
        from topodoc.rules.registry import RULES

        started = time.perf_counter()
        errors: list[str] = []
        snapshot = self._collect(errors)
        topology = self._derive(snapshot, errors)
        report = evaluate(Facts(snapshot, topology), RULES) if snapshot is not None else Report()
        duration = time.perf_counter() - started
        if duration > self.budget_s:
            errors.append(f"budget: the cycle took {duration:.1f}s, over its {self.budget_s:.1f}s budget")
        return CycleResult(number, time.time(), duration, snapshot, topology, report, tuple(errors))

    def _collect(self, errors: list[str]):
        from topodoc.probe.collect import collect

        try:
            return collect(self.host, self.source)
        except Exception as err:  # a collector bug must not stop the agent; reported, next cycle retries
            errors.append(f"probe: {type(err).__name__}: {err}")
            return None

    @staticmethod
    def _derive(snapshot, errors: list[str]):
        from topodoc.topology import derive

        if snapshot is None:
            return None
        try:
            return derive(snapshot)
        except Exception as err:  # as in diagnose: rules that need only the snapshot still run
            errors.append(f"topology: {type(err).__name__}: {err}")
            return None
