"""A parsed nccl-tests run, for people."""

from __future__ import annotations

from topodoc.model import NcclTestsResult, NcclTestsRun
from topodoc.report.safe import human


def _half(h: NcclTestsResult | None) -> str:
    if h is None:
        return f"{'':>9} {'':>8} {'':>8} {'':>7}"
    wrong = "N/A" if h.wrong is None else f"{h.wrong:g}"
    return f"{_num(h.time_us):>9} {_num(h.algbw):>8} {_num(h.busbw):>8} {wrong:>7}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@human
def render_run(run: NcclTestsRun) -> str:
    hosts = f" on {run.nodes} node(s)" if run.nodes else ""
    name = run.collective or "unknown collective"
    lines = [f"{name}: {run.nranks or '?'} ranks{hosts}, {len(run.rows)} sizes"
             + ("" if run.complete else " — INCOMPLETE (no footer)")]
    if run.devices:
        names = sorted({d.name or "?" for d in run.devices})
        lines.append(f"  devices: {', '.join(names)}")
    lines.append(f"  {'size (B)':>12} {'time us':>9} {'algbw':>8} {'busbw':>8} {run.wrong_column:>7}"
                 f"  | in-place {'time us':>9} {'algbw':>8} {'busbw':>8} {run.wrong_column:>7}")
    lines += [f"  {r.size:>12} {_half(r.out_of_place)}  |          {_half(r.in_place)}" for r in run.rows]
    if run.avg_bus_bandwidth is not None:
        lines.append(f"  Avg bus bandwidth: {run.avg_bus_bandwidth:g} GB/s")
    if run.out_of_bounds:
        lines.append(f"  Out of bounds values: {run.out_of_bounds} — the collective returned WRONG DATA")
    lines += [f"  failure: {f}" for f in run.failures]
    return "\n".join(lines)
