"""Measured (nccl-tests) against expected (the bandwidth model): percentage and likely limiter.

Pure: :func:`compare_run` takes a parsed :class:`~topodoc.model.NcclTestsRun` and a
:class:`~topodoc.bandwidth.model.BandwidthModel` (or its expectations) and returns one
:class:`Comparison` per applicable expectation. Only large messages count: below a few hundred MB,
latency, not bandwidth, sets busbw.
"""

from __future__ import annotations

from dataclasses import dataclass

from topodoc.bandwidth.model import BandwidthModel, Expectation, inter_node_expectations
from topodoc.model import NcclTestsRow, NcclTestsRun

LARGE_BYTES = 256 * 2**20
OK_PERCENT, FAR_BELOW_PERCENT = 80.0, 50.0
RING_BOUND = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")


@dataclass(frozen=True)
class Comparison:
    collective: str | None
    algorithm: str  # the expectation's: "ring", "nvls", "hierarchical"
    scope: str
    measured_busbw_gbps: float
    at_size: int  # bytes of the row the peak came from
    expected_busbw_gbps: float
    percent: float
    verdict: str  # "ok" (>= 80 %), "below" (50-80 %), "far-below" (< 50 %), "above" (> 110 %)
    limiter: str
    explanation: str


def peak_busbw(rows: tuple[NcclTestsRow, ...]) -> tuple[float, int] | None:
    """Highest busbw (either half) among rows >= 256 MiB, else among the three largest rows."""
    large = [r for r in rows if r.size >= LARGE_BYTES] or sorted(rows, key=lambda r: r.size)[-3:]
    best = None
    for row in large:
        for half in (row.out_of_place, row.in_place):
            if half and half.busbw is not None and (best is None or half.busbw > best[0]):
                best = (half.busbw, row.size)
    return best


def applicable(run: NcclTestsRun, bw_model: BandwidthModel) -> tuple[Expectation, ...]:
    nodes = run.nodes or 1
    if nodes > 1:
        intra = tuple(e for e in bw_model.expectations if e.scope == "intra-node")
        return inter_node_expectations(bw_model.gpus, bw_model.node_nic_gbps, bw_model.node_nic_label,
                                       intra, nodes, rdma=bw_model.node_nic_rdma)
    chosen = [e for e in bw_model.expectations if e.scope == "intra-node" and e.busbw_gbps]
    if run.collective != "all_reduce":
        chosen = [e for e in chosen if e.algorithm == "ring"]
    return tuple(chosen)


def compare_run(run: NcclTestsRun, bw_model: BandwidthModel) -> tuple[Comparison, ...]:
    """One comparison per expectation that applies to this run's collective and node count."""
    if run.collective not in RING_BOUND + (None,):
        return ()
    peak = peak_busbw(run.rows)
    if peak is None:
        return ()
    return tuple(_compare(run, peak, e) for e in applicable(run, bw_model) if e.busbw_gbps)


def _compare(run: NcclTestsRun, peak: tuple[float, int], exp: Expectation) -> Comparison:
    measured, size = peak
    expected = exp.busbw_gbps or 0.0
    percent = round(measured / expected * 100, 1)
    verdict = ("above" if percent > 110 else "ok" if percent >= OK_PERCENT
               else "below" if percent >= FAR_BELOW_PERCENT else "far-below")
    text = (f"{run.collective or 'collective'} busbw {measured:g} GB/s at {_size(size)} is {percent:g} %"
            " of the "
            f"{exp.scope} {exp.algorithm} expectation {expected:g} GB/s; limiter: {exp.limiter}")
    return Comparison(run.collective, exp.algorithm, exp.scope, measured, size, expected, percent, verdict,
                      exp.limiter, text + _hint(verdict, exp))


def _hint(verdict: str, exp: Expectation) -> str:
    if verdict == "above" and exp.algorithm == "ring":
        return ". Above the ring bound: NVLS/tree or in-network reduction (SHARP) is in use"
    if verdict == "far-below":
        return (". Far below: check that NCCL uses the transport you expect (NCCL_DEBUG=INFO), that no link "
                "trained down (topodoc diagnose), and GPU/NIC placement")
    return ""


def _size(size: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} B"
