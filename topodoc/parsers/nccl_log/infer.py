"""Conclusions drawn across lines, each with the lines it rests on and what it leaves open.

- :func:`single_process`: every NCCL line comes from one process driving several GPUs: one node.
- :func:`loopback`: network connections in a single-node job are NIC loopback (P2P/SHM off or unavailable),
  not a second node; the job's transport is then ``none``.
- :func:`first_failure`: the earliest failure in time across ranks (file order within a file; across files
  only where timestamps prove the order), and the later errors of other ranks that only reacted to it.
- :func:`hang`: in a log shaped like a hang, the last phase each process reached and what that points to.
- :func:`versions`: the NCCL releases each host's message wordings fit (:mod:`.wordings`), and a mismatch
  between hosts whose ranges do not overlap.
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoc.logmodel import (
    Connection,
    Evidence,
    HostVersions,
    Inference,
    LogError,
    ProcessPhase,
    RankInfo,
)
from topodoc.parsers.nccl_log import prefix, wordings
from topodoc.parsers.nccl_log.state import LogState

PHASES = ("bootstrap", "init", "connect", "init_complete", "collectives")
PHASES_LISTED = 256  # process rows written in LogAnalysis.phases
FAILURES = (
    "ib_completion_error",
    "timeout",
    "socket_error",
    "cuda_error",
    "system_error",
    "invalid_usage",
    "internal_error",
    "remote_error",
    "other",
)
# a peer's failure seen from this side: the connection closed or was reset, a remote error, a flushed WR
_AFTERMATH = re.compile(
    r"Connection closed|reset by peer|Connection reset|Broken pipe|remote process exited|"
    r"ncclRemoteError|closed by remote"
)
_STAMP = re.compile(r"(\[)?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?")
_RANK_TAG = re.compile(r"\[[Rr]ank ?(\d{1,9})\]")
_WATCHDOG = re.compile(r"Watchdog caught|Timeout at NCCL work|watchdog thread")
_SEQ = re.compile(r"SeqNum=(\d{1,19})")
_WORK = re.compile(
    r"(?:Timeout at NCCL work|detected by watchdog at work): (\d{1,19}), last enqueued NCCL work: "
    r"-?\d{1,19}, last completed NCCL work: (-?\d{1,19})"
)
_PG = re.compile(r"\[PG (?:ID )?(\d{1,9})\b")
# NCCL's net-plugin loader returns 3 for a plugin it skips and goes on ("NCCL_IBEXT_DISABLE set by
# environment to 1." then "net.cc:55 -> 3", NVIDIA/nccl#676): such a chain is no failure
_CHAIN = re.compile(r":\d{1,9} -> \d{1,3}")
_PLUGIN_CHAIN = re.compile(r"(?:^|[\s/])(?:net\.cc|plugin\w{0,32}\.cc):\d{1,9} -> 3")
_STAGES = (
    ("bootstrap", "in bootstrap"),
    ("Bootstrap", "in bootstrap"),
    ("net_ib", "in the IB verbs transport"),
    ("NET/IB", "in the IB verbs transport"),
    ("NET/OFI", "in the OFI (libfabric) net plugin"),
    ("proxy", "in NCCL's proxy thread"),
    ("shm", "setting up shared memory"),
    ("p2p", "setting up P2P"),
    ("Watchdog", "in a collective (PyTorch's watchdog timed it out)"),
    ("socket", "on a socket"),
    ("init.c", "during communicator init"),
    ("enqueue", "launching a collective"),
)


def phase_of(msg: str) -> str | None:
    """The init phase an NCCL message shows its process had reached, or ``None``."""
    if msg.endswith(("Init COMPLETE", "Init COMPLETE.")):
        return "init_complete"
    if msg.endswith("Init START"):
        return "init"
    if msg.startswith("Connected all"):
        return "connect"
    if msg.startswith(("Bootstrap", "NET/", "Using network")):
        return "bootstrap"
    if msg.startswith("comm ") and " nRanks " in msg:
        return "init"
    return None


def note_watchdog(state: LogState, msg: str, ev: Evidence) -> None:
    """A PyTorch watchdog line (``SeqNum=N`` / ``Timeout at NCCL work: N, ... last completed ...: M``): the
    collective each rank timed out in, kept per rank (see :func:`hang`)."""
    if "SeqNum=" not in msg and "NCCL work: " not in msg:
        return
    seq, work, tag, group = _SEQ.search(msg), _WORK.search(msg), _RANK_TAG.search(ev.text), _PG.search(msg)
    if tag and (seq or work):
        state.note_watchdog(
            tag[1], seq[1] if seq else work[1], work[2] if work else None, ev, group[1] if group else None
        )


# --- one node: a single process, and NIC loopback ---------------------------------------------------


def single_process(
    state: LogState, conns: tuple[Connection, ...], ranks: tuple[RankInfo, ...]
) -> Inference | None:
    """One node, when every NCCL line comes from one process that drives several GPUs and nothing in the
    log names another process, host, address or a node count above one: a process runs on one machine."""
    procs = [p for p in state.procs if p[1] is not None]
    if len(procs) != 1 or state.procs_dropped or any(n > 1 for n in state.nnodes):
        return None
    host, pid = procs[0]
    if {h for h in state.host_lines if h} - {host}:
        return None
    addresses = {d.address for d in state.devices.values() if d.role in ("bootstrap", "oob") and d.address}
    if len(addresses) > 1:
        return None
    mine = {r.rank for r in ranks if (r.host, r.pid) == (host, pid)}
    world = max((r.nranks for r in ranks), default=0)
    tests = state.test_ranks
    if world and len(mine) < world:
        return None  # the communicator has ranks this process does not hold
    if not world and not tests:
        return None  # no communicator size: these may be one process's lines cut out of a bigger job

    if any(p != pid or not _same_host(h, host) for h, p, _ev in tests.values()):
        return None
    if any(_printer(c) != (host, pid) for c in conns):
        return None  # a connection line printed by another process (the scanner folds them without pids)
    direct = [c for c in conns if c.transport.startswith("P2P/direct")]
    known = mine | {c.rank for c in conns} | {c.peer for c in direct} | set(tests)
    if any(c.peer not in known for c in conns if not c.transport.startswith(("P2P/", "SHM"))):
        return None  # a network peer this process is not known to hold
    devs = sorted(state.proc_devs.get((host, pid), ()))
    gpus = max(len(devs), len(mine), len({c.rank for c in conns} | {c.peer for c in direct}))
    if gpus < 2:
        return None
    evidence = [ev for ev in (state.host_lines.get(host),) if ev]
    evidence += [ev for _h, _p, ev in tests.values()][:1] + [c.evidence for c in direct[:1] if c.evidence]
    shown = f" (CUDA devices {', '.join(map(str, devs))} in its line prefixes)" if len(devs) > 1 else ""
    return Inference(
        kind="single_node",
        statement=f"every NCCL line comes from one process, {host}:{pid}, which drives {gpus} GPUs{shown}; a "
        f"process runs "
        "on one machine, and the log names no other process, host, address or node count: one node",
        evidence=tuple(dict.fromkeys(evidence)),
        host=host,
        pid=pid,
        unknown="if these are one process's lines cut out of a bigger job's log, the node count is open: the "
        "whole log, or Init lines with nranks, would settle it",
    )


def _printer(conn: Connection) -> tuple[str | None, int | None] | None:
    """(host, pid) in the prefix of a connection row's first line, ``None`` when it has none."""
    who = _prefix_of(conn)
    return (who.host, who.pid) if who is not None else None


