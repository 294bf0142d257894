"""Rules over the NCCL logs of many nodes: the fleet's rail map (:mod:`topodoc.fleet.raillog`).

``rail-map-broken``: a host whose local GPU uses other NICs than most hosts use for that GPU.
``cross-rail-connections``: network connections whose two ends sit on NICs of different rails.
Both read only the log analysis; ``fleet --logs`` and ``diagnose --log`` run them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.rules.common import log_line
from topodoc.rules.engine import Hit, rule

if TYPE_CHECKING:  # the log model loads only when a log is read (tests/test_cli_startup.py)
    from topodoc.logmodel import LogAnalysis


@rule(
    "rail-map-broken", "warning", ("fleet", "rails", "nics", "log"),
    title="A host's GPU uses other NICs than the rest of the fleet uses for that GPU",
    fix="compare the host's NIC cabling, PCIe placement and NCCL_IB_HCA with a good host "
    "(`topodoc fleet BAD GOOD` on their recordings)",
)
def rail_map_broken(logs: LogAnalysis) -> Iterator[Hit]:
    from topodoc.fleet.raillog import build

    for brk in build(logs).breaks:
        yield Hit(
            subject=f"{brk.host} GPU{brk.gpu}",
            message=f"{brk.host}: GPU{brk.gpu} uses {brk.nics}, while most hosts use {brk.majority} for "
            f"GPU{brk.gpu}: this node breaks the rail map (a cabling, PCIe placement or NCCL_IB_HCA "
            "difference on this node)",
            evidence=(log_line(brk.evidence),) if brk.evidence else (),
        )


@rule(
    "cross-rail-connections", "info", ("fleet", "rails", "log"),
    title="Network connections join NICs of different rails",
    fix="on a rail-optimised or rail-only fabric, keep NCCL's PXN on (leave NCCL_PXN_DISABLE unset) and "
    "check that every host's GPU i uses the same rail NIC",
)
def cross_rail_connections(logs: LogAnalysis) -> Iterator[Hit]:
    from topodoc.fleet.raillog import build

    rails = build(logs)
    if rails.cross_rail:
        yield Hit(
            subject="job",
            message=f"{rails.cross_rail} network connection(s) join NICs of different rails (e.g. "
            f"{rails.cross_sample}): fine on a fat tree, a detour through the spine on a rail-optimised "
            "fabric, and unreachable on a rail-only one",
            evidence=tuple(log_line(e) for e in rails.cross_evidence),
        )


RULES = (rail_map_broken, cross_rail_connections)
