"""``rdma link`` / ``rdma link show`` (iproute2): one line per RDMA port, ``link mlx5_0/1 [subnet_prefix P
lid N sm_lid N lmc N] state ACTIVE physical_state LINK_UP [netdev ens1f0]``.

Parsed into the same :class:`~topodoc.parsers.rdma_text.RdmaResult` as ``ibstat`` (tool ``rdma link``):
per device its ports with state and physical state (``LINK_UP`` spelt ``LinkUp`` as ibstat does), the link
layer (InfiniBand when the line carries a LID, else Ethernet: RoCE, soft-RoCE ``rxe``), and the netdev;
``lines`` maps ``dev`` and ``dev:port`` to 1-based lines; other lines are listed in ``damaged`` as not read.
"""

from __future__ import annotations

import re

from topodoc.model import Nic, NicPort
from topodoc.parsers.rdma_text import RdmaParseError, RdmaResult

_LINK = re.compile(
    r"^(?:\d{1,4}/\d{1,4}: )?link (?P<dev>[\w.-]{1,40})/(?P<port>\d{1,3})\s+(?P<rest>.{0,400}?)\s*$"
)
_FIELD = re.compile(r"\b(subnet_prefix|lid|sm_lid|lmc|state|physical_state|netdev|netdev_index)\s+(\S+)")
_PHYS = {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled", "SLEEP": "Sleep",
         "LINK_ERROR_RECOVERY": "LinkErrorRecovery", "PHY_TEST": "PhyTest"}


def looks_like(lines: list[str]) -> bool:
    return any(_LINK.match(line.strip()) and " state " in line for line in lines)


def parse(text: str) -> RdmaResult:
    ports: dict[str, list[NicPort]] = {}
    netdevs: dict[str, list[str]] = {}
    lines: dict[str, int] = {}
    damaged: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        m = _LINK.match(line)
        if not m:
            if line and not re.match(r"^\S*[#$] |^\[[^\]]{1,80}\][#$]", line):
                damaged.append(f"line {number}: not read: {line[:80]}")
            continue
        fields = dict(_FIELD.findall(m["rest"]))
        layer = "InfiniBand" if "lid" in fields else "Ethernet"
        state = fields.get("state")
        phys = fields.get("physical_state")
        ports.setdefault(m["dev"], []).append(NicPort(
            port=int(m["port"]), state=state, phys_state=_PHYS.get(phys or "", phys), link_layer=layer,
        ))
        if "netdev" in fields:
            netdevs.setdefault(m["dev"], []).append(fields["netdev"])
        lines.setdefault(m["dev"], number)
        lines[f"{m['dev']}:{m['port']}"] = number
    if not ports:
        raise RdmaParseError("no 'link <dev>/<port> ... state ...' line of rdma link")
    nics = tuple(
        Nic(name=dev, kind=_kind(dev, p[0].link_layer), ports=tuple(p), netdevs=tuple(netdevs.get(dev, ())))
        for dev, p in ports.items()
    )
    return RdmaResult("rdma link", nics, lines, damaged=tuple(damaged))


def _kind(dev: str, layer: str | None) -> str:
    if dev.startswith("efa"):
        return "efa"
    return "ib" if layer == "InfiniBand" else "roce"
