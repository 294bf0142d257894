"""RDMA tool outputs: ``ibstat``, ``ibstatus``, ``ibv_devinfo [-v]``, ``ibdev2netdev [-v]``, ``show_gids``.

``ibstat``/``ibstatus``/``ibv_devinfo`` give :class:`~topodoc.model.Nic` objects with their ports (state,
physical state, rate, link layer); ``ibdev2netdev`` maps devices to netdevs (and, through predictable
netdev names such as ``ibp26s0`` or ``enp27s0f0np0``, to a PCI address, marked as inferred; ``-v`` prints
the PCI address, firmware and port state itself); ``show_gids`` gives each port's GIDs, as do
``ibv_devinfo -v``'s ``GID[ N]:`` rows; an ``ibv_devinfo`` port section quoted without its ``hca_id:``
line is read as device :data:`HEADERLESS`. Unreadable lines are listed in ``damaged``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import regex

from topodoc.model import Gid, Nic, NicPort


class RdmaParseError(ValueError):
    """The text holds none of the RDMA tool outputs this module reads."""


@dataclass(frozen=True)
class RdmaResult:
    tool: str  # "ibstat", "ibstatus", "ibv_devinfo", "ibdev2netdev", "show_gids"
    nics: tuple[Nic, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)  # "mlx5_0" / "mlx5_0:1" -> line number
    netdev_links: dict[str, str] = field(default_factory=dict)  # ibdev2netdev: "mlx5_0:1" -> "Up"/"Down"
    inferred_pci: dict[str, str] = field(default_factory=dict)  # nic -> PCI address from its netdev name
    damaged: tuple[str, ...] = ()
    gids_found: tuple[int, int] | None = None  # show_gids' "n_gids_found=N": (N, line)


_STATE = {
    "active": "ACTIVE",
    "down": "DOWN",
    "initializing": "INIT",
    "init": "INIT",
    "armed": "ARMED",
    "port_active": "ACTIVE",
    "port_down": "DOWN",
    "port_init": "INIT",
    "port_armed": "ARMED",
}


def _state(text: str) -> str:
    word = regex.sub(r"^\d+:\s*", "", text.strip()).split(" (")[0].strip()
    return _STATE.get(word.lower(), word.upper())


def _kind(name: str, link_layer: str | None) -> str:
    if name.startswith("efa"):
        return "efa"
    if link_layer == "Ethernet":
        return "roce"
    if link_layer == "InfiniBand":
        return "ib"
    return "unknown"


def _rate(text: str) -> float | None:
    m = regex.match(r"\s*([\d.]+)", text)
    return float(m[1]) if m else None


# ---- ibstat ----

_CA = regex.compile(r"^CA '(?P<name>[^']+)'")
_KV = regex.compile(r"^\s+(?P<k>[A-Za-z][A-Za-z ]*?):\s*(?P<v>.*?)\s*$")
_PORT = regex.compile(r"^\s+Port (?P<n>\d+):\s*$")
_IBSTATUS = regex.compile(r"^Infiniband device '(?P<name>[^']+)' port (?P<n>\d+) status:")


def parse_ibstat(text: str) -> RdmaResult:
    if _IBSTATUS.search(text[:65536]) or regex.search(r"(?m)^Infiniband device '", text):
        return _parse_ibstatus(text)
    cas: list[dict] = []
    damaged: list[str] = []
    lines: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        ca = _CA.match(line)
        if ca:
            cas.append({"name": ca["name"], "ports": [], "kv": {}})
            lines[ca["name"]] = number
            continue
        port = _PORT.match(line)
        if port:
            if not cas:
                cas.append({"name": None, "ports": [], "kv": {}})
                damaged.append(
                    f"line {number}: Port {port['n']} without a CA 'name' line: device name unknown"
                )
            cas[-1]["ports"].append({"port": int(port["n"]), "line": number})
            continue
        kv = _KV.match(line)
        if kv and cas:
            target = cas[-1]["ports"][-1] if cas[-1]["ports"] else cas[-1]["kv"]
            target[kv["k"].strip()] = kv["v"]
        elif line.strip() and not line.startswith(("CA ", "#", "$")):
            damaged.append(f"line {number}: not read: {line.strip()[:80]}")
    if not cas:
        raise RdmaParseError("no CA '<name>' or Port lines: not ibstat output")
    nics = []
    for i, ca in enumerate(cas):
        name = ca["name"] or f"unnamed{i}"
        ports = tuple(_ibstat_port(p) for p in ca["ports"])
        for p in ca["ports"]:
            lines[f"{name}:{p['port']}"] = p["line"]
        layer = next((p.link_layer for p in ports if p.link_layer), None)
        nics.append(
            Nic(
                name=name,
                kind=_kind(name, layer),
                ports=ports,
                fw_version=ca["kv"].get("Firmware version"),
                hca_type=ca["kv"].get("CA type"),
                node_guid=ca["kv"].get("Node GUID"),
            )
        )
        if not ports:
            damaged.append(f"{name}: no Port section (cut paste?): its port states are unknown")
    return RdmaResult("ibstat", tuple(nics), lines, damaged=tuple(damaged))


def _ibstat_port(p: dict) -> NicPort:
    rate = p.get("Rate")
    return NicPort(
        port=p["port"],
        state=_state(p["State"]) if "State" in p else None,
        phys_state=p.get("Physical state"),
        rate_gbps=_rate(rate) if rate else None,
        rate_text=rate,
        link_layer=p.get("Link layer"),
    )


def _parse_ibstatus(text: str) -> RdmaResult:
    ports: dict[str, list[NicPort]] = {}
    lines: dict[str, int] = {}
    damaged: list[str] = []
    current: dict | None = None

    def flush() -> None:
        if current is not None:
            kv = current["kv"]
            rate = kv.get("rate")
            ports.setdefault(current["name"], []).append(
                NicPort(
                    port=current["port"],
                    state=_state(kv["state"]) if "state" in kv else None,
                    phys_state=regex.sub(r"^\d+:\s*", "", kv.get("phys state", "")) or None,
                    rate_gbps=_rate(rate) if rate else None,
                    rate_text=rate,
                    link_layer=kv.get("link_layer"),
                )
            )

    for number, line in enumerate(text.split("\n"), start=1):
        head = _IBSTATUS.match(line)
        if head:
            flush()
            current = {"name": head["name"], "port": int(head["n"]), "kv": {}}
            lines.setdefault(head["name"], number)
            lines[f"{head['name']}:{head['n']}"] = number
            continue
        kv = regex.match(r"^\s+(?P<k>[a-z_ ]+?):\s*(?P<v>.*?)\s*$", line)
        if kv and current is not None:
            current["kv"][kv["k"]] = kv["v"]
        elif line.strip():
            damaged.append(f"line {number}: not read: {line.strip()[:80]}")
    flush()
    nics = tuple(
        Nic(name=n, kind=_kind(n, next((p.link_layer for p in ps if p.link_layer), None)), ports=tuple(ps))
        for n, ps in ports.items()
    )
    if not nics:
        raise RdmaParseError("no \"Infiniband device '<name>' port N status:\" lines")
    return RdmaResult("ibstatus", nics, lines, damaged=tuple(damaged))


# ---- ibv_devinfo ----

_HCA = regex.compile(r"^hca_id:\s*(?P<name>\S+)")
_DEVKV = regex.compile(r"^\s+(?P<k>[A-Za-z_\[\]0-9]+):\s*(?P<v>.*?)\s*$")
# "GID[  0]:  fe80:0000:...", rdma-core 28+ adds ", RoCE v2"; "**" where a paste bolded the line in markdown
_DEVGID = regex.compile(
    r"^\s*(?:\*\*)?GID\[\s*(?P<idx>\d{1,5})\]:\s*(?P<gid>[0-9a-fA-F:.]{2,45})"
    r"(?:,\s*(?P<type>RoCE v2|RoCE v1|IB/RoCE v1))?\s*(?:\*\*)?\s*$"
)
HEADERLESS = "?"  # the name of a device whose hca_id: line is not in the paste
_WIDTH = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def parse_ibv_devinfo(text: str) -> RdmaResult:
    orphans: list[int] = []
    hcas: list[dict] = []
    lines: dict[str, int] = {}
    damaged: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        hca = _HCA.match(line)
        if hca:
            hcas.append({"name": hca["name"], "kv": {}, "ports": []})
            lines[hca["name"]] = number
            continue
        gid = _DEVGID.match(line)
        if gid:
            if hcas and hcas[-1]["ports"]:
                hcas[-1]["ports"][-1].setdefault("gids", []).append(
                    Gid(index=int(gid["idx"]), gid=gid["gid"], type=gid["type"])
                )
            else:
                orphans.append(number)
            continue
        kv = _DEVKV.match(line)
        if kv and not hcas and kv["k"] == "port":  # a port section quoted without its device's hca_id: line
            hcas.append({"name": HEADERLESS, "kv": {}, "ports": []})
            damaged.append(
                f"line {number}: a port section without its hca_id: line (the device header was cut): "
                f"the device is shown as {HEADERLESS}"
            )
        if kv and hcas:
            if kv["k"] == "port":
                hcas[-1]["ports"].append({"port": int(kv["v"]) if kv["v"].isdigit() else 0, "line": number})
            elif hcas[-1]["ports"]:
                hcas[-1]["ports"][-1][kv["k"]] = kv["v"]
            else:
                hcas[-1]["kv"][kv["k"]] = kv["v"]
        elif line.strip() and hcas and ":" not in line:
            damaged.append(f"line {number}: not read: {line.strip()[:80]}")
        elif kv and not hcas:
            orphans.append(number)
    if not hcas:
        raise RdmaParseError("no hca_id: lines: not ibv_devinfo output")
    if orphans:
        damaged.insert(
            0,
            f"lines {orphans[0]}-{orphans[-1]}: fields before the first hca_id: line (its device "
            "header was cut): not read",
        )
    nics = []
    for h in hcas:
        ports = tuple(_devinfo_port(p) for p in h["ports"])
        for p in h["ports"]:
            lines[f"{h['name']}:{p['port']}"] = p["line"]
        layer = next((p.link_layer for p in ports if p.link_layer), None)
        nics.append(
            Nic(
                name=h["name"],
                kind=_kind(h["name"], layer),
                ports=ports,
                fw_version=h["kv"].get("fw_ver"),
                hca_type=h["kv"].get("board_id"),
                node_guid=h["kv"].get("node_guid"),
                vendor_id=_int(h["kv"].get("vendor_id")),
            )
        )
        if not ports:
            damaged.append(f"{h['name']}: no port: section (cut paste?): its port states are unknown")
    return RdmaResult("ibv_devinfo", tuple(nics), lines, damaged=tuple(damaged))


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def _devinfo_port(p: dict) -> NicPort:
    width = _WIDTH.get((p.get("active_width") or "").split(" ")[0])
    speed = regex.match(r"\s*([\d.]+)\s*Gbps", p.get("active_speed") or "")
    rate = width * float(speed[1]) if width and speed else None
    phys = p.get("phys_state")
    return NicPort(
        port=p["port"],
        state=_state(p["state"]) if "state" in p else None,
        phys_state=phys.split(" (")[0] if phys else None,
        rate_gbps=rate,
        rate_text=f"{p.get('active_width')} x {p.get('active_speed')}" if rate else None,
        link_layer=p.get("link_layer"),
        gids=tuple(p.get("gids", ())),
    )


# ---- ibdev2netdev ----

_I2N = regex.compile(r"^(?P<dev>\S+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<net>\S+)\s+\((?P<st>Up|Down)\)")
_NETNAME = regex.compile(r"^(?:ib|en|eth)(?:P(?P<dom>\d+))?p(?P<bus>\d+)s(?P<slot>\d+)(?:f(?P<fn>\d+))?")


def netdev_pci(name: str) -> str | None:
    """The PCI address a predictable netdev name encodes (``enp27s0f1np1`` -> ``0000:1b:00.1``)."""
    m = _NETNAME.match(name)
    if not m or int(m["bus"]) > 255 or int(m["slot"]) > 31 or int(m["fn"] or 0) > 7:
        return None
    return f"{int(m['dom'] or 0):04x}:{int(m['bus']):02x}:{int(m['slot']):02x}.{int(m['fn'] or 0)}"


# ``ibdev2netdev -v`` (the script's echo line: "$x $d ($devid - $partid) $devdesc fw $fwver port $port
# ($ibstate) ==> $eth ($link_state)", the PCI address first and the port state padded to 6 characters)
_I2N_V = regex.compile(
    r"^(?P<pci>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<dev>\S+)\s+\((?P<devid>[^()]{0,80})\)"
    r"[^\n]{0,200}?\sfw\s+(?P<fw>\S+)\s+port\s+(?P<port>\d+)\s+\((?P<ibstate>[A-Za-z_]{1,20})\s*\)\s+==>\s+"
    r"(?P<net>\S+)\s+\((?P<st>Up|Down)\)"
)


def parse_ibdev2netdev(text: str) -> RdmaResult:
    nics: dict[str, list] = {}
    lines: dict[str, int] = {}
    links: dict[str, str] = {}
    damaged: list[str] = []
    verbose: dict[str, dict] = {}  # -v: the device's PCI address, firmware and port states
    for number, line in enumerate(text.split("\n"), start=1):
        m = _I2N.match(line.strip()) or _I2N_V.match(line.strip())
        if m and "pci" in m.groupdict():
            info = verbose.setdefault(m["dev"], {"pci": m["pci"], "fw": m["fw"], "ports": []})
            state = m["ibstate"]
            info["ports"].append(NicPort(port=int(m["port"]), state=None if state == "NA" else _state(state)))
        if m:
            nics.setdefault(m["dev"], []).append(m["net"])
            lines.setdefault(m["dev"], number)
            lines[f"{m['dev']}:{m['port']}"] = number
            links[f"{m['dev']}:{m['port']}"] = m["st"]
        elif line.strip():
            damaged.append(f"line {number}: not read: {line.strip()[:80]}")
    if not nics:
        raise RdmaParseError("no '<dev> port N ==> <netdev> (Up|Down)' lines")
    out = tuple(
        Nic(
            name=dev,
            kind=_kind(dev, None),
            netdevs=tuple(nets),
            pci_address=_full_pci(verbose[dev]["pci"]) if dev in verbose else None,
            fw_version=verbose[dev]["fw"] if dev in verbose and verbose[dev]["fw"] != "NA" else None,
            ports=tuple(verbose[dev]["ports"]) if dev in verbose else (),
        )
        for dev, nets in nics.items()
    )
    inferred = {
        dev: addr for dev, nets in nics.items() if dev not in verbose and (addr := netdev_pci(nets[0]))
    }
    return RdmaResult("ibdev2netdev", out, lines, links, inferred, tuple(damaged))


def _full_pci(address: str) -> str:
    return address.lower() if address.count(":") == 2 else f"0000:{address.lower()}"


# ---- show_gids ----

_GID = regex.compile(
    r"^(?P<dev>\S+)\s+(?P<port>\d+)\s+(?P<idx>\d+)\s+(?P<gid>[0-9a-fA-F:]{15,39})\s+"
    r"(?:(?P<ip>\d{1,3}(?:\.\d{1,3}){3})\s+)?(?P<ver>v[12])\s*(?P<net>\S+)?\s*$"
)


_PROMPT = regex.compile(r"[$#>]\s{0,8}(?:sudo\s{1,8})?show_gids\b")


def parse_show_gids(text: str) -> RdmaResult:
    total: tuple[int, int] | None = None
    gids: dict[tuple[str, int], list[Gid]] = {}
    lines: dict[str, int] = {}
    damaged: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        m = _GID.match(line.strip())
        if m:
            kind = "RoCE v2" if m["ver"] == "v2" else "IB/RoCE v1"
            gids.setdefault((m["dev"], int(m["port"])), []).append(
                Gid(index=int(m["idx"]), gid=m["gid"], type=kind, netdev=m["net"])
            )
            lines.setdefault(f"{m['dev']}:{m['port']}", number)
        elif found := regex.match(r"^n_gids_found=(\d{1,6})\s*$", line.strip()):
            total = (int(found[1]), number)
        elif line.strip() and not regex.match(r"^(?:DEV\s|---)", line.strip()) and not _PROMPT.search(line):
            damaged.append(f"line {number}: not read: {line.strip()[:80]}")
    if not gids and not regex.search(r"(?m)^DEV\s+PORT\s+INDEX", text):
        raise RdmaParseError("no show_gids rows (DEV PORT INDEX GID IPv4 VER DEV)")
    by_dev: dict[str, list[NicPort]] = {}
    for (dev, port), items in gids.items():
        by_dev.setdefault(dev, []).append(NicPort(port=port, link_layer="Ethernet", gids=tuple(items)))
    nics = tuple(
        Nic(
            name=dev,
            kind="roce",
            ports=tuple(ports),
            netdevs=tuple(dict.fromkeys(g.netdev for p in ports for g in p.gids if g.netdev)),
        )
        for dev, ports in by_dev.items()
    )
    return RdmaResult("show_gids", nics, lines, damaged=tuple(damaged), gids_found=total)


def merge_nic(old: Nic, new: Nic) -> Nic:
    """``new``'s known fields over ``old``; ports merged by number, known fields of each kept."""
    ports = {p.port: p for p in old.ports}
    for p in new.ports:
        ports[p.port] = _merge_port(ports[p.port], p) if p.port in ports else p
    kind = new.kind if new.kind != "unknown" else old.kind
    fields = {
        k: getattr(new, k)
        for k in ("pci_address", "vendor_id", "device_id", "driver", "fw_version", "hca_type", "node_guid")
        if getattr(new, k) is not None
    }
    netdevs = tuple(dict.fromkeys(old.netdevs + new.netdevs))
    return replace(old, kind=kind, ports=tuple(ports[n] for n in sorted(ports)), netdevs=netdevs, **fields)


def _merge_port(old: NicPort, new: NicPort) -> NicPort:
    fields = {
        k: getattr(new, k)
        for k in ("state", "phys_state", "rate_gbps", "rate_text", "link_layer")
        if getattr(new, k) is not None
    }
    return replace(old, gids=new.gids or old.gids, **fields)
