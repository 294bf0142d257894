"""The explicit list of rules ``topodoc diagnose`` runs, in report order of concept.

A new rule module appends its ``RULES`` tuple here; nothing is discovered by scanning.
"""

from __future__ import annotations

from topodoc.rules import (
    acs,
    bandwidth,
    fabric,
    fleetrails,
    gpudirect,
    health,
    hostlimits,
    interfaces,
    joined,
    kernel,
    loginfer,
    matrix,
    nccl,
    ncclenv,
    nics,
    numa,
    nvlink,
    p2p,
    p2ptest,
    pcie,
    rdmadevices,
    smitable,
    traceback,
    versions,
)
from topodoc.rules.engine import Rule

RULES: tuple[Rule, ...] = (
    *pcie.RULES,
    *nvlink.RULES,
    *gpudirect.RULES,
    *numa.RULES,
    *nics.RULES,
    *nccl.RULES,
    *interfaces.RULES,
    *versions.RULES,
    *p2p.RULES,
    *loginfer.RULES,
    *joined.RULES,
    *fleetrails.RULES,
    *bandwidth.RULES,
    *matrix.RULES,
    *kernel.RULES,
    *p2ptest.RULES,
    *smitable.RULES,
    *traceback.RULES,
    *ncclenv.RULES,
    *fabric.RULES,
    *acs.RULES,
    *hostlimits.RULES,
    *rdmadevices.RULES,
    *health.RULES,
)


class UnknownRule(LookupError):
    pass


def get(rule_id: str) -> Rule:
    for item in RULES:
        if item.id == rule_id:
            return item
    import difflib  # only for an unknown id: not on every command that loads the rules

    close = difflib.get_close_matches(rule_id, [r.id for r in RULES], n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close[:3])}?" if close else "; `topodoc rules` lists them"
    raise UnknownRule(f"no rule named {rule_id!r}{hint}")
