"""Kernel log reader: ``dmesg`` / ``journalctl -k`` / ``/dev/kmsg`` lines -> :class:`KernelEvent`.

Public API::

    parse(text_or_lines) -> list[KernelEvent]    # pure; never raises on input, never prints
    parse_line(line, lineno=1) -> KernelEvent | None
    Reader()  # parse() fed a piece at a time

The events returned are bounded whatever the input's length (:class:`Kept`): the first :data:`PER_GROUP`
of each (kind, device, code, severity), the group's later lines counted in the last one's ``repeats``;
:data:`MAX_EVENTS` in all. Count lines as the sum of ``repeats``, never as the number of events.

What it recognises (every other line is ignored; benign lines such as "GPU at PCI:..." or an mlx5
"firmware version" line produce no event):

- ``xid``: ``NVRM: Xid (PCI:0000:cb:00): 13, pid=..., name=..., <text>``, explained from
  :mod:`topodoc.parsers.xid_catalog` (meaning, usual action);
- ``sxid``: ``nvidia-nvswitchN: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 ...`` (NVSwitch);
- ``gpu_lost``: the multi-line "NVRM: The NVIDIA GPU 0000:b3:00.0 ... fallen off the bus" message that
  newer drivers print without an Xid 79; ``nvrm``: ``NVRM: GPU 0000:0a:00.0: RmInitAdapter failed!``;
- ``aer``: ``pcieport 0000:80:1b.4: AER: Uncorrectable (Non-Fatal) error message received from
  0000:80:1b.4`` (code ``corrected``, ``uncorrected_nonfatal`` or ``uncorrected_fatal``; ``device`` is
  the device the error came from, ``port`` in ``detail`` the port that reported it); ``aer_detail``:
  the ``PCIe Bus Error: severity=..., type=...`` line that follows (counted apart, so one error is
  not counted twice);
- ``iommu``: Intel ``DMAR: [DMA Read NO_PASID] Request device [00:02.0] ... fault addr ... [fault
  reason 0x06] ...`` and AMD ``AMD-Vi: Event logged [IO_PAGE_FAULT device=05:00.0 ...]`` in both
  spellings (DMAR and old AMD-Vi lines print no PCI segment: segment 0 is assumed and said so);
- ``mlx5`` / ``efa``: driver lines about a device that say something failed (``failed``, ``error``,
  ``syndrome``, ``health``, ``fatal``, ``timeout``...), and ``mlx5``'s port and module state; code
  ``health`` (critical) for the health poller's verdict ("device's health compromised", "irisc not
  responding"), ``health_dump`` (info) for the register dump after it, ``link_down`` (warning: the
  netdev's ``Link down``, the RDMA port's ``Port: 1 Link DOWN``) and ``link_up`` (info: ``Link up``,
  ``Port: 1 Link ACTIVE``, what says a port came back), ``module_error`` (error: ``Port module
  event[error]: module 0, Cable error, High Temperature``, the cable or transceiver the port holds),
  ``module_unplugged`` (warning), ``temperature`` (warning: the adapter's own ``High temperature on
  sensors``), ``cmd_failed``, ``error``; ``detail`` ``name`` is the netdev or RDMA device the line names
  (the driver prints both the same way);
- ``pcie_bandwidth``: ``pci 0000:03:00.0: 2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe
  x1 link at 0000:02:03.0 (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)``;
- ``oom``: the kernel's OOM killer, code ``killed`` (error: ``Out of memory: Killed process 2481 (python3)
  total-vm:..., anon-rss:7981200kB, ...``, ``Memory cgroup out of memory: Killed process ...``, and the
  older ``Killed process 799153 (node), UID 1000, total-vm:...``; ``detail`` pid, process, anon_rss_kb,
  scope ``node``/``cgroup`` where the line says which), code ``constraint`` (info: the
  ``oom-kill:constraint=CONSTRAINT_MEMCG,...,task_memcg=/slurm/uid_1000/job_42,task=python3,pid=2481``
  line printed before it, or the older kernels' ``Memory cgroup out of memory: Kill process 62685 (bash)
  score 0 or sacrifice child``; ``detail`` pid, task, scope, memcg);
- ``peermem``: the GPU peer-memory module failed to load (``nvidia_peermem: Unknown symbol
  ib_register_peer_memory_client (err -22)``, ``nv_peer_mem: disagrees about version of symbol
  nvidia_p2p_get_pages``), code ``ib_core`` (an RDMA-core symbol), ``nvidia`` (an NVIDIA driver symbol) or
  ``symbol`` (another), error; ``detail`` module, symbol, why (``version``: the symbol is there but not the
  one the module was built against; ``missing``: not exported at all), err;
- ``hung_task``: a task the kernel saw stuck, code ``blocked`` (``INFO: task python3:15277 blocked for more
  than 122 seconds.``: uninterruptible sleep in the kernel) or ``soft_lockup`` (``watchdog: BUG: soft lockup -
  CPU#7 stuck for 23s! [python3:25222]``), warning; ``detail`` pid, process, seconds;
- ``nfs``: an NFS server the client stopped hearing from, code ``not_responding`` (warning: ``nfs: server
  10.0.0.5 not responding, still trying``; error when it ends ``timed out``: a soft mount gave up) and
  ``ok`` (info: ``nfs: server 10.0.0.5 OK``, what says it answered again); ``detail`` server.

Lines are cut at :data:`MAX_LINE` characters before matching; every pattern is anchored on a literal
and uses possessive quantifiers (``regex`` module), so matching stays linear in the line length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

import regex

from topodoc.parsers.xid_catalog import CATALOG_URL, lookup

MAX_LINE = 4096
SEVERITIES = ("info", "warning", "error", "critical")

_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_TIME = regex.compile(
    r"^(?:\d++,\d++,(?P<kmsg>\d++),[^;]{0,40}+;"  # /dev/kmsg: prio,seq,usec,flags;
    r"|\[(?P<tdmesg>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]"  # dmesg -T
    r"|(?P<journal>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S++ kernel:"  # journalctl -k (short)
    r"|(?P<iso>\d{4}-\d\d-\d\dT[0-9:.,+\-]++)(?: \S++)? kernel:"  # journalctl -o short-iso
    r"|kern\s*+:\s*+\w++\s*+:\s*+(?P<x>\d{4}-\d\d-\d\dT[0-9:.,+\-]++)?)?+"  # dmesg -x --time-format iso
    r"\s*+(?:\[\s*+(?P<uptime>\d++\.\d++)\])?"
)
_XID = regex.compile(
    r"NVRM: Xid \((?:PCI:)?+(?P<pci>[0-9a-fA-F:.]{4,20}+)\): (?P<code>\d{1,5}+),\s*+(?P<rest>.*+)"
)
_PID = regex.compile(r"pid=(?P<pid>'?<?[\w]{1,12}+>?'?), name=(?P<name>[^,]{0,64}+),\s*+")
_SXID = regex.compile(
    r"(?P<sw>nvidia-nvswitch\d{1,3}+): SXid \((?:PCI:)?+(?P<pci>[0-9a-fA-F:.]{4,20}+)\): "
    r"(?P<code>\d{1,6}+),\s*+"
    r"(?P<rest>.*+)"
)
_NVRM_GPU = regex.compile(r"NVRM: The NVIDIA GPU (?P<pci>" + _BDF + r")")
_NVRM_INIT = regex.compile(r"NVRM: GPU (?P<pci>" + _BDF + r"): (?P<rest>RmInitAdapter failed.*+)")
_AER = regex.compile(
    r"(?P<port>" + _BDF + r"): AER: (?P<multi>Multiple )?+"
    r"(?P<sev>Corrected|Correctable|Uncorrected \((?:Non-)?+Fatal\)|Uncorrectable \((?:Non-)?+Fatal\))"
    r" error (?:message )?+received(?::| from)?+ ?+(?:id=[0-9a-fx]{1,8}+)?+"
    r"(?P<src>" + _BDF + r")?+"
)
_AER_DETAIL = regex.compile(
    r"(?P<dev>" + _BDF + r"): (?:AER: )?+PCIe Bus Error: severity=(?P<sev>[A-Za-z() \-]{1,40}+), "
    r"type=(?P<type>[A-Za-z ]{1,40}+)"
)
_DMAR = regex.compile(
    r"DMAR: \[(?P<op>DMA (?:Read|Write)|INTR-REMAP)(?: NO_PASID)?+\] "
    r"Request device \[(?P<dev>[0-9a-fx:.]{4,24}+)\]"
    r"(?: PASID \w{1,8}+)?+ fault (?:addr|index) (?:0x)?+(?P<addr>[0-9a-f]{1,16}+)"
    r"(?: \[fault reason (?:0x)?+(?P<reason>[0-9a-f]{1,4}+)\] ?+(?P<why>.{0,120}+))?+"
)
_AMDVI = regex.compile(
    r"(?:(?P<pre>" + _BDF + r"): AMD-Vi: Event logged \[)?+IO_PAGE_FAULT "
    r"(?:device=(?P<dev>[0-9a-fA-F:.]{4,16}+) )?+"
    r"domain=(?P<domain>0x[0-9a-f]{1,8}+) address=(?P<addr>0x[0-9a-f]{1,16}+)"
    r"(?: flags=(?P<flags>0x[0-9a-f]{1,8}+))?+"
)
_DRIVER = regex.compile(
    r"\b(?P<drv>mlx5_core|efa)(?: (?P<dev>" + _BDF + r"))?+(?: (?P<ibdev>\w{1,32}+))?+: (?P<rest>.*+)"
)
# a driver line that says something failed
_DRIVER_ERROR = regex.compile(
    r"fail|error|syndrome|health|fatal|timeout|assert|unrecover|\bERR\b|not responding", regex.IGNORECASE
)
# a driver line worth reading: one of those, or a port or module state the rules read
_DRIVER_BAD = regex.compile(
    _DRIVER_ERROR.pattern + r"|link down|link up|link active|unplugged|high temperature", regex.IGNORECASE
)
# in lower case, a line matching _DRIVER_BAD holds one of these ("err" for "error" and "\bERR\b")
_BAD_WORDS = ("fail", "err", "syndrome", "health", "fatal", "timeout", "assert", "unrecover", "link down",
              "not responding", "link up", "link active", "unplugged", "high temperature")
# mlx5's port state: the netdev's "Link up"/"Link down" (mlx5e), the RDMA port's "Port: 1 Link ACTIVE"
_LINK_STATE = regex.compile(r"(?:Port: ?+\d{1,3}+ )?+Link (?P<state>up|down|DOWN|ACTIVE)\b")
# mlx5's port module (cable, transceiver) events: "Port module event: module 0, Cable unplugged",
# "Port module event[error]: module 0, Cable error, High Temperature"
_MODULE_EVENT = regex.compile(r"Port module event(?P<error>\[error\])?+: module (?P<module>\d{1,3}+), "
                              r"(?P<status>[^,]{1,40}+)(?:, (?P<why>.{1,80}+))?+")
_PROBE_FAIL = regex.compile(
    r"\b(?P<drv>mlx5_core|efa): probe of (?P<dev>" + _BDF + r") failed with error (?P<err>-?\d++)"
)
_BANDWIDTH = regex.compile(
    r"(?P<dev>" + _BDF + r"): (?P<avail>[\d.]{1,10}+ [GM]b/s) available PCIe bandwidth, limited by "
    r"(?P<speed>[\d.]{1,6}+ GT/s) PCIe x(?P<width>\d{1,2}+) link at (?P<at>" + _BDF + r")"
    r"(?: \(capable of (?P<cap>[\d.]{1,10}+ [GM]b/s) with (?P<cspeed>[\d.]{1,6}+ GT/s) "
    r"PCIe x(?P<cwidth>\d{1,2}+) link\))?+"
)


@dataclass(frozen=True)
class KernelEvent:
    """One kernel-log line that reports a hardware or driver event.

    ``kind`` (see the module docstring), ``line`` (1-based in the input), ``time`` as the log printed it
    (uptime seconds, a date, or ``None``), ``device`` the canonical PCI address it is about (``None``
    when the line names none), ``code`` (Xid/SXid number, AER class, IOMMU fault reason...),
    ``severity`` (info/warning/error/critical), ``message`` a one-line explanation, ``action`` the usual
    remedy where one is catalogued, ``detail`` further fields as ``(name, value)`` pairs, ``repeats`` how
    many lines of the input this event stands for: 1, or on the last event kept of a group
    (:class:`Kept`) 1 + the lines of that group read after it and not kept; ``last_line`` on that event
    the line of the last of them (``None``: no line of its group was read after it).
    """

    kind: str
    line: int
    text: str
    time: str | None
    device: str | None
    code: str | None
    severity: str
    message: str
    action: str | None = None
    detail: tuple[tuple[str, str], ...] = ()
    repeats: int = 1
    last_line: int | None = None


# a line can report an event only if it holds one of these (each parser's own literal; "fallen off the
# bus" ends the multi-line GPU-lost message; efa is followed by a space or a colon in both of its
# patterns): a whole text is searched for them, one str.find pass each,
# and only the lines they are on are read (a 50 MB dmesg is mostly other drivers' lines)
_RARE_LITERALS = ("NVRM: ", ": SXid (", ": AER: ", "PCIe Bus Error: severity=", "DMAR: [", "IO_PAGE_FAULT",
                  "available PCIe bandwidth", "fallen off the bus", "Killed process ", "oom-kill:",
                  ": Kill process ", "peer_mem", " blocked for more than ", "soft lockup", "nfs: server ",
                  " killed as a result of limit of ")
_DRIVER_LITERALS = ("mlx5_c", "efa ", "efa:")  # _driver and _mlx5_cmd: each needs _DRIVER_BAD on the line too
_LITERALS = _RARE_LITERALS + _DRIVER_LITERALS
# str.splitlines() ends lines at these besides "\n"; a text holding one is read line by line
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _other_breaks(text: str) -> bool:
    return any(char in text for char in _OTHER_BREAKS)  # (one fast scan per character)


def parse(source: str | Iterable[str]) -> list[KernelEvent]:
    """Every event in ``source`` (a whole text or an iterable of lines), in input order, within the bounds
    of :class:`Kept` (each event's ``repeats`` says how many lines it stands for)."""
    if isinstance(source, str):
        reader = Reader()
        reader.feed(source)
        return reader.events
    kept = Kept()
    _events(enumerate(source, 1), kept)
    return kept.result()


PER_GROUP = 8  # events kept of one group: (kind, device, code, severity, and an NFS event's server)
MAX_EVENTS = 20_000  # events kept in all


class Kept:
    """The events of a kernel log within bounds, whatever its length: of each group -- same ``kind``,
    ``device``, ``code`` and ``severity`` -- the first :data:`PER_GROUP` events, the group's later lines
    counted in the ``repeats`` of the last of them; at most :data:`MAX_EVENTS` events in all, the lines of a
    group first seen past them counted in ``overflow`` only (a group seen before keeps counting its lines
    on its last event). What the rules read is unchanged below :data:`MAX_EVENTS` groups: a group's first
    lines (their evidence) in order, its severities, and its lines (the sum of ``repeats``)."""

    def __init__(self) -> None:
        self.events: list[KernelEvent] = []  # kept, in input order
        self.overflow = 0  # lines of groups first seen past MAX_EVENTS events
        # key -> [events kept, index of the last, lines past it, the line of the last of those]
        self._groups: dict[tuple, list[int]] = {}

    def add(self, event: KernelEvent) -> None:
        key = (event.kind, event.device, event.code, event.severity, _subject(event))
        group = self._groups.get(key)
        full = len(self.events) >= MAX_EVENTS
        if group is None:
            if full:
                self.overflow += event.repeats
                return
            self._groups[key] = [1, len(self.events), 0, 0]
            self.events.append(event)
        elif group[0] < PER_GROUP and not full and not group[2]:
            group[0] += 1
            group[1] = len(self.events)
            self.events.append(event)
        else:
            group[2] += event.repeats
            group[3] = event.last_line or event.line

    def result(self) -> list[KernelEvent]:
        """The events kept, each group's last carrying the lines counted past it."""
        events = list(self.events)
        for _kept, last, more, line in self._groups.values():
            if more:
                events[last] = replace(events[last], repeats=events[last].repeats + more, last_line=line)
        return events

    def notes(self) -> tuple[str, ...]:
        if not self.overflow:
            return ()
        return (f"{self.overflow} kernel-log event line(s) not read: they came after {MAX_EVENTS} events "
                "were kept, in groups (kind, device, code) not seen before them",)


def _subject(event: KernelEvent) -> str | None:
    """What, besides its device, tells one group of ``event``'s kind from another: an NFS event's server."""
    return next((v for k, v in event.detail if k == "server"), None) if event.kind == "nfs" else None


class Reader:
    """:func:`parse` of a text given a piece at a time: :meth:`feed` each piece (whole lines, each piece
    but the last ending with a newline, as :func:`topodoc.inputs.iter_text` yields them); ``events`` is
    then what :func:`parse` of the pieces joined returns, and ``lines`` how many lines it numbered. Only
    the events kept (:class:`Kept`) are held, never the text."""

    def __init__(self) -> None:
        self.kept = Kept()
        self.lines = 0
        self._pending: list[str | None] = [None]

    @property
    def events(self) -> list[KernelEvent]:
        return self.kept.result()

    def feed(self, piece: str) -> None:
        # parse(text) numbers the lines of str.splitlines() when the text holds one of its other breaks
        # anywhere, else reads only the "\n" lines holding a literal: the two agree on a piece holding
        # none, so each piece is read the one way or the other, its lines numbered after the last piece's
        if _other_breaks(piece):
            lines = piece.splitlines()
            _events(enumerate(lines, self.lines + 1), self.kept, self._pending)
            self.lines += len(lines)
        else:
            _events(_candidates(piece, self.lines + 1), self.kept, self._pending)
            self.lines += piece.count("\n")


def _candidates(text: str, first: int = 1) -> Iterable[tuple[int, str]]:
    """(line number, line) of the lines of ``text`` (lines end at "\n" only, the first numbered
    ``first``) that hold a literal of :data:`_LITERALS`, in order; every other line reports nothing
    (:func:`parse_line` and the GPU-lost pair read nothing in it). Of the lines holding only a driver's
    name (:data:`_DRIVER_LITERALS`: a big dmesg may hold one on every fourth line), only those holding a
    word of ``_DRIVER_BAD`` too: the driver's two parsers read nothing in the others."""
    starts: set[int] = set()
    for literal in _RARE_LITERALS:
        _line_starts(text, text, literal, starts)
    if text.isascii():  # (ASCII: a case-insensitive match of an ASCII word is a match in text.lower())
        lowered, bad = text.lower(), set()
        for word in _BAD_WORDS:
            _line_starts(lowered, text, word, bad)
        for start in bad - starts:
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if any(text.find(literal, start, end) >= 0 for literal in _DRIVER_LITERALS):
                starts.add(start)
    else:
        for literal in _DRIVER_LITERALS:
            _line_starts(text, text, literal, starts)
    number, pos = first, 0
    for start in sorted(starts):
        number += text.count("\n", pos, start)
        pos = start
        end = text.find("\n", start)
        yield number, text[start:] if end < 0 else text[start:end]


def _line_starts(text: str, lines: str, literal: str, starts: set[int]) -> None:
    """Add to ``starts`` where each line of ``lines`` that holds ``literal`` in ``text`` starts (``text``
    is ``lines`` or of its length, "\n" at the same places)."""
    at = text.find(literal)
    while at >= 0:
        starts.add(lines.rfind("\n", 0, at) + 1)
        end = lines.find("\n", at)
        if end < 0:
            break
        at = text.find(literal, end + 1)


def _events(lines: Iterable[tuple[int, str]], kept: Kept, pending: list[str | None] | None = None) -> None:
    """Add the events of ``lines`` to ``kept``; ``pending[0]``: the GPU of an "NVRM: The NVIDIA GPU X" line
    whose "fallen off the bus" may follow (kept from one call to the next)."""
    pending = [None] if pending is None else pending
    pending_gpu = pending[0]
    add = kept.add
    for lineno, raw in lines:
        line = raw[:MAX_LINE].rstrip("\r\n")
        if pending_gpu and "fallen off the bus" in line:
            add(_gpu_lost(line, lineno, pending_gpu))
            pending_gpu = None
            continue
        found = _NVRM_GPU.search(line) if "NVRM: The NVIDIA GPU" in line else None
        if found:
            pending_gpu = _pci(found["pci"])
            if "fallen off the bus" in line:
                add(_gpu_lost(line, lineno, pending_gpu))
                pending_gpu = None
            continue
        event = parse_line(line, lineno)
        if event is not None:
            add(event)
    pending[0] = pending_gpu


def parse_line(line: str, lineno: int = 1) -> KernelEvent | None:
    """The event one line reports, or ``None`` for any other line."""
    line = line[:MAX_LINE].rstrip("\r\n")
    for literal, parser in _PARSERS:
        if literal in line:
            event = parser(line, lineno)
            if event is not None:
                return event
    return None


def _time(line: str) -> str | None:
    found = _TIME.match(line)
    if not found:
        return None
    for name in ("uptime", "tdmesg", "iso", "x", "journal"):
        if found[name]:
            return found[name]
    return f"{int(found['kmsg']) / 1e6:.6f}" if found["kmsg"] else None


@lru_cache(maxsize=4096)  # (a log repeats a few addresses on every line: a third of an Xid line's cost)
def _pci(text: str | None, *, segment: bool = True) -> str | None:
    """Canonical address; NVRM prints ``0000:cb:00`` (no function): function 0 is meant."""
    from topodoc.pciaddr import try_normalize

    if text is None:
        return None
    text = text.lower().replace("0x", "")
    if text.count(":") == 2 and "." not in text:
        text += ".0"
    return try_normalize(text)


def _event(kind: str, line: str, lineno: int, **fields) -> KernelEvent:
    return KernelEvent(kind=kind, line=lineno, text=line.strip(), time=_time(line), **fields)


def _xid(line: str, lineno: int) -> KernelEvent | None:
    found = _XID.search(line)
    if not found:
        return None
    code = int(found["code"])
    rest = found["rest"]
    detail: list[tuple[str, str]] = []
    who = _PID.match(rest)
    if who:
        detail += [("pid", who["pid"].strip("'")), ("process", who["name"])]
        rest = rest[who.end():]
    info = lookup(code)
    if info is None:
        message = f"Xid {code}: not in topodoc's catalogue; see {CATALOG_URL}"
        severity, action = "error", None
    else:
        message = f"Xid {code} ({info.name}): {info.meaning}"
        severity, action = info.policy_severity, info.action
        detail.append(("nvlink", "yes" if info.nvlink else "no"))
        if info.source != CATALOG_URL:  # the operator's policy file set this Xid's severity or action
            detail.append(("policy", info.source))
    if info is not None and info.severity:
        pass  # the operator's policy names the severity: the driver's wording does not change it
    elif "Fatal" in rest and "Nonfatal" not in rest and "Non-fatal" not in rest:
        severity = "critical"
    elif ("Nonfatal" in rest or "Non-fatal" in rest) and info is not None and info.nvlink:
        severity = "warning"
    detail.append(("driver_text", rest.strip()[:300]))
    return _event("xid", line, lineno, device=_pci(found["pci"]), code=str(code), severity=severity,
                  message=message, action=action, detail=tuple(detail))


def _sxid(line: str, lineno: int) -> KernelEvent | None:
    found = _SXID.search(line)
    if not found:
        return None
    rest = found["rest"]
    lowered = rest.lower()
    if lowered.startswith("non-fatal") or "non-fatal" in lowered[:20]:
        severity = "warning"
    elif lowered.startswith("fatal") or ", fatal" in lowered[:20]:
        severity = "critical"
    else:
        severity = "info"  # the "Data {...}" and "Severity 0 Engine instance" continuation lines
    message = f"NVSwitch SXid {found['code']} on {found['sw']}: {rest.strip()[:200]}"
    return _event("sxid", line, lineno, device=_pci(found["pci"]), code=found["code"], severity=severity,
                  message=message, action="reset_gpu" if severity == "critical" else None,
                  detail=(("switch", found["sw"]),))


def _gpu_lost(line: str, lineno: int, device: str | None) -> KernelEvent:
    return _event("gpu_lost", line, lineno, device=device, code="79", severity="critical",
                  message="the GPU has fallen off the bus and does not respond (the driver printed no Xid; "
                          "same meaning as Xid 79)", action="drain_node")


def _nvrm_init(line: str, lineno: int) -> KernelEvent | None:
    found = _NVRM_INIT.search(line)
    if not found:
        return None
    return _event("nvrm", line, lineno, device=_pci(found["pci"]), code="RmInitAdapter", severity="error",
                  message="the NVIDIA driver failed to initialise this GPU", action="reset_gpu")


_AER_CODES = {"corrected": ("corrected", "warning"), "correctable": ("corrected", "warning"),
              "uncorrected (non-fatal)": ("uncorrected_nonfatal", "error"),
              "uncorrectable (non-fatal)": ("uncorrected_nonfatal", "error"),
              "uncorrected (fatal)": ("uncorrected_fatal", "critical"),
              "uncorrectable (fatal)": ("uncorrected_fatal", "critical")}


def _aer(line: str, lineno: int) -> KernelEvent | None:
    found = _AER.search(line)
    if not found:
        return None
    code, severity = _AER_CODES[found["sev"].lower()]
    port = _pci(found["port"])
    source = _pci(found["src"]) or port
    what = "corrected (the link retried; the data is intact)" if code == "corrected" else (
        "uncorrected: a transaction was lost; the device below may need a reset")
    return _event("aer", line, lineno, device=source, code=code, severity=severity,
                  message=f"PCIe AER {what}", action=None if code == "corrected" else "reset_gpu",
                  detail=(("port", port or ""), ("multiple", "yes" if found["multi"] else "no")))


def _aer_detail(line: str, lineno: int) -> KernelEvent | None:
    found = _AER_DETAIL.search(line)
    if not found:
        return None
    sev = found["sev"].strip().lower()
    code, severity = _AER_CODES.get(sev, ("unknown", "warning"))
    return _event("aer_detail", line, lineno, device=_pci(found["dev"]), code=code, severity=severity,
                  message=f"PCIe Bus Error: {found['sev'].strip()}, {found['type'].strip()}",
                  detail=(("type", found["type"].strip()),))


def _dmar(line: str, lineno: int) -> KernelEvent | None:
    found = _DMAR.search(line)
    if not found:
        return None
    device = _pci(found["dev"].replace("0x", ""))
    reason = found["reason"]
    why = (found["why"] or "").strip()
    return _event("iommu", line, lineno, device=device, code=f"dmar-{reason}" if reason else "dmar",
                  severity="error",
                  message=f"Intel IOMMU (DMAR) fault on a {found['op']}: {why or 'no reason'}"
                          " — the device used an address the IOMMU does not map for it",
                  detail=(("address", "0x" + found["addr"]), ("segment", "assumed 0000 (DMAR prints none)")))


def _amdvi(line: str, lineno: int) -> KernelEvent | None:
    if "IO_PAGE_FAULT" not in line:
        return None
    found = _AMDVI.search(line)
    if not found:
        return None
    device = _pci(found["pre"]) or _pci(found["dev"])
    return _event("iommu", line, lineno, device=device, code="amd-vi-io-page-fault", severity="error",
                  message="AMD IOMMU IO_PAGE_FAULT: the device used an address the IOMMU does not map for it",
                  detail=(("address", found["addr"]), ("domain", found["domain"]),
                          ("flags", found["flags"] or "")))


def _driver(line: str, lineno: int) -> KernelEvent | None:
    if "mlx5_core" not in line and "efa" not in line:
        return None
    if not _DRIVER_BAD.search(line):
        # each event below needs a word of _DRIVER_BAD in the line: the probe's "failed", or one in the
        # driver's text, a suffix of the line after ": " (so a match there is one here)
        return None
    probe = _PROBE_FAIL.search(line)
    if probe:
        kind = "mlx5" if probe["drv"] == "mlx5_core" else "efa"
        return _event(kind, line, lineno, device=_pci(probe["dev"]), code=f"probe{probe['err']}",
                      severity="error",
                      message=f"{probe['drv']} failed to bind the device (error {probe['err']})")
    if "mlx5_core" not in line and "efa" not in line:
        return None
    found = _DRIVER.search(line)
    if not found or not _DRIVER_BAD.search(found["rest"]):
        return None
    kind = "mlx5" if found["drv"] == "mlx5_core" else "efa"
    rest = found["rest"].strip()
    coded = _driver_code(rest)
    if coded is None:
        return None
    code, severity = coded
    detail = (("name", found["ibdev"]),) if found["ibdev"] else ()
    module = _MODULE_EVENT.match(rest) if code.startswith("module") else None
    if module is not None:
        detail += (("module", module["module"]), ("status", module["status"]))
        detail += (("error", module["why"].strip()),) if module["why"] else ()
    who = f"{found['drv']} {found['ibdev']}" if found["ibdev"] else found["drv"]
    return _event(kind, line, lineno, device=_pci(found["dev"]), code=code, severity=severity,
                  message=f"{who}: {rest[:200]}", detail=detail)


_HEALTH = regex.compile(r"health compromised|irisc not responding|fw_fatal|firmware fatal|FW fatal|"
                        r"internal error \(\d", regex.IGNORECASE)
_HEALTH_DUMP = regex.compile(r"^(?:assert_var\[\d{1,2}+\]|assert_exit_ptr|assert_callra|ext_synd)(?:\s|$)")


def _driver_code(rest: str) -> tuple[str, str] | None:
    """The mlx5/EFA line's code and severity: a port going down (warning) or coming up (info: what says it
    came back), a cable module's error (error) or removal (warning), the adapter's temperature warning,
    the health poller's verdict (the adapter's firmware stopped answering: critical), the register dump
    that follows it (info: part of the same event), any other failure (error); ``None`` for a line that
    says none of these (a state word inside another text)."""
    link = _LINK_STATE.match(rest)
    if link is not None:
        return ("link_down", "warning") if link["state"] in ("down", "DOWN") else ("link_up", "info")
    module = _MODULE_EVENT.match(rest)
    if module is not None and (module["error"] or "unplugged" in module["status"].lower()):
        return ("module_error", "error") if module["error"] else ("module_unplugged", "warning")
    if rest.startswith("High temperature on sensors"):
        return "temperature", "warning"
    if not _DRIVER_ERROR.search(rest):
        return None
    if _HEALTH.search(rest):
        return "health", "critical"
    if _HEALTH_DUMP.match(rest):
        return "health_dump", "info"
    return "error", "error"


def _mlx5_cmd(line: str, lineno: int) -> KernelEvent | None:
    """``mlx5_cmd_check:810:(pid 923941): create_mkey(0x200) ... failed, status ..., syndrome (...)``
    printed without a device name by some kernels."""
    if "mlx5_cmd_check" not in line or "failed" not in line or "mlx5_core " in line:
        return None
    return _event("mlx5", line, lineno, device=None, code="cmd_failed", severity="error",
                  message="mlx5 firmware command failed: " + line.split("mlx5_cmd_check", 1)[1][:200])


def _bandwidth(line: str, lineno: int) -> KernelEvent | None:
    if "available PCIe bandwidth" not in line:
        return None
    found = _BANDWIDTH.search(line)
    if not found:
        return None
    capable = ""
    if found["cap"]:
        capable = f" (capable of {found['cap']} with {found['cspeed']} PCIe x{found['cwidth']})"
    at = _pci(found["at"])
    return _event("pcie_bandwidth", line, lineno, device=_pci(found["dev"]), code="limited",
                  severity="warning",
                  message=f"{found['avail']} available: limited by the {found['speed']} x{found['width']} "
                          f"link at {at}{capable}",
                  detail=(("limited_at", _pci(found["at"]) or ""), ("speed", found["speed"]),
                          ("width", found["width"])))


# each parser after a literal its pattern needs (a line without it is not searched): ``""`` for those that
# check their own
_OOM_KILLED = regex.compile(
    r"(?:(?P<why>Out of memory|Memory cgroup out of memory): )?+Killed process (?P<pid>\d{1,10}+)"
    r"(?:, UID \d{1,10}+,)?+(?: \((?P<comm>.{0,64}?)\)(?=[,. ]|$))?+(?P<rest>.{0,400}+)"
)
# the older kernels' cgroup line before a kill: "Task in /kubepods/pod1/c1 killed as a result of limit of
# /kubepods/pod1"
_OOM_TASK_IN = regex.compile(r"Task in (?P<memcg>\S{1,300}+) killed as a result of limit of "
                             r"(?P<limit>\S{1,300}+)")
# the older kernels' first line of a kill: "Memory cgroup out of memory: Kill process 62685 (bash) score 0 or
# sacrifice child" (the process chosen; the one killed, in the "Killed process" line after it, may be a child)
_OOM_CHOSE = regex.compile(r"(?P<why>Out of memory|Memory cgroup out of memory): Kill process "
                           r"(?P<pid>\d{1,10}+) \((?P<comm>.{0,64}?)\) score")
_ANON_RSS = regex.compile(r"anon-rss:(?P<kb>\d[\d,]{0,20}+)kB")  # (some kernels group the digits with commas)
_OOM_CONSTRAINT = regex.compile(r"oom-kill:constraint=(?P<constraint>\w{1,32}+)(?P<rest>.{0,1000}+)")
_OOM_FIELD = regex.compile(r",(?P<key>task_memcg|task|pid)=(?P<value>[^,]{0,300}+)")


def _oom_killed(line: str, lineno: int) -> KernelEvent | None:
    """``Out of memory: Killed process 2481 (python3) total-vm:..., anon-rss:...kB, ...`` (or ``Memory
    cgroup out of memory: ...``, or the older line without the cause): the kernel killed a process to free
    memory. Its scope (the node's memory or a cgroup's limit) is the cause's, when the line prints one."""
    found = _OOM_KILLED.search(line)
    if found is None:
        return None
    rss = _ANON_RSS.search(found["rest"])
    anon = {"kb": rss["kb"].replace(",", "")} if rss is not None else None
    scope = {"Out of memory": "node", "Memory cgroup out of memory": "cgroup"}.get(found["why"] or "")
    comm = found["comm"] if found["comm"] is not None else "?"  # (a line cut after "Killed process N (")
    detail = (("pid", found["pid"]), ("process", comm))
    detail += (("anon_rss_kb", anon["kb"]),) if anon else ()
    detail += (("scope", scope),) if scope else ()
    held = f", which held {_size_kb(int(anon['kb']))} of anonymous memory" if anon else ""
    where = {"node": " (not a cgroup's limit: the memory the kernel could give it ran out)",
             "cgroup": " (its memory cgroup reached its limit)"}
    return _event("oom", line, lineno, device=None, code="killed", severity="error",
                  message=f"the kernel's OOM killer killed pid {found['pid']} ({comm}){held}"
                          f"{where.get(scope or '', '')}",
                  detail=detail)


def _size_kb(kb: int) -> str:
    if kb < 2**10:
        return f"{kb} kB"
    return f"{kb / 2**20:.1f} GiB" if kb >= 2**20 else f"{kb / 2**10:.0f} MiB"


def _oom_constraint(line: str, lineno: int) -> KernelEvent | None:
    """``oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=...,task_memcg=...,task=python3,pid=2481,...``:
    which memory ran out (``global_oom``: the node's; ``oom_memcg=``: a cgroup's limit) and the cgroup
    of the process it chose."""
    found = _OOM_CONSTRAINT.search(line)
    task_in = _OOM_TASK_IN.search(line) if found is None else None
    if task_in is not None:
        return _event("oom", line, lineno, device=None, code="constraint", severity="info",
                      message=f"OOM kill context: the limit of {task_in['limit']}",
                      detail=(("memcg", task_in["memcg"]), ("scope", "cgroup"), ("limit", task_in["limit"])))
    if found is None:
        chose = _OOM_CHOSE.search(line)
        if chose is None:
            return None
        scope = "cgroup" if chose["why"].startswith("Memory cgroup") else "node"
        return _event("oom", line, lineno, device=None, code="constraint", severity="info",
                      message=f"OOM kill context: {chose['why']}, pid {chose['pid']} ({chose['comm']})",
                      detail=(("pid", chose["pid"]), ("task", chose["comm"]), ("scope", scope)))
    fields = {m["key"]: m["value"] for m in _OOM_FIELD.finditer(found["rest"])}
    scope = "node" if ",global_oom" in found["rest"] else "cgroup" if ",oom_memcg=" in found["rest"] else None
    detail = (("constraint", found["constraint"]),) + tuple(
        (name, fields[key]) for key, name in (("pid", "pid"), ("task", "task"), ("task_memcg", "memcg"))
        if key in fields
    ) + ((("scope", scope),) if scope else ())
    return _event("oom", line, lineno, device=None, code="constraint", severity="info",
                  message=f"OOM kill context: {found['constraint']}", detail=detail)


_PEERMEM = regex.compile(
    r"\b(?P<module>nvidia_peermem|nv_peer_mem): (?:Unknown symbol (?P<missing>\w{1,80}+) "
    r"\(err (?P<err>-?\d{1,4}+)\)|disagrees about version of symbol (?P<version>\w{1,80}+))"
)


def _peermem(line: str, lineno: int) -> KernelEvent | None:
    """``nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)`` and the ``disagrees about
    version of symbol`` line before it: the GPU peer-memory module was not loaded."""
    found = _PEERMEM.search(line)
    if found is None:
        return None
    symbol = found["missing"] or found["version"]
    code = "ib_core" if symbol.startswith(("ib_", "rdma_")) else "nvidia" if symbol.startswith("nvidia_") \
        else "symbol"
    # (-22, EINVAL: the kernel found the symbol and refused its version, the line before says so)
    why = "version" if found["version"] or found["err"] == "-22" else "missing"
    detail = (("module", found["module"]), ("symbol", symbol), ("why", why))
    detail += (("err", found["err"]),) if found["err"] else ()
    what = (f"the loaded {symbol} is not the one it was built against" if why == "version"
            else f"no loaded module exports {symbol}")
    return _event("peermem", line, lineno, device=None, code=code, severity="error",
                  message=f"{found['module']} did not load: {what}", detail=detail)


_HUNG = regex.compile(r"INFO: task (?P<comm>.{1,64}?):(?P<pid>\d{1,10}+) blocked for more than "
                      r"(?P<secs>\d{1,7}+) seconds")
_LOCKUP = regex.compile(r"soft lockup - CPU#(?P<cpu>\d{1,5}+) stuck for (?P<secs>\d{1,7}+)s! "
                        r"\[(?P<comm>.{1,64}?):(?P<pid>\d{1,10}+)\]")


def _hung_task(line: str, lineno: int) -> KernelEvent | None:
    """``INFO: task python3:15277 blocked for more than 122 seconds.`` (the hung-task detector: the task sat
    in uninterruptible sleep, in the kernel) and ``watchdog: BUG: soft lockup - CPU#7 stuck for 23s!
    [python3:25222]`` (a CPU kept in the kernel)."""
    found = _HUNG.search(line)
    if found is not None:
        return _event("hung_task", line, lineno, device=None, code="blocked", severity="warning",
                      message=f"task {found['comm']} (pid {found['pid']}) was blocked in the kernel for more "
                              f"than {found['secs']} s",
                      detail=(("pid", found["pid"]), ("process", found["comm"]), ("seconds", found["secs"])))
    found = _LOCKUP.search(line)
    if found is not None:
        return _event("hung_task", line, lineno, device=None, code="soft_lockup", severity="warning",
                      message=f"CPU {found['cpu']} was stuck in the kernel for {found['secs']} s running "
                              f"{found['comm']} (pid {found['pid']})",
                      detail=(("pid", found["pid"]), ("process", found["comm"]), ("seconds", found["secs"])))
    return None


_NFS = regex.compile(r"\bnfs: server (?P<server>[^\s,]{1,255}+) "
                     r"(?P<state>not responding, (?P<how>still trying|timed out)|OK)\b")


def _nfs(line: str, lineno: int) -> KernelEvent | None:
    """``nfs: server 10.0.0.5 not responding, still trying`` (a hard mount waits: every process reading or
    writing through it blocks), ``..., timed out`` (a soft mount gave up: the I/O failed) and ``nfs: server
    10.0.0.5 OK`` (it answered again)."""
    found = _NFS.search(line)
    if found is None:
        return None
    server = found["server"]
    if found["state"] == "OK":
        return _event("nfs", line, lineno, device=None, code="ok", severity="info",
                      message=f"NFS server {server} answered again", detail=(("server", server),))
    gave_up = found["how"] == "timed out"
    return _event("nfs", line, lineno, device=None, code="not_responding",
                  severity="error" if gave_up else "warning",
                  message=f"NFS server {server} stopped answering"
                          + (": the mount gave up, the I/O failed" if gave_up
                             else ": processes reading or writing through the mount wait"),
                  detail=(("server", server),))


_PARSERS = (("NVRM: Xid (", _xid), (": SXid (", _sxid), ("NVRM: GPU ", _nvrm_init), (": AER: ", _aer),
            ("PCIe Bus Error: severity=", _aer_detail), ("DMAR: [", _dmar), ("", _amdvi), ("", _bandwidth),
            ("Killed process ", _oom_killed), ("oom-kill:", _oom_constraint),
            (": Kill process ", _oom_constraint), (" killed as a result of limit of ", _oom_constraint),
            ("peer_mem", _peermem),
            (" blocked for more than ", _hung_task), ("soft lockup", _hung_task), ("nfs: server ", _nfs),
            ("", _mlx5_cmd), ("", _driver))