def _prefix_of(conn: Connection) -> prefix.Record | None:
    """The prefix of a connection row's first line, read by the one prefix grammar (host and pid needed)."""
    who = prefix.split(prefix.clean(conn.evidence.text)) if conn.evidence else None
    return who if who is not None and who.host and who.pid is not None else None


def _same_host(name: str, host: str) -> bool:
    return name == host or name.startswith(host + ".") or host.startswith(name + ".")


def same_process_net(conns: tuple[Connection, ...]) -> tuple[Connection, ...]:
    """Network connections between two ranks that one process prints lines for, on two different CUDA
    devices of its prefixes (a process runs on one machine; two machines that share a host name and a pid
    -- identical images, containers -- give their ranks the same device, or differ by launcher address):
    NIC loopback whatever the job's node count."""
    held: dict[tuple, dict[int, int | None]] = {}
    printers = [(c, _prefix_of(c)) for c in conns]
    for c, who in printers:
        if who is not None:
            held.setdefault((who.host, who.pid, who.launcher_ip), {}).setdefault(c.rank, who.dev)
    out = []
    for c, who in printers:
        if c.transport.startswith("NET/") and who is not None:
            mine = held.get((who.host, who.pid, who.launcher_ip), {})
            if c.peer in mine and None not in (mine[c.peer], mine[c.rank]) and mine[c.peer] != mine[c.rank]:
                out.append(c)
    return tuple(out)


