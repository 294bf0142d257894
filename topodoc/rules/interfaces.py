"""The socket interface NCCL picked (bootstrap, NET/Socket): loopback, a container bridge or veth, a
link-local address. Such an interface is a fault only when the job crosses nodes: a peer on another
machine cannot reach 127.0.0.1, 172.17.0.1 on docker0 or fe80::...%veth. Inside one host it works (the
analyzer already files those lines as benign on a proven single-node job), so a line alone, with the node
count unknown, is a warning that says which output settles it, never an error."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.rules.common import log_line
from topodoc.rules.engine import Hit, Rule, Severity, rule

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import LogAnalysis, LogError

SIGNATURE_PREFIX = "socket-iface-"  # the catalogue's interface-choice family (signatures.toml)
RDMA_TRANSPORTS = ("IB", "RoCE", "EFA", "gIB", "IBext", "Slingshot", "TCPX", "TCPXO")
# one interface of a list: "[1]veth0a1b2c3:fe80::...%veth0a1b2c3<0>" or "interface lo:127.0.0.1<0>"
_ENTRY = re.compile(r"(?:\[(\d{1,3})\]|interface |Using )([^\s:\[\]<;]{1,64}):([^\s<]{0,80})<")
_BRIDGE = re.compile(r"(?:docker|virbr|br-|cni|veth|flannel\.|cali)", re.I)
SETTLE = (
    "1. the job's node count: `nNodes` on NCCL's `ncclCommInitRank ... Init COMPLETE` line (whole log, "
    "NCCL_DEBUG=INFO) or the launcher's host list; 2. `ip -br addr` on each node (which interface holds "
    "the routed address); "
    "3. `ip route get <peer address>` from one node to another"
)


def is_interface_choice(err: LogError) -> bool:
    """A line of the catalogue's interface-choice family (``socket-iface-*``)."""
    return (err.signature or "").startswith(SIGNATURE_PREFIX)


def _kind(name: str, address: str) -> str | None:
    if name == "lo" or address.startswith("127."):
        return "loopback"
    if address.lower().startswith(("fe80", "169.254.")):
        return "link-local"
    if _BRIDGE.match(name):
        return "container bridge / veth"
    return None


def _bad_entries(err: LogError, first_of_process: bool, own_bootstrap: bool) -> list[tuple[str, str, bool]]:
    """(interface, kind, carries bootstrap) for each unusable-across-nodes interface the line names. A
    ``Bootstrap`` line carries it; so does index [0] of a list, or the first ``NET : Using interface`` line
    of a process, on a host that printed no separate bootstrap line (releases before one took the first
    interface found)."""
    bootstrap = "Bootstrap" in err.text
    found = []
    for index, name, address in _ENTRY.findall(err.text):
        kind = _kind(name, address)
        if kind is not None:
            first = not own_bootstrap and (index == "0" or (index == "" and first_of_process))
            found.append((name, kind, bootstrap or first))
    return found


_FAILED_TO = re.compile(r"[Cc]onnect(?:ion)? to \[?(fe80:[0-9a-f:]*|169\.254\.[\d.]+|127\.[\d.]+)")


def _failed_connect(logs: LogAnalysis, kinds: set[str]) -> LogError | None:
    """A socket error line (not an interface-choice line) that failed to connect to an address of one of
    ``kinds``: proof that a peer tried the unreachable address."""
    for err in logs.errors:
        if err.category in ("socket_error", "system_error", "remote_error") and not is_interface_choice(err):
            found = _FAILED_TO.search(err.text)
            if found and _kind("", found[1]) in kinds:
                return err
    return None


def _first_lines(logs: LogAnalysis) -> set[tuple[str | None, int]]:
    """(file, line) of the first socket-interface line each host printed (old one-interface-a-line form)."""
    first: dict[str | None, tuple[str, int]] = {}
    for device in logs.devices:
        if device.role == "socket" and device.evidence is not None:
            where = (device.evidence.file, device.evidence.line)
            first[device.host] = min(first.get(device.host, where), where)
    return set(first.values())


def _nodes(logs: LogAnalysis) -> tuple[int | None, str]:
    """The node count the log proves (exact or a lower bound) and how it is said."""
    summary = logs.summary
    if summary.nnodes:
        return summary.nnodes, f"{summary.nnodes} nodes"
    if summary.nnodes_min and summary.nnodes_min > 1:
        return summary.nnodes_min, f"at least {summary.nnodes_min} nodes"
    if summary.nnodes_min:
        return 1, "one host named, the total not"
    return None, "an unknown number of nodes"


