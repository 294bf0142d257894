"""Freeze a :class:`LogState` into a :class:`LogAnalysis`: connections, ranks, hosts, and the verdict.

The judgement calls, each backed by lines: the transport comes from the network connections NCCL made
(``via NET/<name>``), refined by the devices (IB vs RoCE link layer, the libfabric provider); with no
connection lines, from ``Using network`` unless the job is single-node, where the answer is ``none``.
Nodes are counted from every source (host names, distinct bootstrap addresses per name, ``nNodes``,
nranks / localRanks), so two machines both called ``ubuntu`` count as two. When the log shows only some
ranks of a bigger communicator the total stays unknown (``nnodes`` None) and ``nnodes_min`` is the lower
bound it proves: the machines seen, at least 2 when ranks connect over the network. A return-code chain
(``file.cc:123 -> 2``) goes with the WARN of its process as ``LogError.related``; only a process that
printed no WARN has its chain judged alone.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import replace

from topodoc.logmodel import (
    Communicator,
    EnvSetting,
    Evidence,
    HostSummary,
    InputStats,
    LogAnalysis,
    LogError,
    LogSummary,
    RankInfo,
)
from topodoc.parsers.nccl_log import errors, infer
from topodoc.parsers.nccl_log import plugins as plugin_lines
from topodoc.parsers.nccl_log.derive import (
    connections,
    decide_gdr,
    decide_transport,
    env_settings,
    intra_node,
)
from topodoc.parsers.nccl_log.facts import bus_id
from topodoc.parsers.nccl_log.state import LogState

RANK_ROWS = 4096  # rank table rows written (whole communicators, the biggest first); the rest are counted
PIDS_LISTED = 64  # pids listed per host; a note says how many there were


def build(state: LogState, stats: tuple[InputStats, ...]) -> LogAnalysis:
    conns = connections(state)
    ranks = _ranks(state)
    index = _HostIndex(state, conns, ranks)
    hosts = _hosts(state, index, ranks)
    nnodes, nodes_ev = _nnodes(state, hosts, ranks, conns, index)
    env = env_settings(state)
    single = infer.single_process(state, conns, ranks)
    if single is not None and nnodes in (None, 1):
        nnodes, nodes_ev = 1, single.evidence
    inside = infer.same_process_net(conns)  # network rows between two GPUs of one process: NIC loopback
    nodes_min, min_ev = (
        (nnodes, ()) if nnodes is not None else _nnodes_min(state, hosts, conns, env, index, inside)
    )
    transport, plugin, provider, t_ev = decide_transport(state, conns, nnodes, nodes_ev)
    transport, t_ev, loop = _one_node_transport(state, conns, env, nnodes, nodes_ev, transport, t_ev, inside)
    gdr, gdr_mode, gdr_ev = decide_gdr(state, conns, transport)
    version, versions, v_ev = _versions(state)
    conn_nets = {c.transport[4:] for c in conns if c.transport.startswith("NET/")}
    chosen = plugin_lines.chosen_networks(conn_nets, set(state.networks))
    plugins = plugin_lines.freeze(state.plugin_rows, chosen)
    found = _unless_fallback(_errors(state, versions, env, plugins, chosen), transport, nnodes or nodes_min)
    found = _one_node_needs_no_net(found, nnodes, conns)
    host_versions, wording_mismatch, version_notes = infer.versions(state)
    if wording_mismatch is not None and len(versions) <= 1:
        found = tuple(sorted(found + (wording_mismatch,), key=lambda e: (e.file, e.line)))
    errs = tuple(e for e in found if not e.benign)
    first, marks = infer.first_failure(errs, state, ranks)
    errs = infer.label(errs, marks)
    phases, stuck = infer.hang(state, errs, ranks, conns, transport)
    inferences = tuple(i for i in (single, loop, first, stuck) if i is not None) + version_notes
    benign = tuple(e for e in found if e.benign)
    hcas = sorted({f"{d.name}:{d.port}/{d.link_layer}" for d in state.devices.values() if d.role == "hca"})
    driver = max(state.cuda_driver, default=None)
    evidence = {"transport": t_ev, "gdr": gdr_ev, "nccl_version": v_ev, "nnodes": nodes_ev,
                "nnodes_min": min_ev}
    evidence.update(_more_evidence(state, conns, ranks, plugin, driver))
    summary = LogSummary(
        transport=transport, net_plugin=plugin, libfabric_provider=provider, gdr=gdr, gdr_mode=gdr_mode,
        nccl_version=version, nccl_versions=versions, cuda_driver_version=driver,
        nranks=max((r.nranks for r in ranks), default=None) or _test_nranks(state), nnodes=nnodes,
        nnodes_min=nodes_min,
        local_ranks=max((r.local_ranks or 0 for r in ranks), default=0) or None,
        hosts=tuple(h.name for h in hosts), hcas=tuple(hcas), intra_node=intra_node(state, conns),
        errors=errs, benign=benign, env={e.name: e.value for e in env},
        evidence=_distinct(evidence),
        notes=_notes(state, index) + _rank_note(ranks) + _torn_note(state, hosts, index),
    )
    return LogAnalysis(
        summary=summary, inputs=stats, hosts=hosts, ranks=_rank_rows(ranks),
        communicators=_communicators(state, ranks),
        connections=conns, devices=tuple(state.devices.values()), env=env, errors=errs, plugins=plugins,
        benign=benign, inferences=inferences, phases=phases, host_versions=host_versions,
    )


def _one_node_transport(state: LogState, conns, env, nnodes: int | None, nodes_ev, transport, t_ev, inside):
    """A single-node job's transport is ``none`` whatever ``Using network`` says; network connections in it
    are NIC loopback (an inference with its lines)."""
    if nnodes != 1:
        return transport, t_ev, infer.loopback(state, inside, env, ()) if inside else None
    loop = infer.loopback(state, conns, env, nodes_ev)
    if transport in (None, "none"):
        return transport, t_ev, loop
    return "none", tuple(nodes_ev) + (loop.evidence[:1] if loop else ()), loop


def _rank_rows(ranks: tuple[RankInfo, ...]) -> tuple[RankInfo, ...]:
    """The rank table as written: whole communicators, biggest first, up to RANK_ROWS rows (a job
    restarted hundreds of times has a communicator per restart; ``communicators`` lists every one). A
    first communicator bigger than that is cut at RANK_ROWS."""
    if len(ranks) <= RANK_ROWS:
        return ranks
    end = 0
    while end < len(ranks):
        stop = end
        while stop < len(ranks) and ranks[stop].comm == ranks[end].comm:
            stop += 1
        if stop > RANK_ROWS:
            return ranks[: end or RANK_ROWS]
        end = stop
    return ranks


def _rank_note(ranks: tuple[RankInfo, ...]) -> tuple[str, ...]:
    kept = _rank_rows(ranks)
    if len(kept) == len(ranks):
        return ()
    comms = len({r.comm for r in ranks}) - len({r.comm for r in kept})
    return (f"rank table lists {len(kept)} of {len(ranks)} (rank, communicator) rows; the rows of {comms} "
            "more communicators are folded into the communicators table",)


def _notes(state: LogState, index: _HostIndex) -> tuple[str, ...]:
    many = sorted((count, host or "") for host, count in index.pid_counts.items() if count > PIDS_LISTED)
    notes: tuple[str, ...] = ()
    if many:
        notes = (f"{len(many)} host(s) ran more than {PIDS_LISTED} NCCL processes (up to {many[-1][0]}, on "
                 f"{many[-1][1]}; a restarted job): the first {PIDS_LISTED} pids of each are listed",)
    if state.conns_dropped:
        notes += (f"connection table capped at {len(state.conn_raw)} distinct lines; {state.conns_dropped} "
                  "connection lines with other keys were counted but not tabulated",)
    if state.procs_dropped:
        notes += (f"process table capped at {len(state.procs)} (host, pid) pairs; {state.procs_dropped} NCCL "
                  "lines of later processes were read but their pids not listed",)
    if not state.ranks_dropped:
        return notes
    return notes + (f"rank table capped at {len(state.ranks)} (process, communicator) entries; "
            f"{state.ranks_dropped} later Init lines were counted but not tabulated",)


def _distinct(values: dict[str, tuple[Evidence, ...]]) -> dict[str, tuple[Evidence, ...]]:
    """Each field's lines once per (file, line), in their order of weight; fields without lines left out."""
    out = {}
    for name, lines in values.items():
        if lines:
            out[name] = tuple({(ev.file, ev.line): ev for ev in lines}.values())
    return out


