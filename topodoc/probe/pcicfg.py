"""PCI configuration space, decoded from the bytes of sysfs ``config``: port type and ACS control.

Offsets from linux ``include/uapi/linux/pci_regs.h``: the capability list starts at the pointer in
byte 0x34 (status bit 0x10 says it exists); the PCI Express capability (id 0x10) holds the port type
in bits 4-7 of its flags word at +2. Extended capabilities start at 0x100 (id in the low 16 bits,
next pointer in the top 12); ACS is id 0x0D with its control word at +6; the Device Serial Number
capability (id 0x03) holds 8 serial bytes at +4, which :func:`zero_serial` blanks for redaction.
"""

from __future__ import annotations

import dataclasses

from topodoc.model import PciDevice

PORT_TYPES = {
    0: "endpoint",
    1: "legacy_endpoint",
    4: "root_port",
    5: "upstream",
    6: "downstream",
    7: "pcie_to_pci_bridge",
    8: "pci_to_pcie_bridge",
    9: "rc_integrated_endpoint",
    10: "rc_event_collector",
}
CAP_PCIE, ECAP_ACS, ECAP_DSN = 0x10, 0x0D, 0x03
EXTENDED = 0x100


def _u16(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 2], "little")


def _u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 4], "little")


def find_cap(data: bytes, cap_id: int) -> int | None:
    """Offset of standard capability ``cap_id``, or None (also when the bytes stop short)."""
    if len(data) < 0x40 or not _u16(data, 0x06) & 0x10:
        return None
    offset, seen = data[0x34] & 0xFC, set()
    while 0x40 <= offset < len(data) - 1 and offset not in seen:
        seen.add(offset)
        if data[offset] == cap_id:
            return offset
        offset = data[offset + 1] & 0xFC
    return None


def find_ecap(data: bytes, cap_id: int) -> int | None:
    """Offset of extended capability ``cap_id`` (needs the full 4 KiB root sees), or None."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(data) - 4 and offset not in seen:
        seen.add(offset)
        header = _u32(data, offset)
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def port_type(config: bytes) -> str | None:
    offset = find_cap(config, CAP_PCIE)
    if offset is None or offset + 4 > len(config):
        return None
    code = (_u16(config, offset + 2) >> 4) & 0xF
    return PORT_TYPES.get(code, f"type_{code}")


def acs_ctrl(config: bytes) -> int | None:
    offset = find_ecap(config, ECAP_ACS)
    if offset is None or offset + 8 > len(config):
        return None
    return _u16(config, offset + 6)


def zero_serial(config: bytes) -> bytes:
    """``config`` with the Device Serial Number capability's 8 serial bytes zeroed."""
    offset = find_ecap(config, ECAP_DSN)
    if offset is None or offset + 12 > len(config):
        return config
    return config[: offset + 4] + bytes(8) + config[offset + 12 :]


def fill_port_types(devices: dict[str, PciDevice]) -> dict[str, PciDevice]:
    """Where config space did not say, infer the port type from the tree: a bridge right under a
    host bridge is a root port, a bridge under a root or downstream port is a switch upstream port,
    a bridge under an upstream port is a downstream port, anything else an endpoint."""
    done: dict[str, PciDevice] = {}
    for address in sorted(devices, key=lambda a: len(devices[a].sysfs_path or "")):
        device = devices[address]
        if device.port_type is None:
            parent = done.get(device.parent) if device.parent else None
            inferred = _infer(device, parent)
            device = dataclasses.replace(device, port_type=inferred)
        done[address] = device
    return {address: done[address] for address in devices}


def _infer(device: PciDevice, parent: PciDevice | None) -> str | None:
    if device.class_code is None:
        return None
    if device.class_code >> 16 == 0x06 and device.class_code >> 8 != 0x0604:
        return None  # host bridge, ISA bridge, ...: not a PCIe port
    if device.class_code >> 8 != 0x0604:
        return "endpoint"
    if device.parent is None:
        return "root_port"
    if parent is None:
        return None
    if parent.port_type in ("root_port", "downstream"):
        return "upstream"
    if parent.port_type == "upstream":
        return "downstream"
    return None
