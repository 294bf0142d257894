"""PCIe tree from sysfs: every PCI function, its link, its place in the tree, IOMMU group, AER, ACS.

Reads (``<bdf>`` = each entry of the listing, e.g. ``0000:1a:00.0``):

- ``/sys/bus/pci/devices`` (listing; on a live machine with libudev the enumeration comes from
  pyudev instead — replayed recordings and the recorder itself always list sysfs under the root,
  because udev cannot be re-rooted)
- ``/sys/bus/pci/devices/<bdf>`` realpath: the upstream chain (``/sys/devices/pci0000:00/<root
  port>/<switch up>/<switch down>/<bdf>``) gives ``parent`` and ``host_bridge``
- ``/sys/bus/pci/devices/<bdf>/``: ``class``, ``vendor``, ``device``, ``subsystem_vendor``,
  ``subsystem_device``, ``numa_node``, ``local_cpulist``, ``current_link_speed``,
  ``current_link_width``, ``max_link_speed``, ``max_link_width``, ``aer_dev_correctable``,
  ``aer_dev_fatal``, ``aer_dev_nonfatal`` (optional), ``driver`` and ``iommu_group`` (symlinks),
  ``config`` (bytes: the PCIe capability's port type, and ACS control from extended config space,
  which only root can read — unprivileged reads stop at 64 bytes).

Link, AER and subsystem files are optional (conventional PCI and virtual functions lack them);
unreadable or garbage files become Gaps. ``numa_node`` -1 (no firmware locality) is kept as -1.
"""

from __future__ import annotations

import re

from topodoc.model import GapReason, PciDevice, PciLink
from topodoc.probe import pcicfg
from topodoc.probe.host import FsError
from topodoc.probe.reading import Reader, dec_int, first_float, hex_int, int_or_none, parse_int

DEVICES = "/sys/bus/pci/devices"
BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")
BRIDGE_CLASS = 0x0604
AER_FILES = {"correctable": "aer_dev_correctable", "fatal": "aer_dev_fatal", "nonfatal": "aer_dev_nonfatal"}


def collect_pci(reader: Reader) -> dict[str, PciDevice]:
    names = _enumerate(reader)
    configs = {name: _config(reader, f"{DEVICES}/{name}") for name in names}
    devices = pcicfg.fill_port_types({name: _device(reader, name, configs[name]) for name in names})
    blocked = [
        a
        for a, d in devices.items()
        if (d.class_code or 0) >> 8 == BRIDGE_CLASS
        and d.acs_ctrl is None
        and len(configs[a]) < pcicfg.EXTENDED
    ]
    if blocked:
        short = any(configs[a] for a in blocked)
        reader.gap(
            f"ACS control of {len(blocked)} PCI bridges",
            GapReason.PERMISSION if short else GapReason.MISSING,
            f"{DEVICES}/*/config",
            "extended config space (offset 0x100+) is readable only by root"
            if short
            else "no config space file",
        )
    return devices


def _enumerate(reader: Reader) -> list[str]:
    names = _udev_names() if reader.fs.is_live else None
    if names is None:
        names = [n for n in reader.listdir(DEVICES, "PCI devices") if BDF.match(n)]
    return sorted(names)


def _udev_names() -> list[str] | None:
    try:
        import pyudev

        context = pyudev.Context()
        return [d.sys_name for d in context.list_devices(subsystem="pci") if BDF.match(d.sys_name)]
    except (ImportError, OSError):
        return None


def _device(reader: Reader, name: str, config: bytes) -> PciDevice:
    base = f"{DEVICES}/{name}"

    def num(attr: str, parse, optional: bool = True):
        return reader.parsed(f"{base}/{attr}", f"{attr} of {name}", parse, optional=optional)

    real = reader.realpath(base, f"PCI device {name}")
    if real is None:  # a link loop or dangling link: one gap, not one per attribute behind it
        return PciDevice(address=name)
    parent, host_bridge = upstream(real)
    return PciDevice(
        address=name,
        class_code=num("class", hex_int, False),
        vendor_id=num("vendor", hex_int, False),
        device_id=num("device", hex_int, False),
        subsystem_vendor_id=num("subsystem_vendor", hex_int),
        subsystem_device_id=num("subsystem_device", hex_int),
        driver=reader.link_name(f"{base}/driver"),
        numa_node=num("numa_node", dec_int),
        local_cpulist=reader.text(f"{base}/local_cpulist", f"local_cpulist of {name}", optional=True),
        link=PciLink(
            speed_gts=num("current_link_speed", first_float),
            width=num("current_link_width", dec_int),
            max_speed_gts=num("max_link_speed", first_float),
            max_width=num("max_link_width", dec_int),
        ),
        parent=parent,
        host_bridge=host_bridge,
        port_type=pcicfg.port_type(config),
        iommu_group=_int_or_none(reader.link_name(f"{base}/iommu_group")),
        acs_ctrl=pcicfg.acs_ctrl(config),
        aer=_aer(reader, base, name),
        sysfs_path=real,
    )


def upstream(real_path: str) -> tuple[str | None, str | None]:
    """From ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0``: (parent BDF, host bridge)."""
    parts = [p for p in real_path.split("/") if p]
    bdfs = [p for p in parts if BDF.match(p)]
    bridges = [p for p in parts if HOST_BRIDGE.match(p)]
    parent = bdfs[-2] if len(bdfs) >= 2 else None
    return parent, bridges[-1] if bridges else None


def _config(reader: Reader, base: str) -> bytes:
    try:
        return reader.fs.read_bytes(f"{base}/config")
    except FsError:  # an unreadable config space only loses the port type and ACS
        return b""


def _aer(reader: Reader, base: str, name: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for key, attr in AER_FILES.items():
        value = reader.parsed(f"{base}/{attr}", f"{attr} of {name}", aer_total, optional=True)
        if value is not None:
            totals[key] = value
    return totals


def aer_total(text: str) -> int:
    """The ``TOTAL_ERR_*`` line of an ``aer_dev_*`` file (``RxErr 0`` ... ``TOTAL_ERR_COR 2``)."""
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key.startswith("TOTAL_ERR"):
            return parse_int(value)
    raise ValueError("no TOTAL_ERR line")


def _int_or_none(text: str | None) -> int | None:
    value = int_or_none(text)
    return value if value is not None and value >= 0 else None
