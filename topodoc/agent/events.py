"""Hardware events joined to the derived topology, kept in a bounded ring buffer with counters.

A kernel-log line (parsed by :mod:`topodoc.parsers.kernel_log`, the reader ``diagnose`` uses too) or a
udev action becomes an :class:`AgentEvent` naming the endpoints it touches: the GPU or NIC at that PCI
address, every GPU and NIC below a bridge or switch port (an AER on ``0000:17:00.0``), the GPU's NVLink
peers for an NVLink Xid (74, 144-149). The join reads the derived :class:`~topodoc.topology.Topology`
and :func:`topodoc.topology.pcitree.chain` only; it derives no path itself.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter, deque
from dataclasses import dataclass

from topodoc.parsers.kernel_log import KernelEvent, parse_line
from topodoc.parsers.xid_catalog import lookup
from topodoc.topology.vocab import SMI_LEVELS

MAX_EVENTS = 1000  # ring buffer
MAX_SERIES = 2000  # distinct counter label sets; beyond it events count under "other"


@dataclass(frozen=True)
class AgentEvent:
    time: float  # epoch seconds when the agent received it
    source: str  # "kmsg", "udev", "replay"
    kind: str  # kernel_log kinds, or "udev"
    severity: str
    device: str | None  # PCI address (or the udev sysfs name)
    code: str | None
    message: str
    action: str | None = None
    affected: tuple[str, ...] = ()  # endpoint names: GPU3, NIC0
    impact: str = ""  # the join, for people
    text: str = ""  # the raw line
    nccl: str = ""  # ranks of watched NCCL jobs on the affected GPUs, and their connections


class EventLog:
    """The last :data:`MAX_EVENTS` events and a counter per (kind, code, device); thread-safe."""

    def __init__(self, size: int = MAX_EVENTS) -> None:
        self._events: deque[AgentEvent] = deque(maxlen=size)
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, event: AgentEvent) -> None:
        key = (event.kind, event.code or "", event.device or "")
        with self._lock:
            self._events.append(event)
            if key not in self._counts and len(self._counts) >= MAX_SERIES:
                key = ("other", "other", "other")
            self._counts[key] += 1

    def recent(self) -> list[AgentEvent]:
        with self._lock:
            return list(self._events)

    def counts(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self._counts)


def from_kmsg(line: str, received: float, source: str, topology, snapshot, logs=None) -> AgentEvent | None:
    parsed = parse_line(line)
    return None if parsed is None else from_kernel(parsed, received, source, topology, snapshot, logs)


def from_kernel(parsed: KernelEvent, received: float, source: str, topology, snapshot,
                logs=None) -> AgentEvent:
    affected, impact = join(topology, snapshot, parsed.device, nvlink=_is_nvlink(parsed))
    return AgentEvent(received, source, parsed.kind, parsed.severity, parsed.device, parsed.code,
                      parsed.message, parsed.action, affected, impact, parsed.text,
                      nccl_ranks(logs, snapshot, _gpu_addresses(topology, affected)))


def from_udev(action: str, subsystem: str, device: str, received: float, source: str,
              topology, snapshot, logs=None) -> AgentEvent:
    address = device if subsystem == "pci" else _nic_address(topology, snapshot, device)
    affected, impact = join(topology, snapshot, address, nvlink=False)
    severity = "critical" if action in ("remove", "unbind") and affected else "info"
    message = f"udev {action} on {subsystem} device {device}"
    return AgentEvent(received, source, "udev", severity, address or device, action, message,
                      "drain_node" if severity == "critical" else None, affected, impact,
                      nccl=nccl_ranks(logs, snapshot, _gpu_addresses(topology, affected)))


def nccl_ranks(logs: dict | None, snapshot, addresses: set[str]) -> str:
    """The ranks of watched NCCL jobs that run on these GPUs (by the bus id NCCL printed, on this host)
    and the connections they print: "job-a.log: rank 3 (P2P/IPC x12 channels)"."""
    if not logs or not addresses:
        return ""
    host = (snapshot.host.hostname or "").split(".")[0] if snapshot is not None else ""
    parts = []
    for path, result in sorted(logs.items()):
        analysis = result.analysis
        if analysis is None:
            continue
        single_node = analysis.summary.nnodes == 1
        ranks = sorted({r.rank for r in analysis.ranks if r.bus_id in addresses
                        and (r.host.split(".")[0] == host if r.host and host else single_node)})
        if not ranks:
            continue
        channels = Counter()
        for conn in analysis.connections:
            same_host = not (conn.host and host) or conn.host.split(".")[0] == host
            if conn.rank in ranks and same_host:
                channels[conn.transport] += conn.channels
        via = ", ".join(f"{t} x{n}" for t, n in channels.most_common()) or "no connection lines"
        parts.append(f"{os.path.basename(path)}: rank {', '.join(map(str, ranks))} ({via} channels)")
    return "; ".join(parts)


def _gpu_addresses(topology, affected: tuple[str, ...]) -> set[str]:
    if topology is None:
        return set()
    return {g.pci_address for g in topology.gpus if g.name in affected and g.pci_address}


def _is_nvlink(parsed: KernelEvent) -> bool:
    if parsed.kind != "xid" or parsed.code is None:
        return False
    info = lookup(int(parsed.code))
    return bool(info and info.nvlink)


def join(topology, snapshot, device: str | None, *, nvlink: bool) -> tuple[tuple[str, ...], str]:
    """The endpoints ``device`` is, or sits above, and a sentence saying what that touches."""
    if topology is None or snapshot is None or not device:
        return (), "no topology yet" if device else ""
    names = _endpoint_names(topology)
    if device in names:
        name = names[device]
        return (name,), _impact_of(topology, name, nvlink)
    below = tuple(sorted((n for a, n in names.items() if device in _ancestors(snapshot, a)), key=_natural))
    if below:
        label = _port_label(snapshot, device)
        return below, f"{device} is {label} above {', '.join(below)}: all of them may lose or retry traffic"
    return (), f"{device} is not a GPU or NIC and nothing topodoc knows sits below it"


def _endpoint_names(topology) -> dict[str, str]:
    out = {g.pci_address: g.name for g in topology.gpus if g.pci_address}
    out.update({n.pci_address: f"{n.name} ({n.device})" for n in topology.nics if n.pci_address})
    return out


def _ancestors(snapshot, address: str) -> list[str]:
    from topodoc.topology.pcitree import chain

    return chain(snapshot.pci, address)[1:]


def _port_label(snapshot, address: str) -> str:
    from topodoc.topology.pcitree import port_kind

    labels = {"root_port": "the root port", "switch_upstream": "the switch upstream port",
              "switch_downstream": "a switch downstream port"}
    return labels.get(port_kind(snapshot.pci, address), "the bridge")


def _impact_of(topology, name: str, nvlink: bool) -> str:
    if nvlink:
        peers = [c.b if c.a == name else c.a for c in topology.gpu_pairs
                 if name in (c.a, c.b) and c.nvlinks > 0]
        if peers:
            return (f"{name} (NVLink): the NVLink pairs {name}<->{', '.join(sorted(peers, key=_natural))} "
                    f"and the collectives that use {name}'s NVLinks are affected")
        return f"{name}: no NVLink peer is known in the topology"
    if name.startswith("NIC"):
        near = [c.a for c in topology.gpu_nic if name.split()[0] == c.b and c.pci_level in SMI_LEVELS[:2]]
        if near:
            return f"{name}: the network rail of {', '.join(sorted(near, key=_natural))}"
    return f"{name} is affected"


def _nic_address(topology, snapshot, name: str) -> str | None:
    """A udev net/infiniband name (ib0, mlx5_0) -> the NIC's PCI address."""
    for nic in snapshot.nics if snapshot else ():
        if name == nic.name or name in nic.netdevs:
            return nic.pci_address
    for iface in snapshot.net if snapshot else ():
        if iface.name == name:
            return iface.pci_address
    return None


def _natural(name: str) -> tuple:
    found = re.match(r"([A-Za-z]*)(\d*)", name)
    return (found[1], int(found[2] or 0), name)
