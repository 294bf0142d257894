"""``topodoc npd --family FAMILY [--from SPEC] [--fail-on SEV] [--max-length N]``: one health family as a
Kubernetes node-problem-detector custom plugin.

NPD's custom-plugin contract (``pkg/custompluginmonitor``): the plugin prints one line and exits 0 (OK),
1 (NonOK: the problem is present) or 2 (Unknown: it could not tell); NPD keeps the first
``max_output_length`` characters (80 by default) as the condition's message. This command probes the
machine (or ``--from`` a recording), runs only the family's rules and answers that way: 1 when a finding
is at least ``--fail-on`` (default error), 2 when the family's values could not be read (no NVML, no
health values, the probe failed), else 0. ``deploy/kubernetes/npd/`` turns the families into node
conditions.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

FAMILIES: dict[str, tuple[str, ...]] = {
    "gpu-memory": ("gpu-ecc-uncorrected", "gpu-row-remap", "gpu-retired-pages"),
    "gpu-lost": ("gpu-lost",),
    "gpu-thermal": ("gpu-clock-slowdown",),
    "nvlink": ("nvlink-link-down", "nvlink-errors", "nvswitch-fabric-incomplete"),
    "network": ("ib-port-down", "ib-port-errors", "ib-rate-below-peers"),
    "pcie": ("pcie-width-reduced", "pcie-speed-reduced", "pcie-aer-errors"),
}
GPU_FAMILIES = ("gpu-memory", "gpu-lost", "gpu-thermal", "nvlink")
OK, NON_OK, UNKNOWN = 0, 1, 2
SEVERITIES = ("info", "warning", "error", "critical")

EXAMPLE = """\b
Example:
  topodoc npd --family gpu-memory --from example:hgx-h100-degraded-health; echo $?
  topodoc npd --family network"""


@click.command(epilog=EXAMPLE)
@click.option("--family", type=click.Choice(sorted(FAMILIES)), required=True,
              help="The health family to check.")
@click.option("--from", "source", metavar="SPEC",
              help="live (default), a recording NAME.tar.gz, or example:NAME.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default="error", show_default=True,
              help="NonOK (exit 1) when a finding is at least this severe.")
@click.option("--max-length", type=click.IntRange(min=20, max=4096), default=80, show_default=True,
              help="Cut the message to this many characters (NPD's max_output_length).")
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              metavar="SECONDS", help="Live: no NVML call or command after this long.")
def command(family: str, source: str | None, fail_on: str, max_length: int, deadline: float) -> None:
    """Check one health family the way node-problem-detector's custom plugins answer: one line, exit 0 OK,
    1 problem, 2 unknown."""
    from topodoc.diagnosis import Request, run
    from topodoc.rules.engine import Severity
    from topodoc.rules.registry import get

    snapshot = _snapshot(source, deadline, max_length)
    unknown = _unreadable(family, snapshot)
    if unknown:
        _answer(UNKNOWN, f"{family}: unknown: {unknown}", max_length)
    rules = [get(rule_id) for rule_id in FAMILIES[family]]
    report = run(Request(snapshot=snapshot, rules=tuple(rules), live_default=False)).report
    if report.errors:
        _answer(UNKNOWN, f"{family}: unknown: rule {report.errors[0].rule} failed", max_length)
    bad = [f for f in report.findings if f.severity.rank >= Severity(fail_on).rank]
    if bad:
        worst = bad[0]
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        _answer(NON_OK, f"{worst.rule} {worst.subject}: {worst.message}{more}", max_length)
    quiet = f"; {len(report.findings)} below {fail_on}" if report.findings else ""
    _answer(OK, f"{family}: ok ({len(rules)} rule(s){quiet})", max_length)


def _snapshot(source: str | None, deadline: float, max_length: int):
    from topodoc.probe.source import SourceError, load_snapshot

    try:
        return load_snapshot(source, deadline)
    except SourceError as err:
        _answer(UNKNOWN, f"unknown: {err}", max_length)


def _unreadable(family: str, snapshot) -> str | None:
    """Why the family's values are not there (NPD's Unknown), or None."""
    if family not in GPU_FAMILIES:
        return None
    if not snapshot.driver.nvml_available:
        gap = next((g for g in snapshot.gaps if g.source == "nvml:nvmlInit"), None)
        return f"NVML not available ({gap.detail})" if gap else "NVML not available"
    if not snapshot.gpus:
        return "NVML lists no GPU"
    if family in ("gpu-memory", "gpu-thermal") and all(g.health is None for g in snapshot.gpus if not g.lost):
        gap = next((g for g in snapshot.gaps if "health" in g.what or "ECC" in g.what), None)
        return f"no health values read ({gap.detail})" if gap else "no health values read"
    return None


def _answer(code: int, message: str, max_length: int) -> NoReturn:
    line = " ".join(message.split())
    if len(line) > max_length:
        line = line[: max_length - 3] + "..."
    click.echo(line)
    sys.exit(code)
