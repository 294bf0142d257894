"""The line grammar: one small handler per NCCL message family, dispatched on the message's first word.

Each handler reads one :class:`~topodoc.parsers.nccl_log.prefix.Record` and adds what it proves to a
:class:`~topodoc.parsers.nccl_log.state.LogState`. Formats and their version history: REFERENCE.md §1.2
(version), §1.4-§1.9 (network selection, NET/IB, Socket, plugins, OFI, GCP), §1.11-§1.13 (NVLS, GDR, Init),
§2 (environment echo).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from topodoc import pciaddr
from topodoc.logmodel import Evidence, NetDevice
from topodoc.parsers.nccl_log import channel, errors, infer, plugins, wordings
from topodoc.parsers.nccl_log.prefix import Record
from topodoc.parsers.nccl_log.state import LogState, RankEntry

PROC_LIMIT = 8192  # (host, pid) pairs kept (a job restarted again and again); later ones are counted
RANK_LIMIT = 8192  # (process, communicator) entries kept; later ones are counted: bounded memory
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
# every repeat bounded, so a hostile line (up to scan.LINE_LIMIT) costs at most a constant per position
_IB_DEV = re.compile(
    r"\[(\d{1,6})\](?:=\{\[\d{1,6}\])? ?([\w.-]{1,64}):(?:uverbs\d{1,4}:)?(\d{1,4})(?::\d{0,9}){0,4}"
    r"/(\w{1,16})"
)
_ADDR = r"([^\s<]{1,128})<\d{1,9}>"  # an address up to its "<port>" (IPv6 holds colons)
# a GID in a verbs error line ("localGid ::ffff:10.0.1.23", "remoteGidsfe80::a00:27ff:fe00:2", 2.27's "local
# GID ::ffff:..."): RoCE when it is IPv4-mapped (RoCEv2; users often blank the octets with x) or built from a
# MAC (EUI-64 with ff:fe in its middle); an IB GID is the subnet prefix and the port GUID, neither shape
_GID = re.compile(r"(?:localGid|remoteGids?|(?:local|remote) GID) ?([0-9A-Fa-fx:.]{2,64})")
_ROCE_GID = re.compile(
    r"::ffff:[\dx]{1,3}(?:\.[\dx]{1,3}){3}$|^fe80::[0-9a-f]{1,4}:[0-9a-f]{0,2}ff:fe[0-9a-f]{2}:[0-9a-f]{1,4}$"
)
_OOB = re.compile(r"OOB ([^\s:]{1,64}):" + _ADDR)
_IFACE = re.compile(r"\[(\d{1,6})\]([^\s:]{1,64}):" + _ADDR)
_BOOTSTRAP = re.compile(r"(?:Bootstrap|NET) ?: Using (?:interface )?(?:\[\d{1,6}\])?([^\s:]{1,64}):" + _ADDR)
_KV = re.compile(
    r"\b(rank|nranks|nRanks|cudaDev|nvmlDev|busId|commId|nNodes|localRanks|localRank|comm) (\S+)"
)
_OFI_PROVIDER = re.compile(r"Selected [Pp]rovider is (\w+)(?:, fabric is (\S+))?")
_OFI_TEST_NET = re.compile(r"NCCLNet device used on (\S{1,255}) is ([\w ]{1,64}?)\.?$")
_OFI_VERSION = re.compile(r"Initializing (aws-ofi-nccl \S+)")
_RING_GDR = re.compile(r"use ring PXN (\d) GDR (\d)")
_ENV = re.compile(r"^((?:NCCL|OFI_NCCL|FI)_\w+) set (?:by environment )?to (.*?)\.?$")
_COMM = re.compile(r"\bcomm (\S+)")
_NNODES = re.compile(r"\bnNodes (\d{1,9})\b")
_NIC_DISTANCE = re.compile(r"CUDA Dev \d{1,6}\[\d{1,6}\], (\w{1,32}) NIC distance")
_STAGE = re.compile(r"- Init (START|COMPLETE)|- (Destroy|Abort) COMPLETE")
_CHAIN = re.compile(r"^\S+:\d+ -> (\d+)")
_ERROR_WORDS = {"CUDA", "NET/IB", "NET/OFI", "NET/Plugin", "P2P", "Failed", "NET/Socket", "Bootstrap"}
# INFO wordings that only the word-level fallbacks of errors.py explain (the catalogue is asked first anyway)
_INFO_ERROR_KEYS = (
    "No device found", "No eligible providers", "Affinity for GPU", "Could not enable P2P",
    "Failed to initialize NET plugin", "undefined symbol", "wrong ELF", "imed out", "Connection closed",
)


def repeat(state: LogState, who: Record, msg: str, evidence: Callable[[], Evidence]) -> bool:
    """True (and the process counted) when ``msg`` is an INFO line of a per-host fact that ``who``'s host
    already printed: :func:`handle` would count the process and stop there, so the scanner need not build
    the record and its evidence (a job restarted hundreds of times repeats every setup line)."""
    key = (who.host, msg)
    if key in state.quiet:  # read before on this host: no finding, and nothing but a count to add
        handler = _BY_WORD.get(msg.split(" ", 1)[0].rstrip(":"))
    elif key in state.seen_lines:
        handler = _BY_WORD.get(msg.split(" ", 1)[0].rstrip(":"))
        if handler not in _PER_HOST:
            return False
    else:
        return False
    if who.launcher_ip and who.launcher_ip not in state.ray_ips.get(who.host, ()):
        return False
    proc = (who.host, who.pid)
    _count(state, proc)
    if who.dev is not None and who.pid is not None:
        state.note_dev(proc, who.dev)
    phase = infer.phase_of(msg) if who.pid is not None else None
    if phase is not None and phase not in state.phase_lines.get(proc, ()):
        state.note_phase(proc, phase, evidence())
    if handler is _using:
        for lead in ("Using network ", "Using internal Network "):
            entry = state.networks.get(msg[len(lead) :].strip()) if msg.startswith(lead) else None
            if entry is not None:
                entry[0] += 1
    return True


def _count(state: LogState, proc: tuple, lines: int = 1) -> None:
    if proc in state.procs or len(state.procs) < PROC_LIMIT:
        state.procs[proc] += lines
    else:
        state.procs_dropped += lines


def connection_lines(state: LogState, who: Record, lines: int) -> None:
    """``lines`` connection lines of ``who``'s process, which the scanner counts without the grammar: the
    process and the CUDA device of its prefix are known all the same."""
    if who.pid is not None:
        proc = (who.host, who.pid)
        _count(state, proc, lines)
        if who.dev is not None:
            state.note_dev(proc, who.dev)


def handle(state: LogState, rec: Record, ev: Evidence) -> None:
    """Add what one NCCL record proves to ``state``."""
    proc = (rec.host, rec.pid)
    _count(state, proc)
    if rec.host not in state.host_lines:
        state.host_lines[rec.host] = ev
    if rec.dev is not None and rec.pid is not None:
        state.note_dev(proc, rec.dev)
    _inference_facts(state, rec, proc, ev)
    if rec.launcher_ip and rec.host:
        state.ray_ips.setdefault(rec.host, {}).setdefault(rec.launcher_ip, ev)
    if rec.level in ("WARN", "ERROR"):
        key = _error(state, rec, ev, rec.msg)
        if "Gid" in rec.msg or "GID" in rec.msg:
            _gids(state, rec.msg, ev)
        if "tcpxCommProgress" in rec.msg:  # the GPUDirect-TCPX plugin's data path: TCPX carries traffic
            _network(state, "GPUDirectTCPX", ev)
        if rec.level == "WARN":
            state.note_warn(proc, key)
        if rec.level == "ERROR":
            return
    msg = rec.msg
    word = msg.split(" ", 1)[0].rstrip(":")
    handler = _BY_WORD.get(word)
    if handler in _PER_HOST and rec.level == "INFO" and state.seen(rec.host, msg):
        return
    if handler is None and word.startswith(("NCCL_", "OFI_NCCL_", "FI_")):
        handler = _env
    elif handler is None and word.startswith("NET/"):
        handler = _net_other
    if handler is None and rec.pid is None and channel.BARE_TEXT.match(msg):
        handler = _connection  # a bare connection line: "3[3d000] -> 11[3d000] [receive] via NET/IB/1"
    if handler is not None:
        handler(state, rec, ev)
    elif " -> " in msg[:60]:
        _chain(state, rec, ev)
    noted = None
    if rec.level == "INFO" and handler not in _FACT_ONLY:
        noted = _info_finding(state, rec, ev, msg, handler is None or word in _ERROR_WORDS)
        if noted is not None and handler in _PER_HOST:
            state.host_finding(rec.host, msg, noted)
    if rec.level == "INFO" and handler in _REPEATABLE and noted is None:
        state.quiet_line(rec.host, msg)


def _inference_facts(state: LogState, rec: Record, proc: tuple, ev: Evidence) -> None:
    """What :mod:`.infer` reads: the release a message's wording fits, the phase a process reached."""
    wording = wordings.match(rec.msg, state.wording_tries, rec.host)
    if wording is not None and "plugin" not in rec.origin:  # a net plugin's own wording is not NCCL's
        state.wordings.setdefault((rec.host, wording.id), ev)
    if rec.pid is not None:
        phase = infer.phase_of(rec.msg)
        if phase is not None:
            state.note_phase(proc, phase, ev)
    elif rec.level == "ERROR":
        infer.note_watchdog(state, rec.msg, ev)


