"""RDMA NIC rules: rails shared between GPUs, ports not ACTIVE or slower than their peers, RoCE GIDs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc import pciaddr
from topodoc.model import Nic, NicPort, Snapshot
from topodoc.rules.engine import Evidence, Hit, Severity, rule
from topodoc.rules.machine import port_active, rdma_nics, verbs_ports
from topodoc.topology import Topology
from topodoc.topology.rails import rail_nics, rail_pairs


def _port_evidence(nic: Nic, port: NicPort, attr: str, value: str) -> Evidence:
    return Evidence("sysfs", f"/sys/class/infiniband/{nic.name}/ports/{port.port}/{attr}", value,
                    key=f"{nic.name}:{port.port}")


def _port_subject(nic: Nic, port: NicPort) -> str:
    return f"{nic.name} port {port.port}"


@rule(
    "rails-shared", "info", ("rdma", "topology"),
    reads=("gpus", "nics"),
    title="Fewer RDMA NICs than GPUs: rails are shared",
    fix="for full per-GPU network bandwidth use one NIC (rail) per GPU; otherwise size "
    "expectations accordingly",
)
def rails_shared(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    devices = {nic.device for nic in rail_nics(topology)}
    nics, gpus = [nic for nic in rdma_nics(snapshot) if nic.name in devices], snapshot.gpus
    if not nics or len(nics) >= len(gpus):
        return
    rdma = {n.name for n in rdma_nics(snapshot)}
    ends = {n.name for n in topology.nics if n.device in rdma}
    if len(nics) < len(rdma) and any(c.pci_level is None for c in topology.gpu_nic if c.b in ends):
        return  # a GPU-NIC path nobody gave (a paste cut short) may make another NIC a rail: unknown
    rates = [p.rate_gbps for nic in nics for p in nic.ports if p.rate_gbps]
    share = f" (about {sum(rates) / len(gpus):.0f} Gb/s per GPU)" if rates else ""
    yield Hit(
        subject=f"{len(nics)} NIC(s) / {len(gpus)} GPUs",
        message=f"{len(gpus)} GPUs share {len(nics)} RDMA NIC(s): {_per_rail(len(gpus), len(nics))}, so "
        f"inter-node bandwidth per GPU is a fraction of one NIC{share}",
        evidence=(
            Evidence("sysfs", "/sys/class/infiniband", " ".join(nic.name for nic in rdma_nics(snapshot)),
                     key="nics"),
            Evidence("derived", "RDMA NICs nearest to a GPU (rails)", " ".join(nic.name for nic in nics)),
        ),
    )


def _per_rail(gpus: int, nics: int) -> str:
    """``2 GPUs per rail``, or ``some rails serve 2 GPUs, others 1`` when they do not divide evenly."""
    most, rest = -(-gpus // nics), gpus // nics
    if most == rest:
        return f"{most} GPUs per rail"
    return f"some rails serve {most} GPUs, others {rest}"


@rule(
    "ib-port-down", "error", ("rdma", "ib", "hardware"),
    reads=("nic_ports",),
    title="RDMA port not ACTIVE",
    fix="check the cable and switch port (`ibstat`, `ibstatus`), the subnet manager for IB, and "
    "`ip link` for RoCE",
)
def ib_port_down(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    rails = {pair.nic.device for pair in rail_pairs(topology)}
    for nic, port in verbs_ports(snapshot):
        if not port.state or port_active(port):
            continue
        live = _active_sibling(snapshot, nic, port)
        if live is not None:
            yield _spare_port(nic, port, *live)
            continue
        yield Hit(
            subject=_port_subject(nic, port),
            message=f"port state {port.state} ({port.phys_state or 'physical state unknown'}) and no other "
            "port of this adapter is ACTIVE: NCCL silently drops the port from its device list, so its GPU's "
            "traffic moves to another rail or to Socket",
            evidence=_state_evidence(nic, port),
            severity=None if nic.name in rails else Severity.WARNING,
        )


def _state_evidence(nic: Nic, port: NicPort) -> tuple[Evidence, ...]:
    return (
        _port_evidence(nic, port, "state", port.state or "?"),
        _port_evidence(nic, port, "phys_state", port.phys_state or "?"),
    )


def _active_sibling(snapshot: Snapshot, nic: Nic, port: NicPort) -> tuple[Nic, NicPort] | None:
    """An ACTIVE port on the same adapter: another port of this RDMA device, or a port of another PCI
    function of the same PCI device (a dual-port ConnectX shows up as mlx5_8 on .0 and mlx5_9 on .1)."""
    card = _card(nic.pci_address)
    for other, other_port in verbs_ports(snapshot):
        same = other.name == nic.name and other_port.port != port.port
        sibling = other.name != nic.name and card is not None and _card(other.pci_address) == card
        if (same or sibling) and port_active(other_port):
            return other, other_port
    return None


def _card(address: str | None) -> tuple[int, int, int] | None:
    """Domain, bus and device of a PCI function: what its sibling functions share."""
    found = pciaddr.try_normalize(address)
    if found is None:
        return None
    domain, bus, device, _function = pciaddr.parse(found)
    return domain, bus, device


def _spare_port(nic: Nic, port: NicPort, live: Nic, live_port: NicPort) -> Hit:
    live_state = _port_evidence(live, live_port, "state", live_port.state or "")
    return Hit(
        subject=_port_subject(nic, port),
        message=f"port state {port.state} ({port.phys_state or 'physical state unknown'}) while "
        f"{_port_subject(live, live_port)} on the same adapter is ACTIVE: the adapter still serves its rail "
        "through the active port, but this port adds no bandwidth; a second port left uncabled or disabled "
        "may be intended (one cable per dual-port card)",
        evidence=(*_state_evidence(nic, port), live_state),
        fix="if this port should carry traffic, check its cable and switch port (`ibstat`); if it is unused "
        "by design, nothing to do",
        severity=Severity.WARNING,
    )


@rule(
    "ib-rate-below-peers", "warning", ("rdma", "ib", "hardware"),
    reads=("nic_ports",),
    title="RDMA port running slower than its identical peers",
    fix="check the cable/transceiver and the switch port's configured speed; `ibstat` shows the "
    "negotiated rate",
)
def ib_rate_below_peers(snapshot: Snapshot) -> Iterator[Hit]:
    groups: dict[tuple, list[tuple[Nic, NicPort]]] = {}
    for nic, port in verbs_ports(snapshot):
        if port.rate_gbps and port_active(port):
            groups.setdefault((nic.device_id, nic.hca_type, port.link_layer), []).append((nic, port))
    for members in groups.values():
        best = max(port.rate_gbps for _nic, port in members)
        for nic, port in members:
            if port.rate_gbps < best:
                yield Hit(
                    subject=_port_subject(nic, port),
                    message=f"runs at {port.rate_gbps:g} Gb/s while identical ports run at {best:g} Gb/s: "
                    "NCCL stripes rings across NICs, so the slowest rail sets the pace",
                    evidence=(_port_evidence(nic, port, "rate", port.rate_text or f"{port.rate_gbps:g}"),),
                )


@rule(
    "roce-no-v2-gid", "warning", ("rdma", "roce"),
    reads=("gids",),
    title="RoCE port without a RoCEv2 GID",
    fix="give the port's netdev an IP address (RoCEv2 GIDs are derived from it); check with `show_gids`",
)
def roce_no_v2_gid(snapshot: Snapshot) -> Iterator[Hit]:
    for nic, port in verbs_ports(snapshot):
        if (port.link_layer or "").lower() != "ethernet" or not port_active(port):
            continue
        if not port.gids:
            continue  # none read for this port (a paste of one device's show_gids): no claim either way
        if not any("v2" in (gid.type or "").lower() for gid in port.gids):
            types = ", ".join(sorted({gid.type or "?" for gid in port.gids}))
            yield Hit(
                subject=_port_subject(nic, port),
                message=f"active RoCE port has no RoCE v2 GID (only {types}): NCCL cannot pick a routable "
                "GID and connections fail with ibv_modify_qp errors or fall back to RoCE v1",
                evidence=(_port_evidence(nic, port, "gid_attrs/types/*", types),),
            )


RULES = (rails_shared, ib_port_down, ib_rate_below_peers, roce_no_v2_gid)
