"""A plain reading of a ConnectionMatrix: NVLink shape, socket crossings, nearest NICs, affinity.

``read(matrix)`` is a pure function of the matrix (parsed from ``nvidia-smi topo`` or derived from a
machine model), so renderers and rules can share one interpretation. A cell missing from a truncated
matrix is taken from the mirrored cell when that one exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoc.model import ConnectionMatrix
from topodoc.topology.rails import nccl_pick
from topodoc.topology.vocab import SMI_LEVELS as PCIE_ORDER  # nearest first: PIX ... SYS

_NV = re.compile(r"NV(\d+)")


@dataclass(frozen=True)
class PairLink:
    """One unordered pair (``a`` before ``b`` in matrix order) and its cell."""

    a: str
    b: str
    link: str


@dataclass(frozen=True)
class NvlinkPair:
    a: str
    b: str
    links: int  # the N of NV#


@dataclass(frozen=True)
class NearestNic:
    gpu: str
    nics: tuple[str, ...]  # every NIC at the nearest distance (ties kept)
    devices: tuple[str | None, ...]  # their device names, same order
    distance: str  # "PIX", "PXB", "PHB", "NODE", "SYS"
    nccl_nic: str | None = None  # the one of ``nics`` NCCL takes (topodoc.topology.rails.nccl_pick)


@dataclass(frozen=True)
class AffinityGroup:
    cpu_affinity: str | None
    numa_affinity: str | None
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Reading:
    """What the matrix says, in the terms people reason with.

    ``nvlink_shape``: ``"none"``; ``"all-to-all"`` (every GPU pair on NVLink, e.g. through NVSwitch);
    ``"pairs"`` (each GPU bridged to at most one other); ``"partial-mesh"`` (anything else). Pairs a
    truncated matrix lacks are left out of every field.
    """

    kind: str
    gpus: tuple[str, ...]
    nvlink_shape: str
    nvlink_pairs: tuple[NvlinkPair, ...]
    nvlink_counts: tuple[int, ...]  # distinct NV# values, ascending
    nvlink_groups: tuple[tuple[str, ...], ...]  # GPUs joined by NVLink (connected components, size >= 2)
    cross_socket_pairs: tuple[PairLink, ...]  # GPU pairs with SYS
    host_bridge_pairs: tuple[PairLink, ...]  # GPU pairs with PHB or NODE
    pcie_switch_pairs: tuple[PairLink, ...]  # GPU pairs with PIX or PXB
    nearest_nics: tuple[NearestNic, ...]
    affinity: tuple[AffinityGroup, ...]
    p2p_blocked: tuple[PairLink, ...] = ()  # p2p matrices: pairs whose status is not OK
    asymmetric: tuple[tuple[str, str], ...] = ()  # pairs whose two cells disagree


def read(matrix: ConnectionMatrix) -> Reading:
    gpus = tuple(gpu.name for gpu in matrix.gpus)
    pairs = _gpu_pairs(matrix, gpus)
    nvlink = tuple(NvlinkPair(p.a, p.b, int(m.group(1))) for p in pairs if (m := _NV.fullmatch(p.link)))
    return Reading(
        kind=matrix.kind,
        gpus=gpus,
        nvlink_shape=_shape(len(pairs), nvlink),
        nvlink_pairs=nvlink,
        nvlink_counts=tuple(sorted({pair.links for pair in nvlink})),
        nvlink_groups=_groups(gpus, nvlink),
        cross_socket_pairs=tuple(p for p in pairs if p.link == "SYS"),
        host_bridge_pairs=tuple(p for p in pairs if p.link in ("PHB", "NODE")),
        pcie_switch_pairs=tuple(p for p in pairs if p.link in PCIE_ORDER[:2]),
        nearest_nics=tuple(n for gpu in gpus if (n := _nearest_nic(matrix, gpu)) is not None),
        affinity=_affinity(matrix) if matrix.kind == "topo" else (),
        p2p_blocked=tuple(p for p in pairs if p.link != "OK") if matrix.kind == "p2p" else (),
        asymmetric=_asymmetric(matrix),
    )


def cell(matrix: ConnectionMatrix, row: str, col: str) -> str | None:
    """The cell at (row, col), or its mirror when a truncated matrix lacks it."""
    value = matrix.links.get(row, {}).get(col)
    return value if value is not None else matrix.links.get(col, {}).get(row)


def _gpu_pairs(matrix: ConnectionMatrix, gpus: tuple[str, ...]) -> list[PairLink]:
    pairs = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            link = cell(matrix, a, b)
            if link is not None:
                pairs.append(PairLink(a, b, link))
    return pairs


def _shape(known_pairs: int, nvlink: tuple[NvlinkPair, ...]) -> str:
    if not nvlink:
        return "none"
    degree: dict[str, int] = {}
    for pair in nvlink:
        degree[pair.a] = degree.get(pair.a, 0) + 1
        degree[pair.b] = degree.get(pair.b, 0) + 1
    if max(degree.values()) == 1:
        return "pairs"
    return "all-to-all" if len(nvlink) == known_pairs else "partial-mesh"


def _groups(gpus: tuple[str, ...], nvlink: tuple[NvlinkPair, ...]) -> tuple[tuple[str, ...], ...]:
    group_of = {gpu: {gpu} for gpu in gpus}
    for pair in nvlink:
        merged = group_of[pair.a] | group_of[pair.b]
        for gpu in merged:
            group_of[gpu] = merged
    order = {gpu: i for i, gpu in enumerate(gpus)}
    groups = {tuple(sorted(g, key=order.__getitem__)) for g in group_of.values() if len(g) > 1}
    return tuple(sorted(groups, key=lambda g: order[g[0]]))


def _nearest_nic(matrix: ConnectionMatrix, gpu: str) -> NearestNic | None:
    ranked = []
    for nic in matrix.nics:
        link = cell(matrix, gpu, nic.name)
        if link in PCIE_ORDER:
            ranked.append((PCIE_ORDER.index(link), nic))
    if not ranked:
        return None
    best = min(rank for rank, _nic in ranked)
    nearest = [nic for rank, nic in ranked if rank == best]
    index = gpu[3:] if gpu.startswith("GPU") else ""
    pick = nearest[nccl_pick(int(index), len(nearest))].name if index.isdigit() else None
    return NearestNic(
        gpu=gpu,
        nics=tuple(nic.name for nic in nearest),
        devices=tuple(nic.device for nic in nearest),
        distance=PCIE_ORDER[best],
        nccl_nic=pick,
    )


def _affinity(matrix: ConnectionMatrix) -> tuple[AffinityGroup, ...]:
    groups: dict[tuple[str | None, str | None], list[str]] = {}
    for gpu in matrix.gpus:
        groups.setdefault((gpu.cpu_affinity, gpu.numa_affinity), []).append(gpu.name)
    return tuple(AffinityGroup(cpu, numa, tuple(names)) for (cpu, numa), names in groups.items())


def _asymmetric(matrix: ConnectionMatrix) -> tuple[tuple[str, str], ...]:
    names = [gpu.name for gpu in matrix.gpus] + [nic.name for nic in matrix.nics]
    found = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ab, ba = matrix.links.get(a, {}).get(b), matrix.links.get(b, {}).get(a)
            if ab is not None and ba is not None and ab != ba:
                found.append((a, b))
    return tuple(found)