def _info_finding(state: LogState, rec: Record, ev: Evidence, msg: str, maybe_error: bool) -> tuple | None:
    """An INFO line is a finding only when the failure catalogue knows it (a failure or a benign line
    users chase), or it holds one of the few INFO wordings the built-in fallbacks explain; the finding's
    key when it was one."""
    verdict = errors.catalogued(msg, ev.text)
    if verdict is None and maybe_error and any(k in msg for k in _INFO_ERROR_KEYS):
        verdict = errors.lookup(msg, ev.text)
    if verdict is not None:
        key = _note(state, rec, ev, msg, verdict)
        if verdict.benign:
            state.note_benign((rec.host, rec.pid), key, ev)
        return key
    return None


_OTHER = errors.Verdict("other", "NCCL printed a warning; read it with the lines around it.")


def _error(state: LogState, rec: Record, ev: Evidence, msg: str) -> tuple:
    return _note(state, rec, ev, msg, errors.lookup(msg, ev.text) or _OTHER)


def _note(state: LogState, rec: Record, ev: Evidence, msg: str, verdict: errors.Verdict) -> tuple:
    if verdict.nccl_version:  # PyTorch's DistBackendError, vLLM's "using nccl==": the release in use
        _stated_version(state, rec, verdict.nccl_version, ev)
    key = re.sub(r"\d+", "N", msg)[:160] + verdict.explanation[:80]  # the explanation keeps IB statuses apart
    return state.note_error(verdict.category, rec.level, ev, verdict.explanation, (rec.host, rec.pid), key,
                            verdict.detail())


