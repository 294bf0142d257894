"""Network devices: RDMA devices (``/sys/class/infiniband``), HPE Slingshot (``/sys/class/cxi``),
and network interfaces (``/sys/class/net``), each linked to its PCI function.

Reads, for each RDMA device ``<dev>``: ``/sys/class/infiniband`` (listing),
``/sys/class/infiniband/<dev>/device`` (realpath -> PCI function, nearest BDF component),
``.../device/driver`` (link), the PCI function's ``vendor`` and ``device`` under
``/sys/bus/pci/devices/<bdf>``, ``.../device/net`` (listing: netdevs),
``node_guid``, ``fw_ver``, ``hca_type`` (optional), ``ports`` (listing) and per port ``state``,
``phys_state``, ``rate``, ``link_layer``, ``gids`` (listing), ``gids/<i>`` and
``gid_attrs/types/<i>``, ``gid_attrs/ndevs/<i>`` for each non-zero GID, and the error counters of
:data:`COUNTERS` (``counters/<name>``, and the RoCE ``hw_counters/<name>`` of mlx5; a file the driver
does not offer is skipped without a gap) within :data:`COUNTERS_DEADLINE_S` for the whole machine.
For each interface ``<if>`` of ``/sys/class/net``: its realpath (``/sys/devices/virtual/...`` means
virtual), ``device`` (realpath -> PCI function; virtio NICs sit one level below theirs), ``address``,
``speed`` (Mb/s; unreadable or -1 while the link is down: None, no Gap), ``operstate``, ``mtu``,
``device/driver`` (link). ``/sys/class/cxi`` (listing) and ``/sys/class/cxi/<dev>/device``.

Kinds: vendor 0x1d0f with an RDMA device is EFA; InfiniBand link layer is ``ib``, Ethernet ``roce``;
PCI interfaces with no RDMA device are ``gvnic`` (Google, 0x1ae0) or ``ethernet``.
"""

from __future__ import annotations

from topodoc.model import Gap, GapReason, Gid, NetInterface, Nic, NicPort
from topodoc.probe.host import Deadline, FsError
from topodoc.probe.pci import BDF, DEVICES
from topodoc.probe.reading import Reader, dec_int, first_float, hex_int, int_or_none

IB, NET, CXI = "/sys/class/infiniband", "/sys/class/net", "/sys/class/cxi"
VENDOR_AMAZON, VENDOR_GOOGLE = 0x1D0F, 0x1AE0
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
# the port error counters watched (Documentation/ABI/stable/sysfs-class-infiniband; mlx5 hw_counters:
# NVIDIA's "Understanding mlx5 Linux Counters"): folder -> names
COUNTERS = {
    "counters": ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                 "port_xmit_discards", "excessive_buffer_overrun_errors", "local_link_integrity_errors",
                 "port_rcv_remote_physical_errors"),
    "hw_counters": ("out_of_sequence", "packet_seq_err", "rnr_nak_retry_err", "local_ack_timeout_err",
                    "implied_nak_seq_err"),
}
COUNTERS_DEADLINE_S = 5.0


def collect_net(reader: Reader) -> tuple[NetInterface, ...]:
    return tuple(_interface(reader, name) for name in reader.listdir(NET, "network interfaces"))


def _interface(reader: Reader, name: str) -> NetInterface:
    base = f"{NET}/{name}"
    real = reader.realpath(base, f"network interface {name}")
    if real is None:  # a link loop or dangling link: one gap, not one per attribute behind it
        return NetInterface(name=name)
    pci = pci_address_of(reader, f"{base}/device")
    speed = (
        reader.parsed(f"{base}/speed", f"speed of {name}", dec_int, optional=True)
        if _up(reader, base)
        else None
    )
    return NetInterface(
        name=name,
        pci_address=pci,
        driver=reader.link_name(f"{base}/device/driver") if pci else None,
        speed_mbps=speed if speed is not None and speed >= 0 else None,
        operstate=reader.text(f"{base}/operstate", f"operstate of {name}", optional=True),
        mtu=reader.parsed(f"{base}/mtu", f"mtu of {name}", dec_int, optional=True),
        mac=reader.text(f"{base}/address", f"MAC of {name}", optional=True),
        virtual=real.startswith("/sys/devices/virtual/") or pci is None,
    )


