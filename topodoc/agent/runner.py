"""The agent: a scheduler around :class:`~topodoc.agent.cycle.Prober`, event sources, log tail, exporters.

Threads: the main loop (events in, scheduling, signals), one probe worker (never two probes at once: a
cycle that comes due while the previous probe still runs is skipped and counted), one thread per event
source, one log-tail thread, and the HTTP server (one event-loop thread and two render workers, whatever
its clients do: :mod:`topodoc.agent.http`). State shared with them lives behind one lock and is
read through :meth:`Agent.view` — a consistent, immutable :class:`View` the exporters render.

Stopping (:meth:`Agent.stop`, SIGTERM/SIGINT in the command) ends every loop within about a second;
:meth:`Agent.request_reload` (SIGHUP) re-reads ``--config`` and re-probes.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from topodoc import __version__, jsontext
from topodoc.agent.cycle import CycleResult, Prober
from topodoc.agent.events import AgentEvent, EventLog, from_kernel, from_udev
from topodoc.agent.logtail import LogWatcher
from topodoc.agent.sources import KmsgSource, NvmlSource, ReplaySource, SourceUnavailable, UdevSource
from topodoc.agent.state import FindingTracker, Tracked

TICK = 0.25  # the main loop's longest wait, bounds the reaction to stop/reload
LOG_POLL = 1.0
MIN_REPROBE_GAP = 1.0  # udev storms re-probe at most once a second
MIN_INTERVAL = 1.0  # the command and --config refuse shorter intervals (tests build AgentConfig directly)
EVENTS_FILE_MAX_BYTES = 16 * 2**20  # --events-file is renamed to FILE.1 (the one kept) past this size
TOKEN_MIN, TOKEN_MAX = 16, 4096  # bearer token length, characters
FIRST_CYCLE_WAIT = 30.0  # events wait for the first topology at most this long
KERNEL_EVENTS = 1000  # kernel-log events kept for the kernel rules (the newest)


@dataclass(frozen=True)
class AgentConfig:
    source: str | None = None  # --from; None = this machine
    interval: float = 60.0
    budget: float | None = None  # seconds a cycle may take; default 80% of the interval, at most 120 s
    listen: tuple[str, int] | None = ("127.0.0.1", 9612)
    watch_log: tuple[str, ...] = ()
    textfile: str | None = None
    events_file: str | None = None
    replay_events: str | None = None
    live_events: bool = True  # udev + /dev/kmsg (off when replaying a recording)
    cycles: int | None = None  # stop after this many cycles (tests, soak), once the replay has ended
    config_file: str | None = None
    auth_token_file: str | None = None  # /findings /events /snapshot need this bearer token
    redact: bool = True  # /snapshot redacted like `record --redact`
    events_file_max_bytes: int = EVENTS_FILE_MAX_BYTES

    @property
    def budget_s(self) -> float:
        return self.budget if self.budget is not None else min(self.interval * 0.8, 120.0)


@dataclass(frozen=True)
class View:
    version: str
    started: float
    rss_bytes: int
    cpu_seconds: float
    cycles: int
    skipped: int
    cycle_errors: int
    cycle: CycleResult | None
    tracked: tuple[Tracked, ...]
    event_counts: dict
    logs: dict
    sources: dict
    disabled: tuple[tuple[str, str], ...]
    errors: tuple[str, ...] = ()
    log_reports: dict = field(default_factory=dict)


MAX_CONFIG_CHARS = 1 << 20  # a config is a few lines; more is cut, and fails to parse


def load_config_file(path: str, base: AgentConfig) -> AgentConfig:
    """``--config FILE``: JSON with any of interval, budget, watch_log, textfile, events_file."""
    with open(path, encoding="utf-8") as handle:
        data = jsontext.loads(handle.read(MAX_CONFIG_CHARS + 1))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    allowed = {"interval": (int, float), "budget": (int, float), "watch_log": list, "textfile": str,
               "events_file": str}
    changes = {}
    for key, value in data.items():
        if key not in allowed or not isinstance(value, allowed[key]):
            raise ValueError(f"{path}: unknown key or wrong type: {key!r}")
        changes[key] = tuple(value) if key == "watch_log" else value
    if changes.get("interval", MIN_INTERVAL) < MIN_INTERVAL:
        raise ValueError(f"{path}: interval must be at least {MIN_INTERVAL:g} s")
    if changes.get("budget", 1) <= 0:
        raise ValueError(f"{path}: budget must be > 0")
    return replace(base, **changes)


def read_token(path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace dropped): 16-4096 printable ASCII characters
    without spaces, from a regular file; ValueError with a one-line reason otherwise."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the agent
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"--auth-token-file {path}: not a regular file")
        raw = handle.read(TOKEN_MAX + 2)
    token = raw.strip().decode("ascii", errors="replace")
    if len(raw) > TOKEN_MAX + 1 or not TOKEN_MIN <= len(token) <= TOKEN_MAX:
        raise ValueError(f"--auth-token-file {path}: the token must be {TOKEN_MIN}-{TOKEN_MAX} characters "
                         "(make one with: openssl rand -hex 32)")
    if not all(33 <= ord(c) < 127 for c in token):
        raise ValueError(f"--auth-token-file {path}: the token must be printable ASCII without spaces")
    return token


class Agent:
    def __init__(self, config: AgentConfig) -> None:
        import psutil

        self.config = config
        self.auth_token = read_token(config.auth_token_file) if config.auth_token_file else None
        self.prober = Prober(config.source, config.budget_s)
        self.tracker = FindingTracker()
        self.events = EventLog()
        self.logs = LogWatcher(config.watch_log)
        self.started = time.time()
        self._process = psutil.Process()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reload = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=10_000)
        self._cycle: CycleResult | None = None
        self._cycles = self._skipped = self._cycle_errors = 0
        self._probing = False
        self._log_results: dict = {}
        self._log_reports: dict = {}
        # the kernel-log events followed (Xid, AER, IOMMU...), for the kernel rules of every cycle
        self._kernel: deque = deque(maxlen=KERNEL_EVENTS)
        self._kernel_lines = 0
        self._errors: deque[str] = deque(maxlen=50)
        self._served_snapshot: tuple[object, dict | None] = (None, None)  # (cycle, its /snapshot document)
        self.sources, self.disabled = self._open_sources()
        self.http = None
        self._threads: list[threading.Thread] = []

    # -- sources -------------------------------------------------------------------------------------
    def _open_sources(self):
        sources, disabled = [], []
        if self.config.replay_events:
            sources.append(ReplaySource(self.config.replay_events))
        if self.config.live_events:
            for cls in (UdevSource, KmsgSource, NvmlSource):
                if cls is NvmlSource and any(isinstance(s, KmsgSource) for s in sources):
                    disabled.append(("nvml", "NVML Xid events not needed: the kernel log has every Xid"))
                    continue
                try:
                    sources.append(cls())
                except SourceUnavailable as err:
                    disabled.append((cls.name, str(err)))
        else:
            disabled.append(("udev+kmsg+nvml", "replaying a recording: live device events, the kernel log "
                             "and NVML events are not followed (use --replay-events)"))
        return sources, disabled

    def _source_loop(self, source) -> None:
        while not self._stop.is_set() and not source.done:
            try:
                for raw in source.poll(0.5):
                    self._queue.put(raw, timeout=1)
            except queue.Full:
                self.report_error(source.name, "event queue full: events dropped")
            except Exception as err:  # a source that breaks is reported; the others carry on
                self.report_error(source.name, f"{type(err).__name__}: {err}")
                return

    # -- lifecycle -----------------------------------------------------------------------------------
    def start_http(self) -> None:
        """Bind and serve the HTTP endpoints (OSError when the address is taken)."""
        if self.config.listen is not None and self.http is None:
            from topodoc.agent.http import AgentHttp

            self.http = AgentHttp(self, *self.config.listen)
            self.http.start()

    def start(self) -> None:
        self.start_http()
        targets = [(self._probe_loop, "probe"), (self._log_loop, "logs")]
        targets += [(lambda s=s: self._source_loop(s), f"source-{s.name}") for s in self.sources]
        for target, name in targets:
            thread = threading.Thread(target=target, name=f"topodoc-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def run(self) -> int:
        """Run until :meth:`stop` (or ``cycles`` done); 0."""
        self.start()
        try:
            self._main_loop()
        finally:
            self.shutdown()
        return 0

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def request_reload(self) -> None:
        self._reload.set()

    def shutdown(self) -> None:
        self.stop()
        if self.http is not None:
            self.http.stop()
        deadline = time.monotonic() + 3.0  # SIGTERM must end the process within 5 s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for source in self.sources:
            try:
                source.close()
            except Exception as err:  # closing must not block the exit
                self.report_error(source.name, f"close: {err}")

    # -- main loop -----------------------------------------------------------------------------------
    def _main_loop(self) -> None:
        next_due = time.monotonic()
        last_probe = -MIN_REPROBE_GAP
        reprobe = False
        while not self._stop.is_set():
            if self._reload.is_set():
                self._reload.clear()
                self._apply_reload()
                reprobe = True
            now = time.monotonic()
            if now >= next_due or (reprobe and now - last_probe >= MIN_REPROBE_GAP):
                self._trigger_probe()
                last_probe, next_due, reprobe = now, now + self.config.interval, False
            if self._events_ready():
                reprobe |= self._drain(min(TICK, max(0.0, next_due - now)))
            else:
                self._stop.wait(TICK)
            if self._finished():
                self.stop()

    def _events_ready(self) -> bool:
        return self._cycle is not None or time.time() - self.started > FIRST_CYCLE_WAIT

    def _drain(self, timeout: float) -> bool:
        """Handle queued events; True when one calls for a re-probe (a device came or went)."""
        reprobe = False
        try:
            raw = self._queue.get(timeout=timeout)
        except queue.Empty:
            return False
        for _ in range(500):
            reprobe |= self._handle(raw)
            try:
                raw = self._queue.get_nowait()
            except queue.Empty:
                break
        return reprobe

    def _handle(self, raw) -> bool:
        cycle = self._cycle
        topology = cycle.topology if cycle else None
        snapshot = cycle.snapshot if cycle else None
        source = raw.source
        try:
            if raw.source == "udev":
                event = from_udev(raw.action or "", raw.subsystem or "", raw.device or "", raw.time, source,
                                  topology, snapshot, self._log_results)
            else:
                event = self._kernel_event(raw, source, topology, snapshot)
        except Exception as err:  # a join bug must not lose the agent
            self.report_error("events", f"{type(err).__name__}: {err}")
            return False
        if event is not None:
            self.events.add(event)
            self._write_event(event)
        if raw.source != "udev":
            # a kernel error (an Xid, an uncorrectable AER) is judged by the kernel rules at the next cycle:
            # bring it forward, so the finding is at /findings within one cycle of the line
            return event is not None and event.severity in ("error", "critical")
        return raw.action in ("add", "remove", "bind", "unbind", "change")

    def _kernel_event(self, raw, source: str, topology, snapshot) -> AgentEvent | None:
        from topodoc.parsers.kernel_log import parse_line

        self._kernel_lines += 1
        parsed = parse_line(raw.line or "", self._kernel_lines)
        if parsed is None:
            return None
        with self._lock:
            self._kernel.append((f"{source} kernel log", parsed))
        return from_kernel(parsed, raw.time, source, topology, snapshot, self._log_results)

    def kernel_events(self) -> tuple:
        with self._lock:
            return tuple(self._kernel)

    def _finished(self) -> bool:
        limit = self.config.cycles
        if limit is None or self._cycles < limit or self._probing:
            return False
        return all(s.done for s in self.sources if isinstance(s, ReplaySource)) and self._queue.empty()

    # -- probe ---------------------------------------------------------------------------------------
    def _trigger_probe(self) -> None:
        with self._lock:
            if self._probing:
                self._skipped += 1
                return
            self._probing = True
        self._wake.set()

    def _probe_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.5)
            self._wake.clear()
            if self._stop.is_set() or not self._probing:
                continue
            self.run_cycle()

    def run_cycle(self) -> CycleResult:
        """One cycle now, in this thread (the soak benchmark calls it directly)."""
        self._probing = True
        try:
            result = self.prober.run(self._cycles + 1, self.kernel_events())
            with self._lock:
                self._cycle = result
                self._cycles += 1
                self._cycle_errors += 1 if result.errors else 0
                self.tracker.update("host", result.report.findings, result.finished)
            for err in result.errors:
                self.report_error("probe", err)
            self._write_textfile()
            return result
        finally:
            self._probing = False

    # -- logs ----------------------------------------------------------------------------------------
    def _log_loop(self) -> None:
        while not self._stop.is_set():
            if self.logs.patterns:
                try:
                    self.poll_logs()
                except Exception as err:  # reported; the next poll tries again
                    self.report_error("logs", f"{type(err).__name__}: {err}")
            self._stop.wait(min(LOG_POLL, self.config.interval))

    def poll_logs(self) -> None:
        from topodoc.diagnosis import Request, run
        from topodoc.rules.registry import RULES

        self.logs.poll()
        results = self.logs.analyse()
        cycle = self._cycle
        rules = [r for r in RULES if "logs" in r.needs]
        now = time.time()
        for path, result in results.items():
            if result.analysis is None or path in self._log_reports and self._log_results.get(path) is result:
                continue
            snapshot = cycle.snapshot if cycle else None
            topology = cycle.topology if cycle else None
            report = run(Request(snapshot=snapshot, topology=topology, log_analysis=result.analysis,
                                 kernel=self.kernel_events(), rules=tuple(rules), live_default=False)).report
            with self._lock:
                self._log_reports[path] = report
                self.tracker.update(path, report.findings, now)
        with self._lock:
            for gone in set(self._log_results) - set(results):
                self.tracker.forget(gone)
                self._log_reports.pop(gone, None)
            self._log_results = results

    # -- exporters -----------------------------------------------------------------------------------
    def report_error(self, component: str, message: str) -> None:
        self._errors.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {component}: {message}")

    def view(self) -> View:
        memory = self._process.memory_info().rss
        cpu = self._process.cpu_times()
        with self._lock:
            cycle = self._cycle
            return View(__version__, self.started, memory, cpu.user + cpu.system, self._cycles, self._skipped,
                        self._cycle_errors, cycle, tuple(self.tracker.items()), self.events.counts(),
                        dict(self._log_results), self._source_states(), self._disabled(cycle),
                        tuple(self._errors), dict(self._log_reports))

    def _source_states(self) -> dict:
        alive = {t.name.removeprefix("topodoc-source-"): t.is_alive() for t in self._threads
                 if t.name.startswith("topodoc-source-")}
        return {s.name: alive.get(s.name, False) and not s.done for s in self.sources}

    def _disabled(self, cycle: CycleResult | None) -> tuple[tuple[str, str], ...]:
        out = list(self.disabled)
        seen = set()
        for gap in cycle.snapshot.gaps if cycle and cycle.snapshot else ():
            if gap.reason.value == "permission" and gap.what not in seen and len(seen) < 20:
                seen.add(gap.what)
                out.append((f"probe:{gap.what}", f"permission denied reading {gap.source or gap.what} "
                            "(run as root or grant read access)"))
        return tuple(out)

    def _write_textfile(self) -> None:
        if not self.config.textfile:
            return
        from topodoc.report.prometheus import render

        target = os.path.join(self.config.textfile, "topodoc.prom")
        temp = f"{target}.{os.getpid()}.tmp"
        try:
            with open(temp, "wb") as handle:
                handle.write(render(self.view()))
            os.replace(temp, target)  # atomic: node_exporter never reads half a file
        except OSError as err:
            self.report_error("textfile", f"{target}: {err.strerror or err}")

    def _write_event(self, event: AgentEvent) -> None:
        """Append ``event`` to ``--events-file``; past ``events_file_max_bytes`` the file becomes
        ``FILE.1`` (replacing the previous one) and a new file starts: at most twice the limit on disk."""
        path = self.config.events_file
        if not path:
            return
        line = (json.dumps(event_data(event)) + "\n").encode("utf-8")
        try:
            with self._lock:
                try:
                    size = os.stat(path).st_size
                except FileNotFoundError:
                    size = 0
                if size and size + len(line) > self.config.events_file_max_bytes:
                    os.replace(path, f"{path}.1")
                with open(path, "ab") as handle:
                    handle.write(line)
        except OSError as err:
            self.report_error("events-file", f"{path}: {err.strerror or err}")

    def _apply_reload(self) -> None:
        if not self.config.config_file:
            self.report_error("reload", "SIGHUP: no --config file to re-read; re-probing only")
            return
        try:
            config = load_config_file(self.config.config_file, self.config)
        except (OSError, ValueError) as err:
            self.report_error("reload", f"kept the previous configuration: {err}")
            return
        token = self.auth_token
        if config.auth_token_file:
            try:
                token = read_token(config.auth_token_file)  # a rotated Secret applies on SIGHUP
            except (OSError, ValueError) as err:
                why = getattr(err, "strerror", None) or err
                self.report_error("reload", f"kept the previous token: {why}")
        with self._lock:
            if config.watch_log != self.config.watch_log:
                self.logs = LogWatcher(config.watch_log)
            self.config = config
            self.auth_token = token
            self.prober.budget_s = config.budget_s

    def findings_document(self) -> dict:
        """``topodoc.agent-findings``: the last cycle's ``diagnose --json`` data plus the agent's state;
        ``ready`` is false (and the findings empty) until the first cycle has run."""
        from topodoc.report.diagnose import json_data
        from topodoc.report.document import document
        from topodoc.rules.engine import Report

        view = self.view()
        cycle = view.cycle
        empty = {"hardware": None, "log": None, "nccl-tests": None}
        doc = json_data(cycle.report, cycle.inputs) if cycle else json_data(Report(), empty)
        doc["ready"] = cycle is not None
        doc["agent"] = {
            "cycles": view.cycles,
            "last_cycle": _iso(cycle.finished) if cycle else None,
            "cycle_errors": list(cycle.errors) if cycle else [],
            "tracked": [_tracked(t) for t in view.tracked],
            "logs": {path: _log_doc(res, view.log_reports.get(path)) for path, res in view.logs.items()},
        }
        return document("topodoc.agent-findings", doc)

    def snapshot_document(self) -> dict | None:
        """The last cycle's snapshot as ``probe --json`` prints it, redacted unless ``redact`` is off
        (:mod:`topodoc.agent.redacted`), made once per cycle; None before the first probe."""
        from topodoc.codec import to_data

        cycle = self._cycle
        if cycle is None or cycle.snapshot is None:
            return None
        done_for, doc = self._served_snapshot
        if done_for is not cycle:
            from topodoc.agent.redacted import redact_snapshot

            doc = to_data(cycle.snapshot)
            doc = redact_snapshot(doc) if self.config.redact else doc
            self._served_snapshot = (cycle, doc)
        return doc

    def events_document(self) -> dict:
        """``topodoc.agent-events``: the recent events (a bounded ring) and the counts."""
        from topodoc.report.document import document

        counts = [{"kind": k, "code": c, "device": d, "count": n} for (k, c, d), n in
                  sorted(self.events.counts().items())]
        return document("topodoc.agent-events",
                        {"events": [event_data(e) for e in self.events.recent()], "counts": counts})

    def health_document(self) -> dict:
        view = self.view()
        cycle = view.cycle
        allowed = max(3 * self.config.interval + self.config.budget_s, 30.0)
        stale = cycle is not None and time.time() - cycle.finished > allowed
        status = "starting" if cycle is None else ("stale" if stale else "ok")
        return {"status": status, "version": view.version, "cycles": view.cycles,
                "interval": self.config.interval, "watch_log": list(self.config.watch_log),
                "last_cycle": _iso(cycle.finished) if cycle else None, "sources": view.sources,
                "disabled": [{"check": c, "reason": r} for c, r in view.disabled],
                "errors": list(view.errors)}


def event_data(event: AgentEvent) -> dict:
    from topodoc.codec import to_data

    data = to_data(event)
    data["time_iso"] = _iso(event.time)
    return data


def _tracked(item: Tracked) -> dict:
    return {"scope": item.scope, "rule": item.rule, "subject": item.subject, "severity": item.severity,
            "status": item.status, "first_seen": _iso(item.first_seen), "last_seen": _iso(item.last_seen),
            "resolved_at": _iso(item.resolved_at) if item.resolved_at else None, "message": item.message}


def _log_doc(result, report) -> dict:
    summary = result.analysis.summary if result.analysis is not None else None
    return {"nccl_lines_seen": result.analysis is not None,
            "transport": summary.transport if summary else None,
            "gdr": summary.gdr if summary else None, "kept_bytes": result.kept_bytes,
            "restarts": result.restarts, "error": result.error,
            "findings": [{"rule": f.rule, "severity": f.severity.value, "subject": f.subject,
                          "message": f.message} for f in (report.findings if report else ())]}


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