def loopback(
    state: LogState, conns: tuple[Connection, ...], env, nodes_ev: tuple[Evidence, ...]
) -> Inference | None:
    """Network connections in a job proven to run on one node, or between two ranks of one process: NIC
    loopback, not a second node."""
    net = [c for c in conns if c.transport.startswith("NET/")]
    if not net:
        return None
    names = sorted({c.transport for c in net})
    offs = [s for s in env if s.disables in ("P2P", "SHM")]
    if offs:
        why = "; ".join(f"{s.name}={s.value} ({s.evidence.file}:{s.evidence.line})" for s in offs)
        cause = f"the log echoes {why}, so NCCL had no faster path left inside the node"
        unknown = None
        if {s.disables for s in offs} != {"P2P", "SHM"}:
            missing = "SHM" if "P2P" in {s.disables for s in offs} else "P2P"
            unknown = (f"why {missing} was not used either: the log does not say "
                       "(NCCL_DEBUG_SUBSYS=INIT,P2P,SHM would)")
    else:
        cause = (
            "no NCCL_P2P_DISABLE / NCCL_SHM_DISABLE echo in the log: P2P and shared memory were unavailable "
            "between these GPUs, or switched off without NCCL echoing it"
        )
        unknown = (
            "why P2P and SHM were not used: NCCL_DEBUG_SUBSYS=INIT,ENV,P2P,SHM, or `topodoc diagnose "
            "--from live` on the machine, would tell"
        )
    evidence = tuple(c.evidence for c in net[:2] if c.evidence) + tuple(s.evidence for s in offs[:2])
    return Inference(
        kind="nic_loopback",
        statement=f"ranks on one node connect through the network ({', '.join(names)}): NIC loopback, "
        f"not a second "
        f"node; {cause}. Loopback through the NIC is much slower than NVLink/PCIe P2P or shared memory",
        evidence=evidence + tuple(nodes_ev[:1]),
        unknown=unknown,
    )


# --- the first failure in time across ranks ------------------------------------------------------------


def _stamp(text: str) -> tuple[str, str] | None:
    """(kind, sortable time) of a timestamp at the start of a line: NCCL 2.26+'s ``[YYYY-MM-DD HH:MM:SS]``
    on WARN lines ("nccl"), or a leading ISO / Kubernetes stamp ("iso")."""
    found = _STAMP.search(text[:96])
    if not found:
        return None
    kind = "nccl" if found[1] else "iso"
    return kind, f"{found[2]} {found[3]}.{(found[4] or '').ljust(9, '0')}"


def _candidates(errs: tuple[LogError, ...], state: LogState) -> list[LogError]:
    found = [
        e for e in errs if e.category in FAILURES and (e.level in ("WARN", "ERROR") or _CHAIN.search(e.text))
    ]
    for (host, pid), (code, ev) in state.chains.items():  # a "-> 3" chain of a process with no WARN
        if code == 3 and not _PLUGIN_CHAIN.search(ev.text):
            found.append(
                LogError(
                    category="internal_error",
                    level="INFO",
                    file=ev.file,
                    line=ev.line,
                    text=ev.text,
                    explanation="a return-code chain (-> 3, ncclInternalError) without a WARN",
                    host=host,
                    pid=pid,
                )
            )
    return sorted(found, key=lambda e: (e.file, e.line))


def aftermath(err: LogError) -> bool:
    """The line only shows a peer's failure from this side (connection closed / reset, remote error, WR
    flushed)."""
    return (
        err.category == "remote_error"
        or err.ib_status == 5
        or (err.category == "socket_error" and bool(_AFTERMATH.search(err.text)))
    )


