"""Rules on the analyzer's cross-line inferences (:class:`topodoc.logmodel.Inference`): the first failure
across ranks, where a hang stopped, NIC loopback inside one node. (A version mismatch told by message
wording is a ``version_mismatch`` error, and a printed version that a host's own wordings contradict a
``version_range`` inference: both are reported by ``nccl-version-mismatch``, through
:func:`inference_hits`.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.rules.common import log_line
from topodoc.rules.engine import Hit, Rule, Severity, rule

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import Inference, LogAnalysis


def _of(logs: LogAnalysis, kind: str) -> list[Inference]:
    return [item for item in logs.inferences if item.kind == kind]


def _subject(item: Inference) -> str:
    if item.host and item.pid is not None:
        return f"{item.host}:{item.pid}"
    return item.host or "job"


def _message(item: Inference) -> str:
    return item.statement + (f" (open: {item.unknown})" if item.unknown else "")


def inference_hits(logs: LogAnalysis, kind: str) -> Iterator[Hit]:
    """One finding per inference of ``kind``, its statement, what it leaves open, and its lines."""
    for item in _of(logs, kind):
        yield _hit(item)


def _hit(item: Inference, fix: str | None = None, severity: Severity | None = None) -> Hit:
    return Hit(
        _subject(item),
        _message(item),
        tuple(log_line(ev) for ev in item.evidence[:4]),
        fix=fix,
        severity=severity,
    )


@rule(
    "nccl-first-failure",
    "error",
    ("nccl", "errors", "log"),
    title="The first failure across ranks, and the errors that only reacted to it",
    fix="fix the first failure; the later 'connection closed' / remote errors of other ranks go away with it",
)
def nccl_first_failure(logs: LogAnalysis) -> Iterator[Hit]:
    for item in _of(logs, "first_failure"):
        yield _hit(item)


@rule(
    "nccl-hang-phase",
    "warning",
    ("nccl", "hang", "log"),
    title="A hang: the last phase each rank reached, and what that points to",
    fix="start from the ranks furthest behind: their phase names the layer to check (bootstrap TCP, P2P "
    "inside the node, the network after connect, the application's collective order)",
)
def nccl_hang_phase(logs: LogAnalysis) -> Iterator[Hit]:
    for item in _of(logs, "hang"):
        yield _hit(item)


@rule(
    "nccl-nic-loopback",
    "info",
    ("nccl", "network", "p2p", "log"),
    title="Ranks on one node talk through the network (NIC loopback), not a second node",
    fix="unset NCCL_P2P_DISABLE / NCCL_SHM_DISABLE (or NCCL_P2P_LEVEL=LOC) unless they work around a known "
    "fault; if P2P is unavailable, check ACS / IOMMU and whether the GPUs support peer access",
)
def nccl_nic_loopback(logs: LogAnalysis) -> Iterator[Hit]:
    for item in _of(logs, "nic_loopback"):
        yield _hit(item)


RULES: tuple[Rule, ...] = (nccl_first_failure, nccl_hang_phase, nccl_nic_loopback)
