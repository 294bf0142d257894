"""RDMA NIC rules: rails shared between GPUs, ports not ACTIVE or slower than their peers, RoCE GIDs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.model import Nic, NicPort
from topodoc.rules.engine import Evidence, Facts, Hit, Severity, rule
from topodoc.rules.machine import rail_pairs, rdma_nics


def _port_path(nic: Nic, port: NicPort, attr: str) -> str:
    return f"/sys/class/infiniband/{nic.name}/ports/{port.port}/{attr}"


def _verbs_ports(facts: Facts) -> Iterator[tuple[Nic, NicPort]]:
    for nic in rdma_nics(facts.snapshot):
        if nic.kind in ("ib", "roce"):
            for port in nic.ports:
                yield nic, port


@rule(
    id="rails-shared",
    title="Fewer RDMA NICs than GPUs: rails are shared",
    severity="info",
    tags=("rdma", "topology"),
    needs=("snapshot",),
    fix="for full per-GPU network bandwidth use one NIC (rail) per GPU; otherwise size "
    "expectations accordingly",
)
def rails_shared(facts: Facts) -> Iterator[Hit]:
    snapshot = facts.snapshot
    nics, gpus = rdma_nics(snapshot), snapshot.gpus
    if not nics or len(nics) >= len(gpus):
        return
    rates = [p.rate_gbps for nic in nics for p in nic.ports if p.rate_gbps]
    share = f" (about {sum(rates) / len(gpus):g} Gb/s per GPU)" if rates else ""
    yield Hit(
        subject=f"{len(nics)} NIC(s) / {len(gpus)} GPUs",
        message=f"{len(gpus)} GPUs share {len(nics)} RDMA NIC(s): about {len(gpus) / len(nics):g} "
        "GPUs per rail, "
        f"so inter-node bandwidth per GPU is a fraction of one NIC{share}",
        evidence=(Evidence("sysfs", "/sys/class/infiniband", " ".join(nic.name for nic in nics)),),
    )


@rule(
    id="ib-port-down",
    title="RDMA port not ACTIVE",
    severity="error",
    tags=("rdma", "ib", "hardware"),
    needs=("snapshot",),
    fix="check the cable and switch port (`ibstat`, `ibstatus`), the subnet manager for IB, and "
    "`ip link` for RoCE",
)
def ib_port_down(facts: Facts) -> Iterator[Hit]:
    rails = {pair.nic.name for pair in rail_pairs(facts.snapshot)}
    for nic, port in _verbs_ports(facts):
        if port.state and port.state.upper() != "ACTIVE":
            yield Hit(
                subject=f"{nic.name} port {port.port}",
                message=f"port state {port.state} ({port.phys_state or 'physical state unknown'}): "
                "NCCL silently "
                "drops this port from its device list, so its GPU's traffic moves to another rail "
                "or to Socket",
                evidence=(
                    Evidence("sysfs", _port_path(nic, port, "state"), port.state),
                    Evidence("sysfs", _port_path(nic, port, "phys_state"), port.phys_state or "?"),
                ),
                severity=None if nic.name in rails else Severity.WARNING,
            )


@rule(
    id="ib-rate-below-peers",
    title="RDMA port running slower than its identical peers",
    severity="warning",
    tags=("rdma", "ib", "hardware"),
    needs=("snapshot",),
    fix="check the cable/transceiver and the switch port's configured speed; `ibstat` shows the "
    "negotiated rate",
)
def ib_rate_below_peers(facts: Facts) -> Iterator[Hit]:
    groups: dict[tuple, list[tuple[Nic, NicPort]]] = {}
    for nic, port in _verbs_ports(facts):
        if port.rate_gbps and (port.state or "").upper() == "ACTIVE":
            groups.setdefault((nic.device_id, nic.hca_type, port.link_layer), []).append((nic, port))
    for members in groups.values():
        best = max(port.rate_gbps for _nic, port in members)
        for nic, port in members:
            if port.rate_gbps < best:
                yield Hit(
                    subject=f"{nic.name} port {port.port}",
                    message=f"runs at {port.rate_gbps:g} Gb/s while identical ports run at {best:g} Gb/s: "
                    "NCCL stripes rings across NICs, so the slowest rail sets the pace",
                    evidence=(
                        Evidence(
                            "sysfs", _port_path(nic, port, "rate"), port.rate_text or f"{port.rate_gbps:g}"
                        ),
                    ),
                )


@rule(
    id="roce-no-v2-gid",
    title="RoCE port without a RoCEv2 GID",
    severity="warning",
    tags=("rdma", "roce"),
    needs=("snapshot",),
    fix="give the port's netdev an IP address (RoCEv2 GIDs are derived from it); check with `show_gids`",
)
def roce_no_v2_gid(facts: Facts) -> Iterator[Hit]:
    for nic, port in _verbs_ports(facts):
        if (port.link_layer or "").lower() != "ethernet" or (port.state or "").upper() != "ACTIVE":
            continue
        if not any("v2" in (gid.type or "").lower() for gid in port.gids):
            types = sorted({gid.type or "?" for gid in port.gids}) or ["none"]
            yield Hit(
                subject=f"{nic.name} port {port.port}",
                message="active RoCE port has no RoCE v2 GID (only "
                + ", ".join(types)
                + "): NCCL cannot pick a "
                "routable GID and connections fail with ibv_modify_qp errors or fall back to RoCE v1",
                evidence=(Evidence("sysfs", _port_path(nic, port, "gid_attrs/types/*"), ", ".join(types)),),
            )


RULES = (rails_shared, ib_port_down, ib_rate_below_peers, roce_no_v2_gid)
