"""The rack view of NVLink-domain trays (GB200 / GB300 NVL72, NVL36): which trays share one NVLink domain.

An NVL72 rack is one NVLink domain: every GPU of its 18 compute trays reports the same fabric cluster
UUID and clique id (NVML ``nvmlDeviceGetGpuFabricInfoV``, :class:`topodoc.model.GpuFabric`), and only
GPUs of one clique can reach each other over NVLink. Each tray's domain (``cluster_uuid/clique``) comes
from :func:`topodoc.fleet.fingerprint.nvlink_domain`. The *rack's* domain is the one held by more than
half of the trays given; a tray in another domain (or whose GPUs disagree) does not belong to it. With
no such majority (several racks given, none the larger half) the domains are listed and no tray is
called the odd one out. NVSwitch trays are not visible from a compute tray's snapshot: only the GPUs'
links into them (NVLinks active) and the fabric state are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from topodoc.fleet.fingerprint import Prop
from topodoc.fleet.nodes import Fingerprint, NodeRef


@dataclass(frozen=True)
class Tray:
    node: str
    domain: str  # "cluster_uuid/clique", or "mixed: ..." when its GPUs disagree
    gpus: str  # "4 x NVIDIA GB200"
    nvlinks: str  # "GPU0 18 of 18, ..." or "all 18 of 18"
    fabric: str  # the GPUs' fabric states, "completed"


@dataclass(frozen=True)
class Outsider:
    node: str
    domain: str
    severity: str
    message: str


@dataclass(frozen=True)
class RackView:
    rack_domain: str | None  # None: no domain holds more than half of the trays
    trays: tuple[Tray, ...]  # sorted by domain, then node
    outsiders: tuple[Outsider, ...] = ()


def rack_view(groups: dict[Fingerprint, list[NodeRef]]) -> RackView | None:
    trays = sorted(
        (_tray(ref, dict(fp)) for fp, refs in groups.items() for ref in refs if ref.domain),
        key=lambda t: (t.domain, t.node),
    )
    if not trays:
        return None
    counts = Counter(t.domain for t in trays)
    top, n = counts.most_common(1)[0]
    rack = top if n * 2 > len(trays) and not top.startswith("mixed") else None
    outsiders = tuple(
        _outsider(t, rack, n, len(trays)) for t in trays if rack is not None and t.domain != rack
    )
    return RackView(rack, tuple(trays), outsiders)


def _tray(ref: NodeRef, props: dict[str, Prop]) -> Tray:
    links = sorted((k, p.value) for k, p in props.items() if k.endswith(".nvlink"))
    values = {v for _, v in links}
    nvlinks = (
        f"all {values.pop()}" if len(values) == 1 else ", ".join(f"{k.split('.')[0]} {v}" for k, v in links)
    )
    states = sorted({p.value for k, p in props.items() if k.endswith(".fabric")})
    gpus = props["gpus"].value if "gpus" in props else "unknown"
    return Tray(ref.name, ref.domain or "", gpus, nvlinks or "unknown", ", ".join(states) or "unknown")


def _outsider(tray: Tray, rack: str, held: int, total: int) -> Outsider:
    if tray.domain.startswith("mixed"):
        why = f"its GPUs report different NVLink domains ({tray.domain[len('mixed: ') :]})"
    else:
        cluster, _, clique = tray.domain.rpartition("/")
        same = cluster == rack.rpartition("/")[0]
        where = f"clique {clique} of the same cluster" if same else f"cluster {cluster}, clique {clique}"
        why = f"it is in {where}"
    return Outsider(
        tray.node,
        tray.domain,
        "error",
        f"{tray.node} is not in the rack's NVLink domain ({rack}, {held} of {total} trays): {why}; its GPUs "
        "cannot reach the rack's GPUs over NVLink (check Fabric Manager / the NVLink partition and "
        "`nvidia-smi -q | grep -A6 Fabric` on the tray)",
    )