def first_failure(errs: tuple[LogError, ...], state: LogState, ranks: tuple[RankInfo, ...]):
    """(inference or None, {(file, line): "file:line" of the first failure} for the lines that only reacted
    to it). Needs at least two failure lines; the order across files only from comparable timestamps."""
    found = _candidates(errs, state)
    if len(found) < 2 or all(_WATCHDOG.search(e.text) for e in found):
        return None, {}  # one failure says it all; only watchdog timeouts: a hang (see hang())
    procs = {(e.host, e.pid) for e in found if e.host is not None or e.pid is not None}
    tags = {_identity(e) for e in found} - {None}
    if len(procs) < 2 and (procs or len(tags) < 2) and not all(aftermath(e) for e in found):
        return None, {}  # one process: its errors are listed in order already
    owned = [e for e in found if e.host is not None or e.pid is not None] or found
    causes = [e for e in owned if not aftermath(e)]
    if not causes:
        first = owned[0]
        return Inference(
            kind="first_failure",
            statement=f"every failure logged is a reaction to a peer going away; the earliest is "
            f"{_who(first, ranks)} "
            f"({_what(first)}). The process that failed first printed no error here (killed, out of "
            f"memory, a "
            "crash, or its log is missing)",
            evidence=tuple(_ev(e) for e in owned[:3]),
            host=first.host,
            pid=first.pid,
            unknown="which process failed first: its own log, or the launcher's exit codes / dmesg "
            "on its node",
        ), {}
    firsts: dict[str, LogError] = {}
    for err in causes:
        firsts.setdefault(err.file, err)
    first, unknown = _earliest(list(firsts.values()))
    if first is None:
        listing = "; ".join(f"{e.file}:{e.line} {_who(e, ranks)} ({_what(e)})" for e in firsts.values())
        return Inference(
            kind="first_failure",
            statement=f"each file's first failure: {listing}. Which came first in time is unknown: these "
            f"lines carry no "
            "comparable timestamps",
            evidence=tuple(_ev(e) for e in firsts.values())[:4],
            unknown=unknown,
        ), {}
    reactions = [
        e
        for e in owned
        if aftermath(e)
        and (e.host, e.pid) != (first.host, first.pid)
        and (e.file == first.file or _after(e, first))
    ]
    marks = {(e.file, e.line): f"{first.file}:{first.line}" for e in reactions}
    text = f"{_who(first, ranks)} failed first, {_what(first)}"
    if reactions:
        procs = sorted({_who(e, ranks) for e in reactions})
        others = " and others" if len(procs) > 6 else ""
        text += (
            f"; the {len(reactions)} error(s) of {', '.join(procs[:6])}{others}"
            " only saw the connection close or a remote error: consequences of it"
        )
        if any(e.file == first.file and e.line < first.line for e in reactions):
            text += (
                " (printed earlier in the file: the output of several processes reaches one log out of order)"
            )
    return Inference(
        kind="first_failure",
        statement=text,
        evidence=(_ev(first),) + tuple(_ev(e) for e in reactions[:3]),
        host=first.host,
        pid=first.pid,
        unknown=unknown,
    ), marks


def _identity(err: LogError):
    if err.host is not None or err.pid is not None:
        return (err.host, err.pid)
    tag = _RANK_TAG.search(err.text)
    return ("rank", tag[1]) if tag else None


def _earliest(firsts: list[LogError]) -> tuple[LogError | None, str | None]:
    if len(firsts) == 1:
        return firsts[0], None
    stamps = [_stamp(e.text) for e in firsts]
    if all(stamps) and len({s[0] for s in stamps}) == 1:  # type: ignore[index]
        order = sorted(zip(stamps, range(len(firsts)), strict=True), key=lambda item: item[0][1])  # type: ignore[index]
        if order[0][0][1] != order[1][0][1]:
            return firsts[order[0][1]], None
        return (
            None,
            "the first two files' first failures carry the same timestamp: finer timestamps "
            "(NCCL_DEBUG_TIMESTAMP_FORMAT with %Nf) would settle it",
        )
    return (
        None,
        "which file's failure came first: NCCL 2.26+ stamps WARN lines with the time "
        "(NCCL_DEBUG_TIMESTAMP_LEVELS=ALL stamps every line), or a launcher that timestamps its output",
    )