def _more_evidence(state: LogState, conns, ranks, plugin: str | None, driver: int | None) -> dict:
    """The first line behind each remaining summary field (net plugin, HCAs, intra-node kinds, ...)."""
    kinds: dict[str, Evidence] = {}
    for c in conns:
        if not c.transport.startswith("NET/") and c.evidence:
            kinds.setdefault(c.transport, c.evidence)
        if c.proxy_rank is not None and c.evidence:
            kinds.setdefault("PXN", c.evidence)
    if state.nvls:
        kinds["NVLS"] = next(iter(state.nvls.values()))
    hcas = [d.evidence for d in state.devices.values() if d.role == "hca" and d.evidence]
    world = max(ranks, key=lambda r: r.nranks, default=None)
    return {
        "net_plugin": (state.networks[plugin][1],) if plugin in state.networks else (),
        "hcas": tuple(dict.fromkeys(hcas))[:4],
        "intra_node": tuple(kinds.values()),
        "cuda_driver_version": (state.cuda_driver[driver],) if driver is not None else (),
        "nranks": (world.evidence,) if world and world.evidence else (),
    }


def _int(fields: dict[str, str], *names: str) -> int | None:
    for name in names:
        value = fields.get(name, "")
        if value.lstrip("-").isdigit():
            return int(value)
    return None


