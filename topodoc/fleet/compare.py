"""Compare node fingerprints: the majority value of each property and every node that differs.

A pure function of the grouped fingerprints (``nodes.load_all``): identical nodes are one group, so
the work grows with the number of distinct nodes. A property has a majority when one value is held
by more than half of the nodes; otherwise the fleet is *split* on it and every value is listed, none
called the odd one out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

from topodoc.fleet.fingerprint import RULE_OF, Prop
from topodoc.fleet.nodes import Fingerprint, InputError, NodeRef
from topodoc.fleet.racks import RackView, rack_view
from topodoc.schema_versions import VERSIONS

SCHEMA = "topodoc.fleet"
SCHEMA_VERSION = VERSIONS[SCHEMA]  # 2: racks, rails.breaks, rail findings by rule, rail.GPU<i> properties
ABSENT = "absent"
# A difference in a property that matters, when no rule names a severity for it.
DEFAULT_SEVERITY = {
    "gpus": "error",
    "cuda": "warning",
    "driver": "warning",
    "numa": "warning",
    "nic.present": "warning",  # a missing rail NIC: NCCL reroutes its rail, or a job pinned to it fails
    "rail": "warning",
}


@dataclass(frozen=True)
class Outlier:
    value: str
    count: int
    nodes: tuple[str, ...]  # node names (inputs), sorted
    note: str = ""


@dataclass(frozen=True)
class Difference:
    """One property on which the nodes do not all agree."""

    key: str
    label: str
    family: str
    severity: str  # "info" for differences that do not matter to NCCL
    matters: bool
    rule: str | None
    majority: str | None  # None when split
    majority_count: int
    outliers: tuple[Outlier, ...]

    @property
    def split(self) -> bool:
        return self.majority is None


@dataclass(frozen=True)
class Group:
    count: int
    nodes: tuple[str, ...]
    hostnames: tuple[str, ...] = ()  # distinct recorded host names in the group


@dataclass(frozen=True)
class FleetReport:
    nodes: int
    groups: tuple[Group, ...]
    differences: tuple[Difference, ...]
    errors: tuple[InputError, ...] = ()
    racks: RackView | None = None  # NVLink-domain trays (NVL72), see topodoc.fleet.racks
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION


def compare(groups: dict[Fingerprint, list[NodeRef]], errors: list[InputError] = ()) -> FleetReport:
    total = sum(len(refs) for refs in groups.values())
    maps = [(dict(fp), sorted(ref.name for ref in refs)) for fp, refs in groups.items()]
    keys = sorted({key for props, _ in maps for key in props})
    diffs = [d for key in keys if (d := _difference(key, maps, total)) is not None]
    diffs = _implied_by_missing_nics(diffs)
    diffs.sort(key=lambda d: (_SEV_ORDER[d.severity], not d.matters, d.key))
    errors = tuple(sorted(errors, key=lambda e: e.input))
    return FleetReport(total, _groups(groups), tuple(diffs), errors, rack_view(groups))


_SEV_ORDER = {"critical": 0, "error": 1, "warning": 2, "info": 3}


def _difference(key: str, maps: list[tuple[dict[str, Prop], list[str]]], total: int) -> Difference | None:
    counts: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    sample: Prop | None = None
    notes: dict[str, str] = {}
    for props, names in maps:
        prop = props.get(key)
        value = prop.value if prop else ABSENT
        sample = sample or prop
        counts[value] += len(names)
        where.setdefault(value, []).extend(names)
        if prop and prop.note:
            notes[value] = prop.note
    if len(counts) == 1 or sample is None:
        return None
    top, top_count = counts.most_common(1)[0]
    majority = top if top_count * 2 > total else None
    matters = _matters(key, maps, majority)
    outliers = tuple(
        Outlier(value, n, tuple(sorted(where[value])), notes.get(value, ""))
        for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if value != majority
    )
    rule = key.removeprefix("finding.") if sample.family == "finding" else RULE_OF.get(sample.family)
    return Difference(
        key,
        sample.label,
        sample.family,
        _severity(sample.family, rule, matters),
        matters,
        rule,
        majority,
        top_count if majority is not None else 0,
        outliers,
    )


def _matters(key: str, maps: list[tuple[dict[str, Prop], list[str]]], majority: str | None) -> bool:
    """A difference matters when any node off the majority holds a value flagged as mattering, or lacks
    a property that matters where the others have it (a NIC gone is not harmless)."""
    held = [props[key] for props, _ in maps if key in props]
    if any(p.value != majority and p.matters for p in held):
        return True
    lacking = any(key not in props for props, _ in maps)
    return lacking and majority not in (None, ABSENT) and any(p.matters for p in held)


def _implied_by_missing_nics(diffs: list[Difference]) -> list[Difference]:
    """A NIC absent on some nodes takes its firmware, ports, NUMA node and paths with it: those
    differences say nothing more on those nodes, so only ``<nic>.present`` is kept for them."""
    gone = {
        d.key[: -len(".present")]: set(o.nodes)
        for d in diffs
        if d.family == "nic.present"
        for o in d.outliers
        if o.value == ABSENT
    }
    if not gone:
        return diffs
    out = []
    for d in diffs:
        nic = _nic_of(d.key, gone)
        if nic is None or d.family == "nic.present":
            out.append(d)
            continue
        kept = tuple(o for o in d.outliers if not (o.value == ABSENT and set(o.nodes) <= gone[nic]))
        if kept:
            out.append(replace(d, outliers=kept))
    return out


def _nic_of(key: str, gone: dict[str, set[str]]) -> str | None:
    for nic in gone:
        if key.startswith((f"{nic}.", f"{nic}:")) or key.endswith(f"-{nic}"):
            return nic
    return None


def _severity(family: str, rule: str | None, matters: bool) -> str:
    if not matters:
        return "info"
    if rule and rule in _rule_severities():
        return _rule_severities()[rule]
    return DEFAULT_SEVERITY.get(family, "warning")


@lru_cache(maxsize=1)
def _rule_severities() -> dict[str, str]:
    from topodoc.rules.registry import RULES

    return {r.id: str(getattr(r.severity, "value", r.severity)) for r in RULES}


def _groups(groups: dict[Fingerprint, list[NodeRef]]) -> tuple[Group, ...]:
    out = [
        Group(
            len(refs),
            tuple(sorted(r.name for r in refs)),
            tuple(sorted({r.hostname for r in refs if r.hostname})),
        )
        for refs in groups.values()
    ]
    out.sort(key=lambda g: (-g.count, g.nodes[:1]))
    return tuple(out)
