"""Rules on ``ibv_devices`` pasted to ``diagnose FILE...``: RDMA devices whose node GUID was never set (an
SR-IOV virtual function), and an empty device list.

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kind ``ibv-devices``
(:mod:`topodoc.parsers.ibv_devices`), by attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, rule


@rule(
    "rdma-device-without-guid", "warning", ("rdma", "sriov", "nic"),
    title="RDMA devices with an all-zero node GUID (SR-IOV functions never given one), or none at all",
    fix="give each virtual function a node and port GUID (the SR-IOV network operator does; by hand: "
    "`ip link set <pf> vf N node_guid ... port_guid ...` then rebind the VF); for an empty list, expose "
    "/dev/infiniband and the RDMA devices to the container",
)
def rdma_device_without_guid(texts) -> Iterator[Hit]:
    for path, parsed in texts_of(texts, "ibv-devices"):
        zero = [d for d in parsed.devices if d.zero_guid]
        if zero:
            names = ", ".join(d.name for d in zero)
            yield Hit(
                subject=names,
                message=f"{names}: node GUID 0000000000000000. A virtual function whose GUID was never "
                "set cannot register memory or connect (perftest: 'Couldn't allocate MR'; NCCL: ibv_* "
                "calls fail, or the device is skipped), so a job placed on it falls back or fails",
                evidence=tuple(Evidence("ibv_devices", f"{path}:{d.line}", f"{d.name} {d.node_guid}")
                               for d in zero[:3]),
            )
        elif not parsed.devices:
            yield Hit(
                subject="RDMA devices",
                message="ibv_devices lists no device: this process sees no RDMA device (a container "
                "without /dev/infiniband, the driver or the rdma_rxe/mlx5_ib module not loaded), so NCCL "
                "can only use TCP sockets",
                evidence=(Evidence("ibv_devices", f"{path}:{parsed.header_line}", "empty device list"),),
                fix="expose /dev/infiniband (and the RDMA device plugin's resources) to the container, or "
                "load the RDMA driver; `rdma link` and `ibv_devinfo` on the host tell which",
            )


RULES: tuple[Rule, ...] = (rdma_device_without_guid,)