def _after(err: LogError, first: LogError) -> bool:
    if err.file == first.file:
        return err.line > first.line
    a, b = _stamp(err.text), _stamp(first.text)
    return bool(a and b and a[0] == b[0] and a[1] > b[1])


def _who(err: LogError, ranks: tuple[RankInfo, ...]) -> str:
    if err.host is None and err.pid is None:
        tag = _RANK_TAG.search(err.text)
        return f"rank {tag[1]} (a line with no NCCL prefix)" if tag else "a line with no process prefix"
    held = sorted({r.rank for r in ranks if (r.host, r.pid) == (err.host, err.pid)})
    where = f"{err.host or '?'}:{err.pid}" if err.pid is not None else (err.host or "?")
    if len(held) == 1:
        return f"rank {held[0]} on {err.host or '?'} (pid {err.pid})"
    if held:
        return f"{where} (ranks {', '.join(map(str, held[:8]))}{'...' if len(held) > 8 else ''})"
    return where


def _what(err: LogError) -> str:
    stage = next((words for key, words in _STAGES if key in err.text), None)
    kind = err.category.replace("_", " ")
    short = err.text.split("NCCL WARN", 1)[-1].strip()[:100]
    return f"{stage}: {kind}, '{short}'" if stage else f"{kind}, '{short}'"


def _ev(err: LogError) -> Evidence:
    return Evidence(err.file, err.line, err.text)


def label(errs: tuple[LogError, ...], marks: dict) -> tuple[LogError, ...]:
    """The errors with ``consequence_of`` set on the lines that only reacted to the first failure."""
    if not marks:
        return errs
    out = []
    for e in errs:
        first = marks.get((e.file, e.line))
        if first:
            e = replace(
                e,
                consequence_of=first,
                explanation=f"A consequence of the first failure at {first}: "
                f"this process only saw it. {e.explanation}",
            )
        out.append(e)
    return tuple(out)


# --- where a hang stopped ----------------------------------------------------------------------------


def hang(
    state: LogState,
    errs: tuple[LogError, ...],
    ranks: tuple[RankInfo, ...],
    conns: tuple[Connection, ...],
    transport: str | None,
):
    """(phases, inference) for a log shaped like a hang: no failure but PyTorch watchdog timeouts, or
    processes at different collective counts, or some processes in collectives while others never got
    there. Each process's last phase (NCCL's lines), each timed-out rank's collective (the watchdog's
    SeqNum), and what the ones furthest behind point to."""
    failures = _candidates(errs, state)
    timeouts = [e for e in failures if e.category == "timeout"]
    if len(timeouts) != len(failures) or (timeouts and not any(_WATCHDOG.search(e.text) for e in timeouts)):
        return (), None  # another failure, or a timeout that is not PyTorch's watchdog: not a hang
    reached = _reached(state, ranks, conns)
    seqs = {k: (v[0], v[1], v[3]) for k, v in state.watchdog.items()} if timeouts else {}
    ops = {row.op_count for row in reached if row.op_count is not None}
    levels = {row.phase for row in reached}
    stalled = len(levels) > 1 and "collectives" in levels  # the job went on to collectives without some
    if not (timeouts or stalled or len(ops) > 1) or not (reached or seqs):
        return (), None
    parts, evidence, low = [], [], None
    if reached:
        low = min(reached, key=lambda row: (PHASES.index(row.phase), row.op_count or 0))
        laggards = [row for row in reached if row.phase == low.phase and row.op_count == low.op_count]
        parts.append(
            "; ".join(_phase_group(reached, p) for p in PHASES if any(r.phase == p for r in reached))
        )
        evidence += [r.evidence for r in laggards[:3] if r.evidence]
    if seqs:
        shown = ", ".join(
            f"rank {k} in collective {v[0]}" + (f" (last completed {v[1]})" if v[1] else "")
            for k, v in sorted(seqs.items(), key=lambda kv: _num(kv[0]))[:8]
        )
        parts.append(f"PyTorch's watchdog timed out {shown}")
        evidence += [v[2] for _k, v in sorted(state.watchdog.items(), key=lambda kv: _num(kv[0]))[:3]]
    statement = (
        f"the log looks like a hang ({_why_hang(timeouts, ops)}): {'; '.join(parts)}. "
        f"{_points_to(low, conns, transport, ops, seqs)}"
    )
    unknown = (
        None
        if timeouts
        else "whether the paste simply ends here: a log that runs to the job's end (or its timeout) "
            "settles it"
    )
    if seqs and not reached:
        unknown = (
            "which rank stopped first: the other ranks' logs (the lowest 'last completed' work), or "
            "NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,COLL to see each rank's last collective"
        )
    rows = tuple(sorted(reached, key=lambda r: (r.host or "", r.pid or 0)))[:PHASES_LISTED]
    rows += tuple(
        ProcessPhase(
            host=None,
            pid=None,
            phase="collectives",
            ranks=(int(k),) if k.isdigit() else (),
            op_count=int(v[0]),
            evidence=state.watchdog[k][2],
        )
        for k, v in sorted(seqs.items(), key=lambda kv: _num(kv[0]))
    )[:PHASES_LISTED]
    host, pid = (low.host, low.pid) if low else (None, None)
    return rows, Inference(
        kind="hang",
        statement=statement,
        evidence=tuple(dict.fromkeys(evidence)),
        host=host,
        pid=pid,
        unknown=unknown,
    )