def _version(state: LogState, rec: Record, ev: Evidence) -> None:
    found = _VERSION.search(rec.msg)
    if not found:
        return
    bare = rec.pid is None
    table, key = (state.bare_versions, found[1]) if bare else (state.versions, (rec.host, found[1]))
    entry = table.get(key)
    if entry is None:
        table[key] = [1, ev]
    else:
        entry[0] += 1


def _stated_version(state: LogState, rec: Record, version: str, ev: Evidence) -> None:
    table, key = (state.bare_versions, version) if rec.pid is None else (state.versions, (rec.host, version))
    entry = table.get(key)
    if entry is None:
        table[key] = [1, ev]
    else:
        entry[0] += 1


def _cuda_driver(state: LogState, rec: Record, ev: Evidence) -> None:
    value = rec.msg.split()[-1]
    if value.isdigit():
        state.cuda_driver.setdefault(int(value), ev)


def _using(state: LogState, rec: Record, ev: Evidence) -> None:
    for lead in ("Using network ", "Using internal Network "):  # the latter: NCCL <= 2.3
        if rec.msg.startswith(lead):
            _network(state, rec.msg[len(lead) :].strip(), ev)


def _network(state: LogState, name: str, ev: Evidence) -> None:
    if name:
        entry = state.networks.setdefault(name, [0, ev])
        entry[0] += 1


def _nic_distance(state: LogState, rec: Record, ev: Evidence) -> None:
    """NCCL 2.3-2.4's ``CUDA Dev 0[3], Socket NIC distance :  SYS``: printed for the network in use
    (those releases print no ``Using network`` line), REFERENCE.md §1.4."""
    found = _NIC_DISTANCE.match(rec.msg)
    if found:
        _network(state, found[1], ev)


def _bootstrap(state: LogState, rec: Record, ev: Evidence) -> None:
    found = _BOOTSTRAP.search(rec.msg)
    if found:
        # NCCL 2.3 prints every candidate socket interface this way: one host, several addresses
        role = "socket" if rec.msg.startswith("NET : Using interface") else "bootstrap"
        _device(state, NetDevice(host=rec.host, role=role, name=found[1], address=found[2], evidence=ev))
        state.note_address(rec.host, found[2], ev)


