"""PCI addresses in every spelling, normalised in one place.

NVML prints ``00000000:1A:00.0`` (8-digit domain, upper case) and ``0000:1A:00.0`` (legacy),
sysfs ``0000:1a:00.0``, NCCL's XML ``0000:1a:00.0`` and its INFO lines a packed hex int such as
``1a000`` (bus << 12 | device << 4 | function, domain in the high bits). The canonical form used as a
key everywhere in topodoc is the sysfs one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_FULL = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)
_PACKED = re.compile(r"^(?:0x)?[0-9a-fA-F]{1,12}$")


class PciAddressError(ValueError):
    """Text that is not a PCI address in any spelling topodoc knows."""


class PciAddress(NamedTuple):
    domain: int
    bus: int
    device: int
    function: int

    def __str__(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"

    @property
    def nvml(self) -> str:
        return f"{self.domain:08X}:{self.bus:02X}:{self.device:02X}.{self.function:X}"

    @property
    def packed(self) -> str:
        value = (self.domain << 20) | (self.bus << 12) | (self.device << 4) | self.function
        return f"{value:x}"


def parse(text: str) -> PciAddress:
    """Parse any known spelling (sysfs, NVML, legacy NVML, ``1a:00.0``, NCCL packed hex)."""
    raw = text.strip()
    match = _FULL.match(raw)
    if match:
        domain = int(match["domain"], 16) if match["domain"] else 0
        bus, dev, fn = int(match["bus"], 16), int(match["dev"], 16), int(match["fn"])
        if dev > 0x1F:
            raise PciAddressError(f"device number out of range in {text!r}")
        return PciAddress(domain, bus, dev, fn)
    if _PACKED.match(raw):
        value = int(raw, 16)
        return PciAddress(value >> 20, (value >> 12) & 0xFF, (value >> 4) & 0x1F, value & 0x7)
    raise PciAddressError(f"not a PCI address: {text!r}")


def normalize(text: str) -> str:
    """Any spelling -> canonical ``0000:1a:00.0``."""
    return str(parse(text))


def try_normalize(text: str | None) -> str | None:
    """Like :func:`normalize` but ``None`` for ``None`` or unparseable text."""
    if not text:
        return None
    try:
        return normalize(text)
    except PciAddressError:
        return None


def is_address(text: str) -> bool:
    """True for the colon-and-dot spellings (not the packed form, which any hex word matches)."""
    return bool(_FULL.match(text.strip()))