def _num(text: str) -> int:
    return int(text) if text.isdigit() else 1 << 30


def _reached(
    state: LogState, ranks: tuple[RankInfo, ...], conns: tuple[Connection, ...]
) -> list[ProcessPhase]:
    pids: dict[str | None, set] = {}
    for host, pid in state.procs:
        if pid is not None:
            pids.setdefault(host, set()).add(pid)
    by_rank = {(r.host, r.rank): r.pid for r in ranks}
    lines: dict[tuple, dict[str, Evidence]] = {p: dict(marks) for p, marks in state.phase_lines.items()}
    for c in conns:
        pid = by_rank.get((c.host, c.rank))
        if pid is None and len(pids.get(c.host, ())) == 1:
            pid = next(iter(pids[c.host]))
        if pid is not None and c.evidence is not None and (c.host, pid) in state.procs:
            lines.setdefault((c.host, pid), {}).setdefault("connect", c.evidence)
    holds: dict[tuple, set[int]] = {}  # indexed once: a restarted job has tens of thousands of processes
    for r in ranks:
        holds.setdefault((r.host, r.pid), set()).add(r.rank)
    out = []
    for proc in state.procs:
        if proc[1] is None:
            continue
        marks = lines.get(proc, {})
        coll = state.colls.get(proc)
        held = tuple(sorted(holds.get(proc, ())))
        if coll:
            out.append(
                ProcessPhase(
                    host=proc[0],
                    pid=proc[1],
                    phase="collectives",
                    ranks=held,
                    op_count=coll[2],
                    evidence=coll[1],
                )
            )
        elif marks:
            phase = max(marks, key=PHASES.index)  # the furthest phase it logged
            out.append(ProcessPhase(host=proc[0], pid=proc[1], phase=phase, ranks=held, op_count=None,
                                    evidence=marks[phase]))
    return out


def _phase_group(rows: list[ProcessPhase], phase: str) -> str:
    mine = [r for r in rows if r.phase == phase]
    names = [
        f"{r.host or '?'}:{r.pid}"
        + (f" (rank {','.join(map(str, r.ranks[:4]))})" if r.ranks else "")
        + (f" opCount {r.op_count:#x}" if r.op_count is not None else "")
        for r in mine[:6]
    ]
    more = f" and {len(mine) - 6} more" if len(mine) > 6 else ""
    words = {
        "bootstrap": "stopped at bootstrap",
        "init": "stopped in init (Init START, no connection)",
        "connect": "stopped after connecting",
        "init_complete": "reached Init COMPLETE",
        "collectives": "reached collectives",
    }[phase]
    return f"{len(mine)} process(es) {words}: {', '.join(names)}{more}"