def _ranks(state: LogState) -> tuple[RankInfo, ...]:
    found: dict[tuple, RankInfo] = {}
    for entry in state.ranks.values():
        f = entry.fields
        rank, nranks = _int(f, "rank"), _int(f, "nranks", "nRanks")
        if rank is None or nranks is None:
            continue
        comm = f.get("commId") or f"size-{nranks}"
        info = RankInfo(
            rank=rank, nranks=nranks, comm=comm, host=entry.proc[0], pid=entry.proc[1],
            cuda_dev=_int(f, "cudaDev"), nvml_dev=_int(f, "nvmlDev"), bus_id=bus_id(f.get("busId")),
            local_rank=_int(f, "localRank"), local_ranks=_int(f, "localRanks"), nnodes=_int(f, "nNodes"),
            evidence=entry.evidence,
        )
        found.setdefault((comm, rank, info.host, info.pid), info)
    return tuple(sorted(found.values(), key=lambda r: (-r.nranks, r.comm, r.rank)))


def _communicators(state: LogState, ranks: tuple[RankInfo, ...]) -> tuple[Communicator, ...]:
    stages: dict[str, Counter] = {}
    for entry in state.ranks.values():
        nranks = _int(entry.fields, "nranks", "nRanks")
        comm = entry.fields.get("commId") or f"size-{nranks}"
        stages.setdefault(comm, Counter()).update(entry.stages)
    by_comm: dict[str, list[RankInfo]] = {}
    for r in ranks:
        by_comm.setdefault(r.comm, []).append(r)
    out = []
    for comm, members in by_comm.items():
        seen = stages.get(comm, Counter())
        out.append(Communicator(
            comm_id=comm, nranks=members[0].nranks,
            ranks_seen=len({(r.rank, r.host, r.pid) for r in members}),
            init_start=seen["START"], init_complete=seen["COMPLETE"],
            destroyed=seen["Destroy"] + seen["Abort"], evidence=members[0].evidence,
        ))
    return tuple(out)


class _HostIndex:
    """Each per-host question answered from one pass over each table (not hosts x rows rescans)."""

    def __init__(self, state: LogState, conns, ranks) -> None:
        self.devices: dict[str | None, dict[str, list]] = {}
        for d in state.devices.values():
            self.devices.setdefault(d.host, {}).setdefault(d.role, []).append(d)
        self.pids: dict[str | None, set[int]] = {}
        for host, pid in state.procs:
            if pid is not None:
                self.pids.setdefault(host, set()).add(pid)
        self.pid_counts = {host: len(pids) for host, pids in self.pids.items()}
        self.versions: dict[str | None, list] = {}
        for (host, version), (_count, ev) in state.versions.items():
            self.versions.setdefault(host, []).append((version, ev))
        world = _world(ranks)
        self.ranks: dict[str | None, list[RankInfo]] = {}
        for r in ranks:
            self.ranks.setdefault(r.host, []).append(r)
        self.world_ranks = {h: {r.rank for r in rs if r.nranks == world} for h, rs in self.ranks.items()}
        self.conns: dict[str | None, list] = {}
        for c in conns:
            self.conns.setdefault(c.host, []).append(c)
        self.tests: dict[str, list[Evidence]] = {}
        for host, _pid, ev in state.test_ranks.values():
            self.tests.setdefault(host, []).append(ev)

    def role(self, host: str | None, role: str) -> list:
        return self.devices.get(host, {}).get(role, [])


