"""The mutable accumulator the log scanner fills, line by line; :mod:`.summary` freezes it.

Everything is keyed so that memory depends on the job's size (processes, ranks, peers, devices), not on
the log's: repeated lines only bump counters and keep the first line as evidence.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from topodoc.logmodel import RELATED_LIMIT, Evidence, NetDevice

SEEN_LIMIT = 16384
DEVS_LIMIT = 64  # devices remembered per process
PHASE_LIMIT = 4096  # processes whose phase lines are kept (the latest ones)
WATCHDOG_LIMIT = 4096  # ranks whose watchdog timeout is remembered
CONN_LIMIT = 262144  # distinct connection keys kept (a real job has a few per rank); later lines counted
Proc = tuple  # (host or None, pid or None)


@dataclass
class ErrorEntry:
    category: str
    level: str
    evidence: Evidence
    explanation: str
    proc: Proc
    count: int = 1
    related: list[Evidence] = field(default_factory=list)  # return-code chains of this WARN
    detail: dict = field(default_factory=dict)  # LogError's structured fields (signature, fix, ib_status...)


@dataclass
class RankEntry:
    """One process's view of one communicator (keyed by process and comm pointer)."""

    fields: dict[str, str]
    proc: Proc
    evidence: Evidence
    stages: set[str] = field(default_factory=set)  # "START", "COMPLETE", "Destroy", "Abort"