def _net_ib(state: LogState, rec: Record, ev: Evidence) -> None:
    msg = rec.msg
    if "Using [" in msg or msg.startswith("NET/IB: ["):  # the summary line, or a per-device line
        for idx, name, port, layer in _IB_DEV.findall(msg.split("; OOB")[0]):
            sharp = f"{name}:{port}/{layer}/SHARP" in msg
            device = NetDevice(
                host=rec.host,
                role="hca",
                name=name,
                index=int(idx),
                port=int(port),
                link_layer=layer,
                evidence=ev,
            )
            _device(state, device)
            if sharp:
                state.plugins.setdefault("sharp", ev)
        oob = _OOB.search(msg)
        if oob:
            _device(state, NetDevice(host=rec.host, role="oob", name=oob[1], address=oob[2], evidence=ev))
            state.note_address(rec.host, oob[2], ev)
    elif "GPU Direct RDMA" in msg:
        _gdr_line(state, rec, ev)


def _gids(state: LogState, msg: str, ev: Evidence) -> None:
    """A GID that only RoCE uses (IPv4-mapped, or MAC-derived) proves the verbs port is RoCE."""
    for gid in _GID.findall(msg):
        if _ROCE_GID.search(gid.lower()):
            state.gid_layers.setdefault("RoCE", ev)


def _net_socket(state: LogState, rec: Record, ev: Evidence) -> None:
    if "Using" in rec.msg:
        for idx, name, addr in _IFACE.findall(rec.msg):
            _device(
                state,
                NetDevice(host=rec.host, role="socket", name=name, index=int(idx), address=addr, evidence=ev),
            )


def _net_ofi(state: LogState, rec: Record, ev: Evidence) -> None:
    _note_plugin(state, rec, ev)
    used = _OFI_TEST_NET.search(rec.msg)  # aws-ofi-nccl's test binaries name the network and the host
    if used:
        _network(state, used[2], ev)
        state.host_lines.setdefault(used[1], ev)  # "Process rank 1 started. NCCLNet device used on HOST"
    found = _OFI_PROVIDER.search(rec.msg)
    if found:
        state.ofi.setdefault("provider", (found[1], ev))
        if found[2]:
            state.ofi.setdefault("fabric", (found[2], ev))
    version = _OFI_VERSION.search(rec.msg)
    if version:
        state.ofi.setdefault("version", (version[1], ev))


def _net_other(state: LogState, rec: Record, ev: Evidence) -> None:
    family = rec.msg.split(" ", 1)[0].rstrip(":")[4:]
    state.plugins.setdefault(f"family:{family}", ev)
    _note_plugin(state, rec, ev)
    if "GPU Direct RDMA" in rec.msg:
        _gdr_line(state, rec, ev)
    elif "/RoCE" in rec.msg or "/IB" in rec.msg:  # gIB prints NET/IB-style device lists
        _net_ib(state, rec, ev)
    elif "Using" in rec.msg:
        for idx, name, addr in _IFACE.findall(rec.msg):
            _device(
                state,
                NetDevice(host=rec.host, role="plugin", name=name, index=int(idx), address=addr, evidence=ev),
            )


def _plugin(state: LogState, rec: Record, ev: Evidence) -> None:
    _note_plugin(state, rec, ev)
    if rec.msg.startswith("Assigned NET plugin"):  # 2.27+: the comm's network, like "Using network"
        words = rec.msg.split()
        if len(words) > 3:  # a line cut after "plugin" names no network
            _network(state, words[3], ev)


def _note_plugin(state: LogState, rec: Record, ev: Evidence) -> None:
    env = next((v for (name, v), _ev in state.env.items() if name == "NCCL_NET_PLUGIN"), None)
    plugins.note(state.plugin_rows, rec.msg, ev, env)


def _gdr_line(state: LogState, rec: Record, ev: Evidence) -> None:
    enabled = "RDMA Enabled" in rec.msg
    state.gdr_lines.setdefault((rec.host, enabled), ev)


def _connected(state: LogState, rec: Record, ev: Evidence) -> None:
    found = _RING_GDR.search(rec.msg)
    if found:
        state.ring_gdr.setdefault((rec.host, found[1] == "1", found[2] == "1"), ev)
    elif "NVLS" in rec.msg:
        state.nvls.setdefault("connected", ev)
    elif "CollNet" in rec.msg or "collNet" in rec.msg:
        state.collnet.setdefault("connected", ev)


def _nvls(state: LogState, rec: Record, ev: Evidence) -> None:
    if rec.msg.startswith("NVLS comm") or "Created Multicast" in rec.msg:
        state.nvls.setdefault("used", ev)