def _up(reader: Reader, base: str) -> bool:
    # speed raises EINVAL on a down or virtual link (drivers/net ethtool); read it only when up.
    return (
        reader.fs.exists(f"{base}/device") and reader.text(f"{base}/operstate", "", optional=True) != "down"
    )


def pci_address_of(reader: Reader, device_link: str) -> str | None:
    """The PCI function behind a class device's ``device`` link (nearest BDF in its real path)."""
    if not reader.fs.exists(device_link):
        return None
    parts = (reader.realpath(device_link, f"device of {device_link}") or "").split("/")
    bdfs = [p for p in parts if BDF.match(p)]
    return bdfs[-1] if bdfs else None


def collect_nics(reader: Reader, net: tuple[NetInterface, ...]) -> tuple[Nic, ...]:
    budget = _CounterBudget(reader)
    rdma = [_rdma(reader, name, budget) for name in reader.listdir(IB, "RDMA devices", optional=True)]
    budget.report()
    cxi = [_cxi(reader, name) for name in reader.listdir(CXI, "Slingshot devices", optional=True)]
    taken = {n for nic in rdma for n in nic.netdevs} | {nic.pci_address for nic in rdma + cxi}
    plain = [
        _plain(reader, iface)
        for iface in net
        if iface.pci_address and iface.name not in taken and iface.pci_address not in taken
    ]
    return tuple(rdma + cxi + plain)


def _identity(reader: Reader, base: str, name: str) -> tuple[str | None, int | None, int | None, str | None]:
    pci = pci_address_of(reader, f"{base}/device")
    if pci is None:
        return None, None, None, None
    function = f"{DEVICES}/{pci}"
    vendor = reader.parsed(f"{function}/vendor", f"vendor of {name}", hex_int, optional=True)
    device = reader.parsed(f"{function}/device", f"device id of {name}", hex_int, optional=True)
    return pci, vendor, device, reader.link_name(f"{base}/device/driver")


def _rdma(reader: Reader, name: str, budget: _CounterBudget) -> Nic:
    base = f"{IB}/{name}"
    pci, vendor, device, driver = _identity(reader, base, name)
    numbers = (int_or_none(p) for p in reader.listdir(f"{base}/ports", f"ports of {name}"))
    ports = tuple(_port(reader, name, p, budget) for p in numbers if p is not None and p >= 0)
    netdevs = tuple(reader.listdir(f"{base}/device/net", f"netdevs of {name}", optional=True)) if pci else ()
    return Nic(
        name=name,
        kind=rdma_kind(vendor, ports),
        pci_address=pci,
        vendor_id=vendor,
        device_id=device,
        driver=driver,
        netdevs=netdevs,
        ports=ports,
        fw_version=reader.text(f"{base}/fw_ver", f"firmware of {name}", optional=True),
        hca_type=reader.text(f"{base}/hca_type", f"HCA type of {name}", optional=True),
        node_guid=reader.text(f"{base}/node_guid", f"node GUID of {name}", optional=True),
    )


def rdma_kind(vendor: int | None, ports: tuple[NicPort, ...]) -> str:
    if vendor == VENDOR_AMAZON:
        return "efa"
    layers = {p.link_layer for p in ports}
    if "InfiniBand" in layers:
        return "ib"
    return "roce" if "Ethernet" in layers else "unknown"