def _hosts(state: LogState, index: _HostIndex, ranks) -> tuple[HostSummary, ...]:
    names = set(state.host_lines) | set(index.conns) | set(index.ranks) | set(index.tests)
    out = []
    for name in sorted(n for n in names if n):
        boot = {d.address for d in index.role(name, "bootstrap") if _is_ip(d.address)}
        oob = {d.address for d in index.role(name, "oob") if _is_ip(d.address)}
        machines = len((boot or oob) | set(state.ray_ips.get(name, {})))
        out.append(HostSummary(
            name=name, machines=max(1, machines),
            pids=tuple(sorted(index.pids.get(name, ())))[:PIDS_LISTED],
            ranks=tuple(sorted(index.world_ranks.get(name, ()))),
            addresses=tuple(sorted(state.addresses.get(name, {}))),
            nccl_versions=tuple(sorted({v for v, _ev in index.versions.get(name, ())})),
            hcas=tuple(sorted({f"{d.name}:{d.port}/{d.link_layer}" for d in index.role(name, "hca")})),
            gdr=_host_gdr(index.conns.get(name, ())),
        ))
    return tuple(out)


def _is_ip(address: str | None) -> bool:
    """A real address (a typo such as ``10.10.10..2`` in a pasted line is no second machine)."""
    try:
        ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _world(ranks) -> int:
    return max((r.nranks for r in ranks), default=0)


def _host_gdr(conns) -> bool | None:
    flags = {c.gdr for c in conns if c.transport.startswith("NET/") and c.gdr is not None}
    return flags.pop() if len(flags) == 1 else (None if not flags else False)