def _collnet(state: LogState, rec: Record, ev: Evidence) -> None:
    if " via " in rec.msg:
        state.collnet.setdefault("used", ev)
        if "via COLLNET/" in rec.msg and "/GDRDMA" in rec.msg:  # the CollNet (SHARP) path with GPUDirect RDMA
            state.collnet.setdefault("gdr", ev)


def _comm(state: LogState, rec: Record, ev: Evidence) -> None:
    if len(state.ranks) >= RANK_LIMIT and _full(state, rec, ev):
        return
    fields = dict(_KV.findall(rec.msg))
    if "rank" not in fields:
        return
    if "nNodes" in fields and fields["nNodes"].isdigit():
        state.nnodes.setdefault(int(fields["nNodes"]), ev)
    proc = (rec.host, rec.pid)
    entry = state.ranks.get((proc, fields.get("comm")))
    if entry is None:
        if len(state.ranks) >= RANK_LIMIT:
            state.ranks_dropped += 1
            return
        entry = state.ranks[(proc, fields.get("comm"))] = RankEntry(fields, proc, ev)
    else:
        entry.fields.update(fields)
    stage = _STAGE.search(rec.msg)
    if stage:
        entry.stages.add(stage[1] or stage[2])


def _full(state: LogState, rec: Record, ev: Evidence) -> bool:
    """The rank table is full and this line is of a (process, communicator) not in it: counted, and its
    node count kept (the one field read from every Init line)."""
    comm = _COMM.search(rec.msg)
    if comm is not None and ((rec.host, rec.pid), comm[1]) in state.ranks:
        return False
    nnodes = _NNODES.search(rec.msg)
    if nnodes is not None:
        state.nnodes.setdefault(int(nnodes[1]), ev)
    state.ranks_dropped += 1
    return True


def _env(state: LogState, rec: Record, ev: Evidence) -> None:
    found = _ENV.match(rec.msg)
    if found:
        state.env.setdefault((found[1], found[2].strip()), ev)


def _chain(state: LogState, rec: Record, ev: Evidence) -> None:
    found = _CHAIN.match(rec.msg)
    if found and not state.probe_chain((rec.host, rec.pid), ev):
        state.note_chain((rec.host, rec.pid), int(found[1]), ev)


def _connection(state: LogState, rec: Record, ev: Evidence) -> None:
    key = channel.key_of(rec.host, rec.dev, rec.msg)
    if key is not None:
        entry = state.conn_raw.get(key)
        if entry is None:
            state.new_conn(key, 1, ev)
        else:
            entry[0] += 1


def _device(state: LogState, device: NetDevice) -> None:
    key = (device.host, device.role, device.name, device.index, device.address)
    state.devices.setdefault(key, device)


def bus_id(text: str | None) -> str | None:
    return pciaddr.try_normalize(text.removeprefix("0x")) if text else None


# handlers of lines that are facts, never findings (the catalogue is not searched in them)
_FACT_ONLY = {_version, _cuda_driver, _connected, _nvls, _collnet, _comm, _connection}
# a process repeating one of these lines (which made no finding on its host) adds only a count, which
# :func:`repeat` keeps
_REPEATABLE = {_using, _connected, _nvls, _collnet, _gdr_line, _cuda_driver}
# a host repeating one of these lines tells nothing new
_PER_HOST = {_bootstrap, _net_ib, _net_socket, _net_ofi, _plugin, _cuda_driver}
_BY_WORD = {
    "NCCL": _version, "cudaDriverVersion": _cuda_driver, "CUDA": _nic_distance, "Using": _using,
    "Bootstrap": _bootstrap,
    "NET": _bootstrap, "NET/IB": _net_ib, "NET/Socket": _net_socket, "NET/OFI": _net_ofi,
    "NET/Plugin": _plugin, "Initialized": _plugin, "Assigned": _plugin, "Failed": _plugin, "P2P": _plugin,
    "TUNER/Plugin": _plugin, "PROFILER/Plugin": _plugin, "ENV/Plugin": _plugin, "Plugin": _plugin,
    "No": _plugin, "Initializing": _plugin,
    "GPU": _gdr_line,
    "Connected": _connected, "NVLS": _nvls, "CollNet": _collnet, "Channel": _connection, "Ring": _connection,
    "rank": _comm, "comm": _comm, "ncclCommInitRank": _comm, "ncclCommInitRankConfig": _comm,
    "ncclCommSplit": _comm, "ncclCommInitAll": _comm, "ncclCommInitRankScalable": _comm, "[Rank": _comm,
    "ncclCommShrink": _comm,
}