def _port(reader: Reader, dev: str, port: int, budget: _CounterBudget) -> NicPort:
    base = f"{IB}/{dev}/ports/{port}"
    label = f"{dev} port {port}"
    rate = reader.text(f"{base}/rate", f"rate of {label}", optional=True)
    return NicPort(
        port=port,
        state=_after_colon(reader.text(f"{base}/state", f"state of {label}")),
        phys_state=_after_colon(reader.text(f"{base}/phys_state", f"phys_state of {label}", optional=True)),
        rate_gbps=_rate_gbps(rate),
        rate_text=rate,
        link_layer=reader.text(f"{base}/link_layer", f"link layer of {label}", optional=True),
        gids=_gids(reader, base),
        counters=budget.read(base, label),
    )


class _CounterBudget:
    """Reads the watched port counters within one deadline for the machine; what it had no time for,
    or could not read, is one gap per reason."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.deadline: Deadline | None = None
        self.skipped: list[str] = []
        self.failed: dict[tuple[GapReason, str], list[str]] = {}

    def read(self, base: str, label: str) -> dict[str, int]:
        self.deadline = self.deadline or Deadline.after(COUNTERS_DEADLINE_S)
        if self.deadline.remaining() <= 0:
            self.skipped.append(label)
            return {}
        out = {}
        for folder, names in COUNTERS.items():
            for name in names:
                try:
                    raw = self.reader.fs.read_text(f"{base}/{folder}/{name}")
                except FsError as err:
                    if err.reason is not GapReason.MISSING:  # absent: this driver does not count it
                        detail = ("the recording does not hold them" if err.reason is GapReason.NOT_RECORDED
                                  else err.detail)
                        self.failed.setdefault((err.reason, detail), []).append(f"{label} {name}")
                    continue
                value = int_or_none(raw.strip())
                if value is not None and value >= 0:
                    out[name] = value
        return out

    def report(self) -> None:
        if self.skipped:
            self.reader.gaps.append(Gap(
                what=f"port error counters of {len(self.skipped)} ports", reason=GapReason.ERROR, source=IB,
                detail=f"not read: the counters check's {COUNTERS_DEADLINE_S:g} s deadline had passed"))
        for (reason, detail), where in self.failed.items():
            self.reader.gaps.append(Gap(what=f"port error counters ({len(where)} values, first {where[0]})",
                                        reason=reason, source=IB, detail=detail))


def _after_colon(text: str | None) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``."""
    return text.partition(":")[2].strip() or text if text else None


def _rate_gbps(text: str | None) -> float | None:
    try:
        return first_float(text) if text else None
    except ValueError:
        return None


def _gids(reader: Reader, base: str) -> tuple[Gid, ...]:
    gids = []
    names = reader.listdir(f"{base}/gids", "GIDs", optional=True)
    for index in sorted(i for i in map(int_or_none, names) if i is not None and i >= 0):
        try:
            value = reader.fs.read_text(f"{base}/gids/{index}").strip()
        except FsError:  # unused GID slots may refuse reads; they hold nothing
            continue
        if value and value != ZERO_GID:
            gid_type = _quiet(reader, f"{base}/gid_attrs/types/{index}")
            gids.append(
                Gid(
                    index=index,
                    gid=value,
                    type=gid_type,
                    netdev=_quiet(reader, f"{base}/gid_attrs/ndevs/{index}"),
                )
            )
    return tuple(gids)


def _quiet(reader: Reader, path: str) -> str | None:
    try:
        return reader.fs.read_text(path).strip() or None
    except FsError:  # attributes of unused GID slots raise EINVAL
        return None


def _cxi(reader: Reader, name: str) -> Nic:
    pci, vendor, device, driver = _identity(reader, f"{CXI}/{name}", name)
    return Nic(
        name=name, kind="slingshot", pci_address=pci, vendor_id=vendor, device_id=device, driver=driver
    )


def _plain(reader: Reader, iface: NetInterface) -> Nic:
    pci, vendor, device, driver = _identity(reader, f"{NET}/{iface.name}", iface.name)
    kind = "gvnic" if vendor == VENDOR_GOOGLE else "ethernet"
    return Nic(
        name=iface.name,
        kind=kind,
        pci_address=pci,
        vendor_id=vendor,
        device_id=device,
        driver=driver,
        netdevs=(iface.name,),
    )