def _why_hang(timeouts, ops: set) -> str:
    if timeouts:
        return "PyTorch's watchdog timed collectives out and no other failure was logged"
    if len(ops) > 1:
        return "processes reached different collective counts and no error was logged"
    return "some processes reached collectives and others never did, and no error was logged"


def _points_to(low: ProcessPhase | None, conns, transport, ops: set, seqs: dict) -> str:
    numbers = {v[0] for v in seqs.values()}
    if len(numbers) > 1:
        pairs = ", ".join(
            f"rank {k} at {v[0]}" + (f" in process group {v[2]}" if v[2] else "")
            for k, v in sorted(seqs.items(), key=lambda kv: _num(kv[0]))[:6]
        )
        groups = {v[2] for v in seqs.values()}
        if len(groups) == 1 and None not in groups:
            return (
                f"Desync: ranks of one process group timed out in different collectives ({pairs}): one "
                "skipped or added a collective, or stopped earlier; the lowest is where to look."
            )
        if None in groups:
            return (
                f"The ranks timed out at different sequence numbers ({pairs}); these count per process "
                "group and the lines do not all name theirs: in one group this is a desync (a rank "
                "skipped or "
                "added a collective), in different groups the numbers are not comparable."
            )
        return (
            f"The ranks timed out in different process groups ({pairs}): their sequence numbers are not "
            "comparable; look for the group whose ranks disagree."
        )
    if len(ops) > 1:
        return (
            f"Desync: processes logged different collective counts (last opCount {min(ops):#x} vs "
            f"{max(ops):#x}): one rank skipped or added a collective, or stopped; start from the "
            f"lowest count."
        )
    if numbers == {"1"} or any(v[1] == "-1" for v in seqs.values()):
        return (
            "The first collective never completed (sequence number 1, nothing completed before it): NCCL "
            "2.22+ makes its connections at the first collective, so this is a connection set-up hang (the "
            "network path between nodes, or P2P blocked by the IOMMU / PCIe ACS inside a node), not "
            "a slow step."
        )
    if (low is None or low.phase == "collectives") and len(seqs) == 1:
        return (
            "Only one rank's watchdog is in this log: whether the other ranks stopped in the same collective "
            "(a rank or the network stalled) or elsewhere (a desync) needs their logs."
        )
    if low is None or low.phase == "collectives":
        same = f" ({next(iter(numbers))})" if len(numbers) == 1 else ""
        return (
            f"Every rank logged stopped in the same collective{same}: not a desync between them; a "
            f"rank not in "
            "this log stalled or died, or the network path stalled; read the other ranks' logs."
        )
    if low.phase == "bootstrap":
        return (
            "Points to bootstrap: these processes never started communicator init, so their bootstrap TCP "
            "connection to the root rank did not form (a firewall, NCCL_SOCKET_IFNAME picking an unroutable "
            "interface, a wrong MASTER_ADDR / NCCL_COMM_ID), or they never got the unique id."
        )
    if low.phase == "init":
        return (
            "Points to init: these processes started init but made no connection: the bootstrap allgather "
            "is waiting for a rank that is missing or unreachable, or topology detection stalled."
        )
    if low.phase == "connect":
        net = any(c.transport.startswith("NET/") for c in conns)
        if net and transport in ("RoCE", "IB", "IBext", "gIB"):
            return (
                "Points to the network after connect: connections were set up but data did not flow; on RoCE "
                "a GID index / MTU / routing mismatch between the nodes (show_gids, the MTU on both "
                "ends, unset "
                "NCCL_IB_GID_INDEX on 2.21+), on InfiniBand a path or subnet-manager problem."
            )
        if net and transport not in (None, "none"):
            return (
                f"Points to the network after connect: connections over {transport} were set up but data did "
                "not flow (the transport's own data path: routes, firewall, the plugin's daemons)."
            )
        return (
            "Points to P2P inside the node: connections were set up but the first transfer never completed; "
            "on a PCIe machine peer-to-peer traffic blocked by the IOMMU or PCIe ACS is the usual "
            "cause (check "
            "ACS / iommu=pt; NCCL_P2P_DISABLE=1 as a test)."
        )
    return (
        "Points to the application: these processes finished init but did not enter the collective the "
        "others reached (a crash or stall before it, a data-loader wait, a different code path)."
    )


# --- NCCL releases by message wording --------------------------------------------------------------------