@rule(
    "nccl-socket-interface", "error", ("nccl", "network", "socket", "log"),
    title="NCCL's socket interface (lo, a bridge/veth, link-local) cannot reach other nodes",
    fix="set NCCL_SOCKET_IFNAME to the routed data interface on every node (e.g. NCCL_SOCKET_IFNAME=eth0, or "
    "=^docker,lo,veth,virbr,br-,cni); run containers with --network=host for multi-node jobs",
)
def nccl_socket_interface(logs: LogAnalysis) -> Iterator[Hit]:
    """One finding per process and line of the interface-choice family, its severity by what the log proves:
    an error when the job crosses nodes and the interface carries bootstrap or the NET/Socket traffic, an
    information when only an unused NET/Socket list names it (the transport is RDMA), a warning when the
    node count is unknown (with the outputs that settle it, ranked)."""
    nodes, said = _nodes(logs)
    transport = logs.summary.transport
    firsts = _first_lines(logs)
    booted = {d.host for d in logs.devices if d.role == "bootstrap"}
    groups: dict[tuple, list[tuple[LogError, list]]] = {}
    for err in (e for e in logs.errors if is_interface_choice(e)):
        own = err.host in booted and "Bootstrap" not in err.text
        bad = _bad_entries(err, (err.file, err.line) in firsts, own)
        key = (err.host, err.pid, tuple(bad) or err.text)
        groups.setdefault(key, []).append((err, bad))
    for items in groups.values():  # the same interface said again by one process: one finding, every line
        err, bad = items[0]
        failed = _failed_connect(logs, {kind for _n, kind, _b in bad})
        hit = _hit(err, bad, nodes, said, transport, failed)
        again = tuple(log_line(other) for other, _bad in items[1:])
        yield dataclasses.replace(hit, evidence=hit.evidence + again)


def _hit(err: LogError, bad, nodes: int | None, said: str, transport: str | None, failed) -> Hit:
    names = ", ".join(f"{name} ({kind})" for name, kind, _b in bad) or "an interface peers cannot reach"
    carries = any(b for _n, _k, b in bad)
    subject = f"{err.host}:{err.pid}" if err.host and err.pid else err.host or "log"
    role = "bootstrap" if carries else "the NET/Socket list (data connections when the network is Socket)"
    base = f"NCCL uses {names} for {role}"
    known = f" [failure catalogue: {err.signature}]"
    if failed is not None:  # a peer tried such an address and could not connect: the job needs more
        where = f"{failed.file}:{failed.line}"
        return Hit(subject, f"{base}, and a connection to such an address failed ({where}): "
                   "ranks advertise an address their peers cannot reach; the failure follows from this "
                   "interface choice" + known, (log_line(err), log_line(failed)), fix=err.fix)
    if nodes is not None and nodes > 1:  # (a proven single node: the analyzer filed the line as benign)
        if not carries and transport in RDMA_TRANSPORTS:
            return Hit(subject, f"{base}; the job spans {said} but its network is {transport}, so the "
                       "NET/Socket list is not used for data: harmless here, a trap if the job ever falls "
                       "back to sockets" + known, (log_line(err),), severity=Severity.INFO)
        return Hit(subject, f"{base}, and the job spans {said}: a peer on another machine cannot connect to "
                   "that address, so bootstrap or connection set-up hangs or is refused" + known,
                   (log_line(err),), fix=err.fix)
    return Hit(subject, f"{base}. Inside one host this works; across nodes it does not, and the log shows "
               f"{said}. Harmless on one node; a fault if the job spans several. What settles it, in order: "
               f"{SETTLE}" + known, (log_line(err),), fix=err.fix, severity=Severity.WARNING, confidence=0.5)


# private address blocks (RFC 1918, RFC 6598): hosts whose bootstrap addresses sit in different blocks are
# on different networks unless something routes between them; different subnets inside one block are common
# and routed (Kubernetes pod CIDRs per node, cloud subnets), so they are no finding
BLOCKS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                   "100.64.0.0/10"))


def _block(address: str | None) -> ipaddress.IPv4Network | None:
    try:
        ip = ipaddress.ip_address((address or "").split("%")[0])
    except ValueError:
        return None
    return next((b for b in BLOCKS if ip in b), None)


def differing_networks(logs: LogAnalysis) -> Iterator[Hit]:
    """Bootstrap addresses of different hosts in different private blocks (10/8 vs 192.168/16 ...): each
    node advertises an address on another network, so peers reach it only if a route joins them."""
    first: dict[ipaddress.IPv4Network, object] = {}
    for device in logs.devices:
        block = _block(device.address) if device.role == "bootstrap" else None
        if block is not None and device.evidence is not None:
            first.setdefault(block, device)
    if len(first) < 2 or len({d.host for d in first.values()}) < 2:
        return
    shown = ", ".join(f"{d.host} {d.name}:{d.address} ({block})" for block, d in first.items())
    yield Hit("job", f"the nodes bootstrap over addresses in different private networks ({shown}): each "
              "advertises an address the others reach only through a router; when no route joins them, "
              "bootstrap hangs or is refused. What settles it, in order: 1. `ip route get <the other node's "
              "address>` on each node (a route through the data network, not the default gateway); 2. `ip "
              "-br addr` on each node (an interface of one network on every node); 3. the same job with "
              "NCCL_SOCKET_IFNAME set to that interface", tuple(log_line(d.evidence) for d in first.values()),
              severity=Severity.WARNING, confidence=0.6)


@rule(
    "nccl-socket-networks-differ", "warning", ("nccl", "network", "socket", "log"),
    title="Nodes bootstrap over addresses in different private networks",
    fix="set NCCL_SOCKET_IFNAME on every node to the interface of the one network all nodes share",
)
def nccl_socket_networks_differ(logs: LogAnalysis) -> Iterator[Hit]:
    yield from differing_networks(logs)


RULES: tuple[Rule, ...] = (nccl_socket_interface, nccl_socket_networks_differ)
