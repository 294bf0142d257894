"""NVLink and NVSwitch rules: links down, bridge-pair-only boxes, an incomplete NVSwitch fabric."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.bandwidth import links
from topodoc.model import Gpu, Snapshot
from topodoc.rules.common import shortlist
from topodoc.rules.engine import Evidence, Hit, rule
from topodoc.rules.machine import gpu_label, pair_names
from topodoc.topology import Topology

FABRIC_DONE = (None, "not_supported", "completed")
# NVML's nvmlNvlinkVersion_t (1_0=1, 2_0=2, 2_2=3, 3_0=4, 3_1=5, 4_0=6, 5_0=7, 6_0=8; REFERENCE.md §4) -> the
# NVLink generation, and the first SM of each generation (the inverse of links.nvlink_generation)
NVML_VERSION_GEN = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
GEN_FIRST_SM = {1: 60, 2: 70, 3: 80, 4: 90, 5: 100}


def _active(gpu: Gpu) -> int:
    return sum(1 for link in gpu.nvlinks if link.active)


@rule(
    "nvlink-link-down", "error", ("nvlink", "hardware"),
    reads=("nvlinks",),
    title="NVLink link inactive, or fewer active links than the GPU's peers",
    fix="check `nvidia-smi nvlink -s` and the Fabric Manager log; reset the GPU, then reseat or "
    "RMA the board",
)
def nvlink_link_down(snapshot: Snapshot) -> Iterator[Hit]:
    gpus = [gpu for gpu in snapshot.gpus if gpu.nvlinks]
    if not gpus:
        return
    most = max(_active(gpu) for gpu in gpus)
    for gpu in gpus:
        # Links with nothing attached read inactive too (a bridge-pair A100 has 3 of 12 in use): an
        # inactive link counts when it has a recorded far end, or when the GPU has fewer than its peers.
        wired = _inactive(gpu, wired=True)
        if wired or _active(gpu) < most:
            yield _fewer_links(gpu, most, wired or _inactive(gpu, wired=False))


def _inactive(gpu: Gpu, wired: bool) -> list[int]:
    """Inactive link numbers; with ``wired``, only those with a recorded far end."""
    return [link.link for link in gpu.nvlinks if link.active is False and (link.remote_type or not wired)]


def _fewer_links(gpu: Gpu, most: int, down: list[int]) -> Hit:
    active = _active(gpu)
    evidence = tuple(
        Evidence("nvml", f"nvmlDeviceGetNvLinkState({gpu.index}, {n})", "0 (disabled)",
                 key=f"gpu{gpu.index}:link{n}")
        for n in down[:4]
    )
    return Hit(
        subject=gpu_label(gpu),
        message=f"{active} active NVLink links where its peers have {most}"
        + (f" (link {', '.join(map(str, down))} inactive)" if down else "")
        + f": this GPU's NVLink bandwidth drops by {1 - active / most:.0%} and every collective "
        "that includes it runs at its pace",
        evidence=evidence
        or (Evidence("nvml", f"nvmlDeviceGetNvLinkState({gpu.index}, *)", f"{active} links enabled",
                     key=f"gpu{gpu.index}"),),
    )


def _components(topology: Topology) -> list[set[int]]:
    """GPU indexes joined by direct NVLink bonds (not through NVSwitch), as connected groups."""
    index = {g.name: g.index for g in topology.gpus}
    groups: list[set[int]] = [{g.index} for g in topology.gpus]
    for conn in topology.gpu_pairs:
        if conn.nvlinks and not conn.through_nvswitch:
            touching = [g for g in groups if g & {index[conn.a], index[conn.b]}]
            for g in touching:
                groups.remove(g)
            groups.append(set().union(*touching))
    return groups


def _on_switch(topology: Topology) -> set[int]:
    """GPUs with an active NVLink into an NVSwitch, as the topology derives the far ends."""
    return {g.index for g in topology.gpus if g.nvswitch_links}


@rule(
    "nvlink-bridge-pairs-only", "info", ("nvlink", "topology"),
    reads=("nvlinks",),
    title="NVLink joins GPUs only in bridged pairs",
    fix="keep tensor-parallel groups inside one bridged pair (TP=2); use pipeline or data "
    "parallelism across pairs",
)
def nvlink_bridge_pairs_only(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    if len(snapshot.gpus) <= 2 or _on_switch(topology):
        return
    groups = [g for g in _components(topology) if len(g) > 1]
    if groups and max(len(g) for g in groups) == 2:
        pairs = " ".join(f"({min(g)},{max(g)})" for g in sorted(groups, key=min))
        rates = [_bridge_rate(snapshot, min(g), max(g)) for g in sorted(groups, key=min)]
        yield Hit(
            subject=f"NVLink pairs {pairs}",
            message=f"NVLink bridges join only pairs {pairs} of {len(snapshot.gpus)} GPUs: a tensor-parallel "
            "group larger than 2 sends its all-reduces over PCIe (PIX, or SYS across sockets) at a fraction "
            f"of {_rates_text(rates)}",
            evidence=(
                Evidence("nvml", "nvmlDeviceGetNvLinkRemotePciInfo", f"peers form {len(groups)} pairs"),
                *_version_evidence(snapshot, min(groups[0])),
            ),
        )


def _bridge_rate(snapshot: Snapshot, a: int, b: int) -> links.LinkRate:
    """The bond between GPUs ``a`` and ``b``: its active links to the peer, at the GPU's NVLink generation
    (from the compute capability, else from NVML's link version)."""
    gpu = next(g for g in snapshot.gpus if g.index == a)
    peer = next(g for g in snapshot.gpus if g.index == b)
    bond = [link for link in gpu.nvlinks if link.active and link.remote_pci_address == peer.pci_address]
    sm = links.sm_number(gpu.compute_capability)
    if sm is None:
        version = next((link.version for link in bond if link.version is not None), None)
        sm = GEN_FIRST_SM.get(NVML_VERSION_GEN.get(version or 0, 0))
    return links.nvlink(sm, len(bond))


def _rates_text(rates: list[links.LinkRate]) -> str:
    """``the bridge's 75 GB/s per direction (3x NVLink3)``; a range when the pairs differ."""
    known = sorted({(r.line_gbps, r.label) for r in rates if r.line_gbps})
    if not known or len(known) < len(set(rates)):
        return "the bridges' NVLink bandwidth"
    if len(known) == 1:
        return f"the bridge's {known[0][0]:g} GB/s per direction ({known[0][1]})"
    return f"the bridges' {known[0][0]:g}-{known[-1][0]:g} GB/s per direction"


def _version_evidence(snapshot: Snapshot, index: int) -> tuple[Evidence, ...]:
    gpu = next(g for g in snapshot.gpus if g.index == index)
    link = next((link for link in gpu.nvlinks if link.active and link.version is not None), None)
    if link is None:
        return ()
    return (Evidence("nvml", f"nvmlDeviceGetNvLinkVersion({index}, {link.link})", str(link.version),
                     key=f"gpu{index}:link{link.link}"),)


@rule(
    "nvswitch-fabric-incomplete", "error", ("nvlink", "nvswitch", "hardware"),
    reads=("nvlinks", "fabric"),
    title="NVSwitch machine whose NVLink fabric is incomplete",
    fix="check `systemctl status nvidia-fabricmanager` and `nvidia-smi -q | grep -A3 Fabric`; restart Fabric "
    "Manager, reset the GPUs, or reboot the node",
)
def nvswitch_fabric_incomplete(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    on_switch = _on_switch(topology)
    if not on_switch:
        return
    for gpu in snapshot.gpus:
        hit = _off_switch(gpu) if gpu.index not in on_switch else _fabric_unregistered(gpu)
        if hit is not None:
            yield hit
    broken = [p for p in snapshot.gpu_pairs if p.p2p_nvlink not in (None, "OK")]
    if broken:
        yield Hit(
            subject=shortlist(pair_names(broken), 6),
            message=f"{len(broken)} GPU pair(s) on this NVSwitch machine report no NVLink P2P",
            evidence=(
                Evidence(
                    "nvml",
                    f"nvmlDeviceGetP2PStatus({broken[0].a}, {broken[0].b}, NVLINK)",
                    str(broken[0].p2p_nvlink),
                    key=f"pair{broken[0].a}-{broken[0].b}",
                ),
            ),
        )


def _off_switch(gpu: Gpu) -> Hit | None:
    if gpu.lost:
        return None
    return Hit(
        subject=gpu_label(gpu),
        message="this GPU has no active NVLink to the NVSwitches while its peers do: it talks to "
        "them over PCIe, and every NVLS/all-reduce including it collapses to PCIe speed",
        evidence=(
            Evidence(
                "nvml", f"nvmlDeviceGetNvLinkRemoteDeviceType({gpu.index}, *)", "no active link to a switch",
                key=f"gpu{gpu.index}",
            ),
        ),
    )


def _fabric_unregistered(gpu: Gpu) -> Hit | None:
    """Fabric registration not finished, or finished with an error (``status`` is an nvmlReturn_t, valid
    once ``state`` is completed; 0 is NVML_SUCCESS)."""
    fabric = gpu.fabric
    if fabric is None:
        return None
    call = f"nvmlDeviceGetGpuFabricInfoV({gpu.index})"
    if fabric.state not in FABRIC_DONE:
        return Hit(
            subject=gpu_label(gpu),
            message=f"GPU fabric registration is '{fabric.state}', not 'completed': NVLink P2P is not "
            "available to applications until Fabric Manager finishes",
            evidence=(Evidence("nvml", f"{call}.state", fabric.state, key=f"gpu{gpu.index}"),),
        )
    if fabric.state == "completed" and fabric.status not in (None, 0):
        return Hit(
            subject=gpu_label(gpu),
            message=f"GPU fabric registration completed with error status {fabric.status} (not "
            "NVML_SUCCESS): the GPU did not join the NVLink fabric, so NVLink P2P is not available to "
            "applications",
            evidence=(
                Evidence("nvml", f"{call}.state", fabric.state, key=f"gpu{gpu.index}"),
                Evidence("nvml", f"{call}.status", str(fabric.status), key=f"gpu{gpu.index}"),
            ),
        )
    return None


RULES = (nvlink_link_down, nvlink_bridge_pairs_only, nvswitch_fabric_incomplete)