def versions(state: LogState):
    """(per-host ranges, mismatch LogError or None, inferences): hosts whose wording ranges do not overlap
    run different builds; a printed version that two of a host's own wordings exclude is noted."""
    ranges = wordings.host_ranges(state.wordings)
    printed: dict[str | None, dict[str, Evidence]] = {}
    for (host, version), (_n, ev) in state.versions.items():
        printed.setdefault(host, {})[version] = ev
    if len(ranges) == 1 and state.bare_versions:  # a framework's "NCCL version X" line: that one host's
        only = next(iter(ranges))
        for version, (_n, ev) in state.bare_versions.items():
            printed.setdefault(only, {}).setdefault(version, ev)
    rows, notes = [], []
    for host, (first, last, items) in sorted(ranges.items(), key=lambda kv: kv[0] or ""):
        if first is not None and last is not None and first > last:
            continue  # the host's own wordings disagree (two builds under one name): no range
        shown = tuple(sorted(printed.get(host, {})))
        rows.append(
            HostVersions(
                host=host,
                first=wordings.text(first),
                last=wordings.text(last),
                wordings=tuple(w for w, _ev in items),
                printed=shown,
                evidence=tuple(ev for _w, ev in items[:3]),
            )
        )
        note = _outside(host, items, printed.get(host, {}))
        if note:
            notes.append(note)
    return tuple(rows), _mismatch(rows, printed), tuple(notes)


def _outside(host, items, printed: dict[str, Evidence]) -> Inference | None:
    for version, ev in printed.items():
        parsed = wordings.parse(version)
        against = [(w, wev) for w, wev in items if parsed and not wordings.fits(wordings.BY_ID[w], parsed)]
        if parsed and len(against) >= 2:
            names = ", ".join(f"{w} ({wev.file}:{wev.line})" for w, wev in against[:3])
            return Inference(
                kind="version_range",
                statement=f"{host or 'the log'} prints NCCL {version}, but {len(against)} of its "
                f"messages are "
                f"worded as "
                f"other releases print them ({names}): the library that ran is not the one whose version was "
                "printed (a framework's bundled NCCL vs an LD_PRELOAD / NCCL_LIBRARY override), or the lines "
                "come from two builds",
                evidence=(ev,) + tuple(wev for _w, wev in against[:2]),
                host=host,
                unknown="which library each process loaded: /proc/<pid>/maps or NCCL_DEBUG=VERSION "
                    "per process",
            )
    return None


def _mismatch(rows: list[HostVersions], printed) -> LogError | None:
    named = [r for r in rows if r.host is not None and (r.first or r.last)]
    for i, a in enumerate(named):
        for b in named[i + 1 :]:
            pa = (wordings.parse(a.first) if a.first else None, wordings.parse(a.last) if a.last else None)
            pb = (wordings.parse(b.first) if b.first else None, wordings.parse(b.last) if b.last else None)
            if wordings.overlap(pa, pb):
                continue
            older, newer = (a, b) if (pa[1] or (99, 0)) < (pb[0] or (0, 0)) else (b, a)
            ev = min((older.evidence[0], newer.evidence[0]), key=lambda e: (e.file, e.line))
            return LogError(
                category="version_mismatch",
                level="derived",
                file=ev.file,
                line=ev.line,
                text=ev.text,
                explanation=f"Hosts run different NCCL releases, told by how they word the same "
                f"messages: {older.host} "
                f"{_span(older)} ({_cite(older)}) and {newer.host} {_span(newer)} ({_cite(newer)}). Mixed "
                "builds disagree on protocol and topology (hangs, 'Message truncated', rings that "
                "do not loop "
                "back): run one NCCL build on every node.",
            )
    return None


def _span(row: HostVersions) -> str:
    if row.first and row.last:
        return f"NCCL {row.first}-{row.last}" if row.first != row.last else f"NCCL {row.first}"
    return f"NCCL {row.first} or later" if row.first else f"NCCL {row.last} or earlier"


def _cite(row: HostVersions) -> str:
    pairs = zip(row.wordings, row.evidence, strict=False)
    return ", ".join(f"'{w}' at {ev.file}:{ev.line}" for w, ev in pairs)
