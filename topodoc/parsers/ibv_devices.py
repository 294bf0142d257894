"""``ibv_devices`` (rdma-core): the RDMA devices this process can open, with their node GUIDs.

Schema (:class:`IbvDevices`): ``devices``, one :class:`IbvDevice` per row (name, node GUID as printed, 16
hex digits, ``zero_guid`` when all zero, 1-based ``line``); ``header_line`` (the ``device  node GUID``
header; a header with no row under it is an empty list: no device visible); ``unknown``: other lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class IbvDevicesParseError(ValueError):
    """No ibv_devices header or row."""


@dataclass(frozen=True, kw_only=True)
class IbvDevice:
    name: str
    node_guid: str
    line: int

    @property
    def zero_guid(self) -> bool:
        return int(self.node_guid, 16) == 0


@dataclass(frozen=True, kw_only=True)
class IbvDevices:
    devices: tuple[IbvDevice, ...] = ()
    header_line: int = 0
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


_HEADER = re.compile(r"^\s*device\s+node GUID\s*$")
_RULE = re.compile(r"^\s*-{4,}\s+-{8,}\s*$")
_ROW = re.compile(r"^\s*(?P<name>[A-Za-z][\w.-]{0,40})\s+(?P<guid>[0-9a-fA-F]{16})\s*$")
_PROMPT = re.compile(r"(?:^|[$#] )ibv_devices\s*$")


def looks_like(lines: list[str]) -> bool:
    return any(_HEADER.match(line) for line in lines)


def parse(text: str) -> IbvDevices:
    devices: list[IbvDevice] = []
    unknown: list[tuple[int, str]] = []
    header = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip() or _RULE.match(line) or _PROMPT.search(line):
            continue
        if _HEADER.match(line):
            header = header or number
            continue
        m = _ROW.match(line)
        if m and header:
            devices.append(IbvDevice(name=m["name"], node_guid=m["guid"].lower(), line=number))
            continue
        unknown.append((number, line))
    if not header:
        raise IbvDevicesParseError("no ibv_devices header (device  node GUID)")
    return IbvDevices(devices=tuple(devices), header_line=header, unknown=tuple(unknown))