@dataclass
class LogState:
    """Facts gathered so far. Keys hold the first evidence; counters hold how many lines agreed."""

    # (host, version) -> [lines, first line]: NCCL prints its version once per process, so the count is
    # the processes' (kept per host, not per pid: a job restarted a hundred times adds no entries)
    versions: dict[tuple[str | None, str], list] = field(default_factory=dict)
    bare_versions: dict[str, list] = field(default_factory=dict)  # version -> [lines, first line]
    cuda_driver: dict[int, Evidence] = field(default_factory=dict)
    networks: dict[str, list] = field(default_factory=dict)  # name -> [processes that said it, first line]
    plugins: dict[str, Evidence] = field(default_factory=dict)  # "sharp", "family:FasTrak", ...
    plugin_rows: dict[tuple, object] = field(default_factory=dict)  # (kind, key) -> plugins.PluginRow
    ofi: dict[str, tuple[str, Evidence]] = field(default_factory=dict)  # provider/fabric/version
    devices: dict[tuple, NetDevice] = field(default_factory=dict)  # (host, role, name, index, address)
    addresses: dict[str | None, dict[str, Evidence]] = field(default_factory=dict)  # host -> ip -> ev
    gdr_lines: dict[tuple, Evidence] = field(default_factory=dict)  # (host, enabled) -> evidence
    ring_gdr: dict[tuple, Evidence] = field(default_factory=dict)  # (host, pxn, gdr) -> evidence
    nvls: dict[str, Evidence] = field(default_factory=dict)
    collnet: dict[str, Evidence] = field(default_factory=dict)
    ranks: dict[tuple, RankEntry] = field(default_factory=dict)  # (proc, comm pointer) -> entry
    nnodes: dict[int, Evidence] = field(default_factory=dict)
    test_ranks: dict[int, tuple[str, int, Evidence]] = field(default_factory=dict)  # nccl-tests rank
    env: dict[tuple[str, str], Evidence] = field(default_factory=dict)
    errors: dict[tuple, ErrorEntry] = field(default_factory=dict)
    # the first "-> N" of a process that has printed no WARN yet; a later WARN of it takes the line
    chains: dict[Proc, tuple[int, Evidence]] = field(default_factory=dict)
    last_warn: dict[Proc, list] = field(default_factory=dict)  # process -> [error key, chain after it seen]
    benign_at: dict[Proc, tuple] = field(default_factory=dict)  # process -> (file, line, key) of a probe
    # (prefix "host:pid:tid [dev]", text after "Channel NN/N : ") -> [lines, first evidence]
    conn_raw: dict[tuple[bytes, bytes], list] = field(default_factory=dict)
    procs: Counter = field(default_factory=Counter)  # (host, pid) -> NCCL lines
    # (host, pid) -> [collective-call lines (NCCL_DEBUG_SUBSYS=COLL "AllReduce: opCount N ..."), first line's
    # Evidence, last opCount seen (int)]: how far each process got (hang phase, desync across ranks)
    colls: dict[Proc, list] = field(default_factory=dict)
    host_lines: dict[str | None, Evidence] = field(default_factory=dict)  # host -> its first NCCL line read
    # (host, pid) -> CUDA devices its prefixes name ("[3]"), at most DEVS_LIMIT each: one process driving
    # several GPUs (nccl-tests -g, ncclCommInitAll) holds several ranks of one machine
    proc_devs: dict[Proc, set] = field(default_factory=dict)
    # (host, pid) -> {phase: first line}: bootstrap, init, connect, init_complete (infer.PHASES)
    phase_lines: dict[Proc, dict[str, Evidence]] = field(default_factory=dict)
    wordings: dict[tuple, Evidence] = field(default_factory=dict)  # (host, wordings.Wording id) -> first line
    wording_tries: Counter = field(default_factory=Counter)  # (host, first word) -> records tried (capped)
    # PyTorch watchdog timeouts: rank -> [sequence number, last completed or None, first line, process group]
    # (the error table folds them across ranks once numbers are masked; a desync needs them per rank)
    watchdog: dict[str, list] = field(default_factory=dict)
    ray_ips: dict[str, dict[str, Evidence]] = field(default_factory=dict)
    # link layer a verbs GID proves ("RoCE": an IPv4-mapped or MAC-derived GID in a NET/IB line) -> first line
    gid_layers: dict[str, Evidence] = field(default_factory=dict)
    info_seen: bool = False  # an " NCCL INFO " record was read (NCCL 2.1's "[0] INFO" form is off after it)
    ranks_dropped: int = 0  # Init lines past the rank-table limit
    procs_dropped: int = 0  # NCCL lines of processes past the process-table limit
    conns_dropped: int = 0  # connection lines with a key past the connection-table limit
    seen_lines: set = field(default_factory=set)  # (host, msg) of per-host facts already taken
    quiet: set = field(default_factory=set)  # (host, msg) of INFO lines read once that made no finding
    # (host, msg) of a per-host INFO line read once -> the finding it made (counted once per host)
    host_findings: dict[tuple, tuple] = field(default_factory=dict)

    def host_finding(self, host: str | None, msg: str, key: tuple) -> None:
        if len(self.host_findings) >= SEEN_LIMIT:
            self.host_findings.clear()
        self.host_findings[(host, msg)] = key

    def quiet_line(self, host: str | None, msg: str) -> None:
        if len(self.quiet) >= SEEN_LIMIT:
            self.quiet.clear()
        self.quiet.add((host, msg))

    def note_dev(self, proc: Proc, dev: int) -> None:
        devs = self.proc_devs.get(proc)
        if devs is None:
            if proc not in self.procs:
                return  # a process past the process table's limit
            self.proc_devs[proc] = {dev}
        elif len(devs) < DEVS_LIMIT:
            devs.add(dev)

    def note_phase(self, proc: Proc, phase: str, ev: Evidence) -> None:
        """The first line of ``phase`` in ``proc`` (for processes the process table keeps)."""
        if proc in self.procs:
            marks = self.phase_lines.get(proc)
            if marks is None:
                marks = self.phase_lines[proc] = {}
                self._trim_phases()
            marks.setdefault(phase, ev)

    def _trim_phases(self) -> None:
        """Keep the phases of the PHASE_LIMIT processes seen last (a hang is read from the job's last
        start; a job restarted hundreds of times would otherwise keep every process's lines)."""
        while len(self.phase_lines) > PHASE_LIMIT:
            del self.phase_lines[next(iter(self.phase_lines))]

    def note_watchdog(self, key: str, seq: str | None, done: str | None, ev: Evidence,
                      group: str | None) -> None:
        entry = self.watchdog.get(key)
        if entry is None and len(self.watchdog) < WATCHDOG_LIMIT:
            self.watchdog[key] = [seq, done, ev, group]
        elif entry is not None:
            entry[0], entry[1], entry[3] = entry[0] or seq, entry[1] or done, entry[3] or group

    def new_conn(self, key: tuple[bytes, bytes], count: int, ev: Evidence) -> None:
        """A connection key seen for the first time (``count`` lines, the first of them ``ev``)."""
        if len(self.conn_raw) < CONN_LIMIT:
            self.conn_raw[key] = [count, ev]
        else:
            self.conns_dropped += count

    def seen(self, host: str | None, msg: str) -> bool:
        """True when this host already printed this exact message (a bounded cache, so a rare miss is
        only repeated work)."""
        key = (host, msg)
        if key in self.seen_lines:
            return True
        if len(self.seen_lines) >= SEEN_LIMIT:
            self.seen_lines.clear()
        self.seen_lines.add(key)
        return False

    def note_error(self, category: str, level: str, ev: Evidence, explanation: str, proc: Proc,
                   key: str, detail: dict | None = None) -> tuple:
        found = self.errors.get((category, key))
        if found is None:
            entry = ErrorEntry(category, level, ev, explanation, proc, detail=detail or {})
            self.errors[(category, key)] = entry
        else:
            found.count += 1
        return (category, key)

    def note_warn(self, proc: Proc, key: tuple) -> None:
        """A WARN of ``proc`` (its error under ``key``): it owns the process's chain seen before it."""
        waiting = self.chains.pop(proc, None)
        self.last_warn[proc] = [key, False]
        if waiting is not None:
            self._relate(key, waiting[1])

    def note_benign(self, proc: Proc, key: tuple, ev: Evidence) -> None:
        """A benign line of ``proc`` (a probe such as ``No NIC info``): a return-code chain on the very
        next line is that probe's (``-> 2`` after it is no failure), see :meth:`probe_chain`."""
        self.benign_at[proc] = (ev.file, ev.line, key)

    def probe_chain(self, proc: Proc, ev: Evidence) -> bool:
        """True (and the chain related to the probe) when ``ev`` directly follows a benign probe of
        ``proc``; chains further away are judged as usual."""
        probe = self.benign_at.pop(proc, None)
        if probe is None or (probe[0], probe[1] + 1) != (ev.file, ev.line):
            return False
        self._relate(probe[2], ev)
        return True

    def note_chain(self, proc: Proc, code: int, ev: Evidence) -> None:
        """A return-code chain line: the first after a WARN belongs to that WARN; with no WARN yet, the
        process's first chain waits for the next WARN (and is judged alone if none comes)."""
        warn = self.last_warn.get(proc)
        if warn is None:
            self.chains.setdefault(proc, (code, ev))
        elif not warn[1]:
            warn[1] = True
            self._relate(warn[0], ev)

    def _relate(self, key: tuple, ev: Evidence) -> None:
        entry = self.errors.get(key)
        if entry is not None and len(entry.related) < RELATED_LIMIT:
            entry.related.append(ev)

    def note_address(self, host: str | None, ip: str, ev: Evidence) -> None:
        if ip and not ip.startswith("127."):
            self.addresses.setdefault(host, {}).setdefault(ip, ev)

    # -- several parts read by several processes ------------------------------------------------------

    def merge(self, later: LogState, limits: tuple[int, int]) -> None:
        """Fold ``later`` -- what another process read from inputs (or a part of one) that come after
        this state's -- into this state, as one reader going on would have; ``limits``: the process
        and rank table limits (:data:`.facts.PROC_LIMIT`, :data:`.facts.RANK_LIMIT`). A return-code chain
        can no longer be tied to a WARN read by the other process (the parts are cut at record starts)."""
        from topodoc.parsers.nccl_log import plugins

        for name in _FIRST_WINS:
            mine = getattr(self, name)
            for k, v in getattr(later, name).items():
                mine.setdefault(k, v)
        for name in _NESTED_FIRST_WINS:
            mine = getattr(self, name)
            for k, inner in getattr(later, name).items():
                target = mine.setdefault(k, {})
                for k2, v in inner.items():
                    target.setdefault(k2, v)
        for name in _COUNTED:
            _add_counted(getattr(self, name), getattr(later, name))
        for k, (lines, ev) in later.conn_raw.items():
            entry = self.conn_raw.get(k)
            if entry is not None:
                entry[0] += lines
            else:
                self.new_conn(k, lines, ev)
        for proc, (lines, ev, op) in later.colls.items():
            entry = self.colls.get(proc)
            if entry is None:
                self.colls[proc] = [lines, ev, op]
            else:
                entry[0] += lines
                entry[2] = op if op is not None else entry[2]
        self._merge_procs(later, limits[0])
        self._merge_ranks(later, limits[1])
        self._merge_errors(later)
        plugins.merge(self.plugin_rows, later.plugin_rows)
        for proc, marks in later.phase_lines.items():
            if proc in self.procs:
                mine = self.phase_lines.setdefault(proc, {})
                for phase, ev in marks.items():
                    mine.setdefault(phase, ev)
        self._trim_phases()
        for proc, devs in later.proc_devs.items():
            if proc not in self.procs:
                continue
            self.proc_devs[proc] = set(list(self.proc_devs.get(proc, set()) | devs)[:DEVS_LIMIT])
        for k, (seq, done, ev, group) in later.watchdog.items():
            self.note_watchdog(k, seq, done, ev, group)
        self.wording_tries.update(later.wording_tries)
        self.info_seen = self.info_seen or later.info_seen
        self.ranks_dropped += later.ranks_dropped
        self.conns_dropped += later.conns_dropped
        for line, key in later.host_findings.items():
            if line in self.seen_lines and key in self.errors:  # read by both: one reader counts it once
                self.errors[key].count -= 1
            self.host_findings.setdefault(line, key)
        self.seen_lines |= later.seen_lines
        self.quiet |= later.quiet

    def _merge_procs(self, later: LogState, limit: int) -> None:
        for proc, lines in later.procs.items():
            if proc in self.procs or len(self.procs) < limit:
                self.procs[proc] += lines
            else:
                self.procs_dropped += lines
        self.procs_dropped += later.procs_dropped

    def _merge_ranks(self, later: LogState, limit: int) -> None:
        for k, entry in later.ranks.items():
            mine = self.ranks.get(k)
            if mine is not None:
                mine.fields.update(entry.fields)
                mine.stages |= entry.stages
            elif len(self.ranks) < limit:
                self.ranks[k] = entry
            else:
                self.ranks_dropped += 1

    def _merge_errors(self, later: LogState) -> None:
        for k, entry in later.errors.items():
            mine = self.errors.get(k)
            if mine is None:
                self.errors[k] = entry
            else:
                mine.count += entry.count
                mine.related.extend(entry.related[: max(RELATED_LIMIT - len(mine.related), 0)])
        for proc, chain in later.chains.items():
            if proc not in self.last_warn:
                self.chains.setdefault(proc, chain)
        self.last_warn.update(later.last_warn)
        self.benign_at.update(later.benign_at)


# LogState fields merged by kind (see LogState.merge): first evidence wins; nested; [count, evidence]
_FIRST_WINS = (
    "cuda_driver", "plugins", "ofi", "devices", "gdr_lines", "ring_gdr", "nvls", "collnet", "nnodes",
    "test_ranks", "env", "host_lines", "wordings", "gid_layers",
)
_NESTED_FIRST_WINS = ("addresses", "ray_ips")
_COUNTED = ("versions", "bare_versions", "networks")


def _add_counted(mine: dict, later: dict) -> None:
    for k, (count, ev) in later.items():
        entry = mine.get(k)
        if entry is None:
            mine[k] = [count, ev]
        else:
            entry[0] += count