def _nnodes(state: LogState, hosts, ranks, conns, index: _HostIndex) -> tuple[int | None, tuple]:
    """Nodes from NCCL's own counts (nNodes, nranks / localRanks) and from the machines seen. Machines
    seen alone are only a lower bound when the log shows some ranks of a bigger communicator."""
    candidates: list[tuple[int, Evidence | None]] = [(n, ev) for n, ev in state.nnodes.items()]
    size = _world(ranks)
    world = [r for r in ranks if r.nranks == size and r.local_ranks]
    if world and world[0].nranks % world[0].local_ranks == 0:
        candidates.append((world[0].nranks // world[0].local_ranks, world[0].evidence))
    seen = _machines(hosts)
    complete = bool(size) and (seen == size or len({r.rank for r in ranks if r.nranks == size}) == size)
    tests = state.test_ranks  # nccl-tests lists every rank with its host
    if tests and len(tests) == max(tests) + 1:
        candidates.append((len({host for host, _pid, _ev in tests.values()}), tests[0][2]))
    if seen and (candidates or complete):
        candidates.append((seen, None))
    net = [c.evidence for c in conns if c.transport.startswith("NET/") and c.evidence]
    if net and not candidates:
        return None, ()  # network connections prove "more than one", not how many
    if not candidates:
        return _one_machine(hosts, conns, size)
    best = max(n for n, _ev in candidates)
    evidence = tuple(ev for n, ev in candidates if n == best and ev is not None)
    if not evidence:
        evidence = tuple(_host_evidence(state, hosts, index, full=False))
    return best, evidence


def torn_hosts(hosts) -> dict[str, str]:
    """Host names that are the end of another host name in the same log (``ode-a`` next to ``node-a``):
    a line whose start was cut off (a torn paste, two writers on one line). Each is counted as the machine
    whose name it ends, never as another node; a note gives the count as a range with the reason."""
    names = [h.name for h in hosts]
    known, found = set(names), {}
    for long in names:  # each name's proper suffixes looked up: names x length, not names squared
        for start in range(1, len(long) - 1):
            if long[start:] in known:
                found[long[start:]] = long  # (the last name in order that ends with it, as before)
    return {short: found[short] for short in names if short in found}


def _machines(hosts) -> int:
    torn = torn_hosts(hosts)
    return sum(h.machines for h in hosts if h.name not in torn)


def _torn_note(state: LogState, hosts, index: _HostIndex) -> tuple[str, ...]:
    torn = torn_hosts(hosts)
    if not torn:
        return ()
    low = _machines(hosts)
    shown = []
    for short, long in sorted(torn.items())[:4]:
        lines = _host_line(state, short, index, full=True)
        where = f" ({lines[0].file}:{lines[0].line})" if lines else ""
        shown.append(f"'{short}'{where} is the end of '{long}'")
    return (f"host name(s) {'; '.join(shown)}: lines whose start was cut off, counted as the machine they "
            f"end: the node count is {low} to {low + len(torn)} ({low} if they are torn, as assumed)",)


def _one_machine(hosts, conns, size: int) -> tuple[int | None, tuple]:
    """One node, proven by the connection table: every rank of the communicator (0..nranks-1, or 0..the
    highest rank or peer seen when no size is printed) has its own connection rows, each rank and peer
    in them is one of those, and not one row goes through the network; all of it printed on one machine.
    The rings and trees close inside that machine, so no other node takes part."""
    if len(hosts) != 1 or hosts[0].machines != 1 or not conns:
        return None, ()
    if any(c.transport.startswith(("NET/", "COLLNET")) for c in conns):
        return None, ()
    printed = {c.rank for c in conns}
    reached = printed | {c.peer for c in conns}
    world = size or max(reached) + 1
    if len(printed) != world or min(printed) != 0 or max(printed) != world - 1 or not reached <= printed:
        return None, ()
    first = {}
    for c in conns:
        first.setdefault(c.rank, c.evidence)
    return 1, tuple(ev for _rank, ev in sorted(first.items()) if ev is not None)[:4]


def _nnodes_min(state: LogState, hosts, conns, env, index: _HostIndex, inside) -> tuple[int | None, tuple]:
    """A lower bound when the total is unknown: the machines the log shows (host names, several
    bootstrap addresses under one name), and at least 2 when ranks connect over the network."""
    seen = _machines(hosts)
    net = _net_lines(conns, env, inside)
    if net and seen < 2:
        return 2, net
    if not seen:
        return None, ()
    return seen, tuple(_host_evidence(state, hosts, index, full=True))


def _net_lines(conns, env: tuple[EnvSetting, ...], inside) -> tuple[Evidence, ...]:
    """Network connection lines: proof of a second node, unless P2P and SHM are both switched off
    (NCCL may then use the network inside one node) or both ranks are one process's."""
    if {"P2P", "SHM"} <= {s.disables for s in env}:
        return ()
    inside = set(inside)  # NIC loopback between two GPUs of one process
    return tuple(c.evidence for c in conns if c.transport.startswith("NET/") and c.evidence
                 and c not in inside)[:2]


def _host_evidence(state: LogState, hosts, index: _HostIndex, full: bool) -> list[Evidence]:
    """Lines of each machine (the first 16): its bootstrap addresses, else one line that names the host
    (``full``: a rank or connection line counts too)."""
    out = []
    for host in hosts:
        boot = [d.evidence for d in index.role(host.name, "bootstrap") if d.evidence is not None]
        out.extend(boot or _host_line(state, host.name, index, full)[:1])
        if len(out) >= 16:
            break
    return out[:16]


def _host_line(state: LogState, name: str, index: _HostIndex, full: bool) -> list[Evidence]:
    """The host's version line, else the first line of it that says anything."""
    found = [ev for _v, ev in index.versions.get(name, ())]
    found += list(state.addresses.get(name, {}).values())[:1]
    if full:
        found += [r.evidence for r in index.ranks.get(name, ()) if r.evidence][:1]
        found += [c.evidence for c in index.conns.get(name, ()) if c.evidence][:1]
    found += index.tests.get(name, [])[:1]
    return found + ([state.host_lines[name]] if name in state.host_lines else [])


def _test_nranks(state: LogState) -> int | None:
    return max(state.test_ranks) + 1 if state.test_ranks else None


def _versions(state: LogState) -> tuple[str | None, tuple[str, ...], tuple[Evidence, ...]]:
    counts: Counter = Counter()
    for (_host, version), (count, _ev) in state.versions.items():
        counts[version] += count
    for version, (count, _ev) in state.bare_versions.items():
        counts[version] += count
    if not counts:
        return None, (), ()
    best = counts.most_common(1)[0][0]
    first = [ev for v, ev in _version_lines(state) if v == best][:1]
    return best, tuple(sorted(counts, key=_version_key)), tuple(first)


def _version_lines(state: LogState) -> list[tuple[str, Evidence]]:
    """(version, first line) of each host's version, then of the bare version lines, in order seen."""
    out = [(version, ev) for (_host, version), (_n, ev) in state.versions.items()]
    return out + [(version, ev) for version, (_n, ev) in state.bare_versions.items()]


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _errors(state: LogState, versions: tuple[str, ...], env: tuple[EnvSetting, ...], plugins,
            chosen: set[str]) -> tuple[LogError, ...]:
    out = [_error(e) for e in state.errors.values()]
    for proc, (code, ev) in state.chains.items():  # chains of processes that printed no WARN
        found = errors.return_code_error(code)
        if found:
            out.append(
                LogError(
                    category=found[0],
                    level="INFO",
                    file=ev.file,
                    line=ev.line,
                    text=ev.text,
                    explanation=found[1],
                    host=proc[0],
                    pid=proc[1],
                )
            )
    if len(versions) > 1:
        out.append(_mismatch(state, versions))
    taken = {(e.file, e.line) for e in out if e.category in ("plugin_error", "no_net_device")}
    out += plugin_lines.fallback_errors(plugins, chosen, taken)
    for setting in env:
        if setting.disables == "P2P":
            ev = setting.evidence
            out.append(
                LogError(
                    category="p2p_disabled",
                    level="INFO",
                    file=ev.file,
                    line=ev.line,
                    text=ev.text,
                    explanation=f"{setting.name}={setting.value} switches GPU peer-to-peer off: "
                    f"intra-node traffic goes "
                    "through host memory (SHM) instead of NVLink/PCIe P2P. Remove it unless it works "
                    "around a "
                    "known fault.",
                )
            )
    return tuple(sorted(out, key=lambda e: (e.file, e.line)))


def _unless_fallback(found: tuple[LogError, ...], transport: str | None, nodes: int | None) -> tuple:
    """A "no device" line is benign on one node, but on a multi-node job that ended on TCP sockets it is
    why the job fell back (``NET/IB : No device found.`` with an ``NCCL_IB_HCA`` set): an error there."""
    if transport != "Socket" or (nodes or 1) < 2:
        return found
    return tuple(replace(e, benign=False) if e.benign and e.category == "no_net_device" else e for e in found)


def _one_node_needs_no_net(found: tuple[LogError, ...], nnodes: int | None, conns=()) -> tuple:
    """A proven single-node job whose ranks do not connect through the network needs no network: a
    network device missing there (``Failed to open libibverbs``, ``NET/IB : No device found``), a network
    plugin that does not initialise, or the socket interface NCCL picked (``lo``, a bridge, a link-local
    address: bootstrap works over any of them inside one machine) is benign, whatever the catalogue says
    of it on a multi-node job. (NIC loopback inside one node does use the network: nothing changes then.)"""
    if nnodes != 1 or any(c.transport.startswith("NET/") for c in conns):
        return found
    return tuple(replace(e, benign=True) if not e.benign and _net_only(e) else e for e in found)


def _net_only(error: LogError) -> bool:
    """A finding about the network path only (no device, a plugin, the socket interface choice)."""
    if error.category in ("no_net_device", "plugin_error"):
        return True
    return error.category == "socket_error" and (error.signature or "").startswith("socket-iface-")


def _error(entry) -> LogError:
    """An :class:`ErrorEntry` frozen; PyTorch's ``Last error:`` line keeps the WARN text it repeats."""
    ev, detail, repeats = entry.evidence, dict(entry.detail), None
    if entry.explanation.startswith(errors.LAST_ERROR_NOTE):
        repeats = ev.text.split("Last error:", 1)[1].strip() if "Last error:" in ev.text else ev.text.strip()
        verdict = errors.lookup(repeats)
        detail = verdict.detail() if verdict else detail
    related = tuple(sorted(entry.related, key=lambda e: (e.file, e.line)))
    return LogError(
        category=entry.category,
        level=entry.level,
        file=ev.file,
        line=ev.line,
        text=ev.text,
        explanation=entry.explanation,
        host=entry.proc[0],
        pid=entry.proc[1],
        count=entry.count,
        related=related,
        repeats=repeats or None,
        **detail,
    )


def _mismatch(state: LogState, versions: tuple[str, ...]) -> LogError:
    first = {}
    for version, ev in _version_lines(state):
        first.setdefault(version, ev)
    ev = min(first.values(), key=lambda e: (e.file, e.line))
    where = "; ".join(f"{v} at {first[v].file}:{first[v].line}" for v in versions)
    return LogError(
        category="version_mismatch",
        level="derived",
        file=ev.file,
        line=ev.line,
        text=ev.text,
        explanation=f"Ranks run different NCCL versions ({where}). Mixed versions can disagree on "
        f"topology, protocol and "
        "wire format, causing hangs or 'ring does not loop back' errors: use one container image / NCCL "
        "build on every node.",
    )
