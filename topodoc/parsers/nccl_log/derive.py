"""Derived facts: the connection table, intra-node transports, the inter-node transport, GPUDirect RDMA,
and the environment settings that switch features off.

The connection line itself (its key and grammar) belongs to :mod:`.channel`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from topodoc.logmodel import Connection, EnvSetting, Evidence
from topodoc.parsers.nccl_log import channel
from topodoc.parsers.nccl_log.state import LogState

_FAMILIES = (
    ("GPUDirectTCPX", "TCPX"), ("FasTrak", "TCPXO"), ("TCPXO", "TCPXO"), ("gIB", "gIB"), ("IBext", "IBext"),
    ("NCCL RDMA Plugin", "IBext"),  # HPC-X's RDMA/SHARP plugin under its newer name ("P2P plugin IBext_v8")
    ("FastSocket", "FastSocket"), ("Socket", "Socket"),  # Google's Fast Socket is a TCP plugin of its own
)
_DISABLES = {
    ("NCCL_P2P_DISABLE", "1"): "P2P", ("NCCL_IB_DISABLE", "1"): "IB/RoCE verbs transport",
    ("NCCL_SHM_DISABLE", "1"): "SHM", ("NCCL_NET_GDR_LEVEL", "LOC"): "GPUDirect RDMA",
    ("NCCL_NET_GDR_LEVEL", "0"): "GPUDirect RDMA", ("NCCL_NET_GDR_READ", "0"): "GPUDirect RDMA reads",
    ("NCCL_NVLS_ENABLE", "0"): "NVLS", ("NCCL_P2P_LEVEL", "LOC"): "P2P", ("NCCL_P2P_LEVEL", "0"): "P2P",
    ("NCCL_PXN_DISABLE", "1"): "PXN", ("NCCL_CUMEM_ENABLE", "0"): "cuMem", ("NCCL_NET_PLUGIN", "none"):
    "external net plugins", ("NCCL_IBEXT_DISABLE", "1"): "IBext plugin", ("NCCL_DMABUF_ENABLE", "0"):
    "DMA-BUF", ("NCCL_IB_GDR_LEVEL", "0"): "GPUDirect RDMA", ("NCCL_COLLNET_ENABLE", "0"): "CollNet",
}


def connections(state: LogState) -> tuple[Connection, ...]:
    """Fold every counted connection key into one row per (host, rank, peer, path)."""
    rows: dict[tuple, list] = {}
    for (place, rest), (count, ev) in state.conn_raw.items():
        row = channel.row(place, rest, ev)
        if row is None:
            continue
        key = (row.host, row.rank, row.peer, row.transport, row.direction, row.nic, row.gdr, row.proxy_rank,
               row.flags)
        entry = rows.setdefault(key, [row, 0])
        entry[1] += count
    out = [replace(row, channels=n) for row, n in rows.values()]
    return tuple(sorted(out, key=lambda c: (c.host or "", c.rank, c.peer, c.transport, c.direction or "")))


def intra_node(state: LogState, conns: tuple[Connection, ...]) -> tuple[str, ...]:
    kinds = {c.transport for c in conns if c.transport.startswith(("P2P/", "SHM"))}
    if state.nvls:
        kinds.add("NVLS")
    if state.collnet or any(c.transport.startswith("COLLNET/") for c in conns):
        kinds.add("CollNet")
    if any(c.proxy_rank is not None for c in conns) or any(key[1] for key in state.ring_gdr):
        kinds.add("PXN")
    return tuple(sorted(kinds))


def decide_transport(state: LogState, conns, nnodes: int | None, nodes_ev: tuple[Evidence, ...] = ()):
    """(transport, net plugin name, libfabric provider, evidence). ``none`` needs proof of one node."""
    net = Counter(c.transport[4:] for c in conns if c.transport.startswith("NET/"))
    provider = state.ofi.get("provider")
    provider_name = provider[0] if provider else None
    if net:
        name = net.most_common(1)[0][0]
        evidence = tuple(c.evidence for c in conns if c.transport == f"NET/{name}" and c.evidence)[:4]
        evidence += _device_evidence(state, name)
        return _family(state, name, provider_name), name, provider_name, evidence
    selected = max(state.networks.items(), key=lambda kv: kv[1][0]) if state.networks else None
    plugin = selected[0] if selected else None
    if nnodes == 1:
        return "none", plugin, provider_name, nodes_ev
    if selected is None:
        return _verbs_only(state, provider_name)
    evidence = (selected[1][1],) + _device_evidence(state, plugin)
    return _family(state, plugin, provider_name), plugin, provider_name, evidence


def _verbs_only(state: LogState, provider: str | None):
    """No ``Using network`` line and no network connection: NCCL <= 2.5 never prints the former, and its
    ``NET/IB : Using [0]mlx5_0:1/IB`` line (after the bootstrap's ``NET/Socket : Using``) means the IB
    transport came up and was chosen, as it is whenever no external plugin is loaded; a NET/IB line holding
    a RoCE-only GID (a completion error) proves verbs over RoCE. Otherwise the log does not say."""
    hcas = [d.evidence for d in state.devices.values() if d.role == "hca" and d.evidence]
    if state.ofi or any(key.startswith("family:") for key in state.plugins):
        return None, None, provider, ()  # a plugin's own lines: it may have won over NET/IB
    if hcas:
        return _family(state, "IB", provider), "IB", provider, _device_evidence(state, "IB")
    if "RoCE" in state.gid_layers:
        return "RoCE", "IB", provider, (state.gid_layers["RoCE"],)
    return None, None, provider, ()


def _family(state: LogState, name: str, provider: str | None) -> str:
    if name == "IB":
        if "sharp" in state.plugins:
            return "IBext"
        layers = {d.link_layer for d in state.devices.values() if d.role == "hca"}
        if not layers and "RoCE" in state.gid_layers:
            return "RoCE"
        return "RoCE" if layers == {"RoCE"} else "IB"
    for marker, family in _FAMILIES:
        if marker in name:
            return family
    if "Libfabric" in name or name.upper() == "OFI":
        fallback = f"OFI/{provider}" if provider else name
        return {"efa": "EFA", "cxi": "Slingshot"}.get(provider or "", fallback)
    if any(key.startswith("family:FasTrak") for key in state.plugins):
        return "TCPXO"
    return name


def _device_evidence(state: LogState, name: str | None) -> tuple[Evidence, ...]:
    role = "socket" if name == "Socket" else "hca"
    found = [d.evidence for d in state.devices.values() if d.role == role and d.evidence]
    provider = state.ofi.get("provider")
    return tuple(dict.fromkeys(found))[:2] + ((provider[1],) if provider else ())


def decide_gdr(state: LogState, conns, transport: str | None):
    """(gdr, mode, evidence): mode is "used", "not_used" or "asymmetric"; None when the log cannot tell."""
    net = [c for c in conns if c.transport.startswith("NET/")]
    if any(c.gdr is not None for c in net):
        used = [c for c in net if c.gdr]
        unused = [c for c in net if c.gdr is False]
        mode = "used" if not unused else ("not_used" if not used else "asymmetric")
        evidence = tuple(c.evidence for c in (used[:2] + unused[:2]) if c.evidence)
        return mode == "used", mode, evidence
    if transport == "none":
        return None, None, ()
    if state.ring_gdr:
        on = [ev for (_h, _pxn, gdr), ev in state.ring_gdr.items() if gdr]
        off = [ev for (_h, _pxn, gdr), ev in state.ring_gdr.items() if not gdr]
        return _from_lines(on, off)
    on = [ev for (_h, enabled), ev in state.gdr_lines.items() if enabled]
    off = [ev for (_h, enabled), ev in state.gdr_lines.items() if not enabled]
    if not (on or off) and "gdr" in state.collnet:  # "CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA"
        on = [state.collnet["gdr"]]
    return _from_lines(on, off) if on or off else (None, None, ())


def _from_lines(on: list[Evidence], off: list[Evidence]):
    mode = "used" if not off else ("not_used" if not on else "asymmetric")
    return mode == "used", mode, tuple(on[:2] + off[:2])


def env_settings(state: LogState) -> tuple[EnvSetting, ...]:
    out = []
    for (name, value), ev in state.env.items():
        disables = _DISABLES.get((name, value.upper() if value.lower() != "none" else "none"))
        out.append(EnvSetting(name=name, value=value, evidence=ev, disables=disables))
    return tuple(sorted(out, key=lambda e: (e.name, e.evidence.file, e.evidence.line)))
