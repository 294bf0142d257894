"""One agent cycle: the ``diagnose`` computation within a time budget.

It probes with what ``topodoc diagnose`` probes with — :func:`topodoc.probe.source.resolve_source` (once, so
a recording is opened once) and :func:`topodoc.probe.collect.collect` — and hands the snapshot and the
kernel-log events the agent followed to :func:`topodoc.diagnosis.run`, the one pipeline (derive, every
rule, the kernel rules included). It never raises: a collector or derivation that fails becomes an error
string in the result and the cycle carries on with what it has, the way ``diagnose`` reports an internal
error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from topodoc.rules.engine import Report


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

    def run(self, number: int, kernel: tuple = ()) -> CycleResult:
        """Probe, derive and judge once; ``kernel``: the ((where, KernelEvent), ...) the agent followed."""
        from topodoc.diagnosis import Request
        from topodoc.diagnosis import run as diagnose

        started = time.perf_counter()
        errors: list[str] = []
        snapshot = self._collect(errors)
        topology = self._derive(snapshot, errors)
        report = Report()
        if snapshot is not None or kernel:
            report = diagnose(Request(snapshot=snapshot, topology=topology, kernel=kernel,
                                      live_default=False)).report
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
