"""The one diagnosis: inputs -> facts -> ``evaluate`` -> report, for every door.

``topodoc diagnose`` (both forms), the Python API (``topodoc.diagnose``), the agent's cycle and its log
watcher call :func:`run`; commands parse options and render, nothing else. A :class:`Request` names the
inputs:

- hardware: ``source`` (``live``, a recording, ``example:NAME``) or an already collected ``snapshot`` (the
  agent's probe); this machine is probed when nothing else is given (``live_default``);
- ``files``: pasted texts of any kind, read once by :mod:`topodoc.text.inputs` (through
  :mod:`topodoc.inputs`) and recognized by content, region by region; the hardware they describe becomes
  the partial machine of :mod:`topodoc.text.machine` (over ``source`` when both are given), whose facets
  (``rules.engine.FACETS``) say what the rules may read;
- NCCL logs: ``logs`` paths, an already made ``log_analysis`` (the agent's watched logs), and **every**
  text file: the log analyzer reads each one with the failure catalogue, so a known failure line anywhere in
  any text is evidence, and whatever ``topodoc logs`` reads, ``diagnose FILE`` reads;
- ``nccl_tests``: a path, else the first text input recognized as nccl-tests output;
- ``kernel``: kernel-log events, from ``dmesg`` texts and from the agent's followed kernel log.

:func:`run` never prints and never exits: an input that cannot be used raises :class:`DiagnosisError` (one
line for people, and what each file looked like); a rule or derivation bug is an ``InternalError`` in the
report, as everywhere.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from typing import Any

from topodoc.rules.engine import Facts, InternalError, Report


class DiagnosisError(ValueError):
    """Inputs that cannot be used. ``files``: one row per text input saying what it looked like."""

    def __init__(self, message: str, files: tuple[dict, ...] = ()) -> None:
        super().__init__(message)
        self.files = files


@dataclass(frozen=True, kw_only=True)
class Request:
    source: str | None = None  # live, NAME.tar.gz, example:NAME, a probe JSON or topology XML
    snapshot: Any = None  # a model.Snapshot already collected (the agent's cycle)
    topology: Any = None  # its derived topology, when already derived
    files: tuple[str, ...] = ()  # pasted texts, recognized by content ("-": stdin)
    logs: tuple[str, ...] = ()  # NCCL logs (paths, "-", .gz)
    log_analysis: Any = None  # a LogAnalysis already made (the agent's watched logs)
    nccl_tests: str | None = None  # nccl-tests output (path or "-")
    kernel: tuple = ()  # ((where, KernelEvent), ...) already parsed (the agent's kernel log)
    deadline: float = 60.0  # live probe: NVML calls and commands end after this long
    live_default: bool = True  # probe this machine when no input is given
    rules: tuple | None = None  # a subset of the registry (the agent's log watcher); None: every rule


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    report: Report
    facts: Facts
    inputs: dict  # the "inputs" block of the diagnose document
    machine: Any = None  # the textmachine.TextMachine the texts described, if any

    @property
    def snapshot(self):
        return self.facts.snapshot

    @property
    def topology(self):
        return self.facts.topology

    @property
    def logs(self):
        return self.facts.logs


def run(request: Request) -> Diagnosis:
    """Everything the request's inputs say, judged by every rule (or ``request.rules``)."""
    from topodoc.rules.engine import evaluate

    _one_stdin(request)
    texts = _read_texts(request.files)
    analysis, log_names = _logs(request, texts)
    base = request.snapshot if request.snapshot is not None else _base(request, texts, analysis)
    machine = _machine(texts, analysis, base)
    snapshot = machine.snapshot if machine is not None else base
    if machine is None and request.topology is not None and snapshot is request.snapshot:
        topology, broken = request.topology, None
    else:
        topology, broken = _topology(snapshot)
    tests_name, tests = _nccl_tests(request, texts, snapshot, topology)
    dmesgs = [i for i in texts if i.kind == "dmesg" and i.parsed is not None]
    kernel = tuple(request.kernel) + _recorded_kernel(request) + tuple(
        (i.path, e) for i in dmesgs for e in i.parsed
    )
    known = machine.facets if machine is not None and not machine.has_base else None
    others = _other_texts(texts + _recorded_texts(request))
    facts = Facts(snapshot=snapshot, topology=topology, logs=analysis, nccl_tests=tests,
                  kernel=kernel if kernel or dmesgs else None, texts=others, known=known)
    given = request.source or request.logs or request.nccl_tests
    if texts and not _usable(facts, texts, machine) and not given:
        rows = tuple(_file_row(i, texts, log_names) for i in texts if not i.secondary)
        said = [f"{r['path']}: {r.get('note') or r['taken_as']}" for r in rows]
        # one line for one file; a line per file for several
        text = said[0] if len(said) == 1 else "\n" + "\n".join(f"  {line}" for line in said)
        raise DiagnosisError(f"no input was recognized: {text}", rows)
    rules = request.rules
    if rules is None:
        from topodoc.rules.registry import RULES

        rules = tuple(RULES)
    report = evaluate(facts, rules)
    if machine is not None:
        from topodoc import text

        report = text.cite(report, machine, tuple(dict.fromkeys(i.path for i in texts)))
    if broken is not None:
        report = dataclasses.replace(report, errors=report.errors + (broken,))
    return Diagnosis(report=report, facts=facts, machine=machine,
                     inputs=_summary(request, texts, machine, base, analysis, log_names, tests_name, kernel))


# ---- inputs -------------------------------------------------------------------------------------------


def _one_stdin(request: Request) -> None:
    given = list(request.files) + list(request.logs) + [request.nccl_tests]
    if given.count("-") > 1:
        raise DiagnosisError("stdin (-) can be given once")


def _read_texts(files: tuple[str, ...]) -> list:
    if not files:
        return []
    from topodoc import text

    try:
        return text.read(list(files))
    except text.InputError as err:
        raise DiagnosisError(str(err)) from err


def _base(request: Request, texts: list, analysis) -> Any:
    """The probed or recorded machine: ``source``, else this machine when nothing else was given."""
    nothing_else = not (texts or request.logs or request.log_analysis is not None or request.kernel)
    if request.source is None and not (request.live_default and nothing_else):
        return None
    from topodoc.probe.source import SourceError, load_snapshot

    try:
        return load_snapshot(None if request.source == "live" else request.source, request.deadline)
    except SourceError as err:
        raise DiagnosisError(str(err)) from err


def _recorded_kernel(request: Request) -> tuple:
    """The kernel-log lines a recording kept (NVRM, AER, IOMMU, RDMA), read by the kernel rules as a given
    dmesg would be."""
    if not request.source or request.source == "live":
        return ()
    from topodoc.probe.extras import recorded_kernel_events

    return tuple(recorded_kernel_events(request.source) or ())


def _recorded_texts(request: Request) -> list:
    """The command outputs a recording kept for the rules (Fabric Manager's status: what no collector
    reads), read as the same pastes would be."""
    if not request.source or request.source == "live":
        return []
    from topodoc.probe.extras import recorded_texts

    found = recorded_texts(request.source)
    if not found:
        return []
    from topodoc.text.inputs import parse_text

    return [parse_text(label, output) for label, output in found]


def _machine(texts: list, analysis, base):
    if not texts:
        return None
    from topodoc import text

    return text.build(texts, analysis, base)


def _logs(request: Request, texts: list) -> tuple[Any, tuple[str, ...]]:
    """The NCCL log analysis of ``logs`` and of every text file (the catalogue reads every line of each),
    and the names of the inputs it found NCCL lines or known failures in."""
    items: list = list(request.logs)
    for item in texts:
        if item.secondary or item.kind in _DOCUMENTS:
            continue
        parts = [i for i in texts if i.path == item.path]
        if all(i.kind in _OWN_LINES and not i.mentions_nccl() for i in parts):
            continue  # a dmesg or lspci paste its own parsers read line by line, with no NCCL line in it
        items.append(item.path if item.path != "-" else ("<stdin>", io.BytesIO(item.text.encode("utf-8"))))
    items = list(dict.fromkeys(items))
    if not items:
        return request.log_analysis, ()
    from topodoc import catalogue
    from topodoc.parsers.nccl_log import LogInputError, analyze

    try:
        analysis = analyze(items, catalogue.scan_literals(), require_nccl=False)
    except LogInputError as err:
        raise DiagnosisError(f"cannot read log {err}") from err
    named = {("<stdin>" if n == "-" else n) for n in request.logs}
    if named and not any(s.nccl_lines for s in analysis.inputs if s.name in named) and not analysis.errors:
        raise DiagnosisError(f"no NCCL lines found in {', '.join(sorted(named))}")
    cited = {e.file for e in analysis.errors} | {e.file for e in analysis.benign}
    found = tuple(s.name for s in analysis.inputs if s.nccl_lines or s.name in cited)
    if not found:
        return request.log_analysis, ()
    if request.log_analysis is not None:
        return request.log_analysis, found  # the agent's own analysis is the one its rules read
    return analysis, found


# whole documents the log analyzer has nothing to read in (a probe JSON, XML)
_DOCUMENTS = ("topodoc-json", "nccl-topo-xml", "hwloc-xml", "nvidia-smi-q-xml")
# kinds whose parser reads every line itself; the analyzer reads them only when they hold an NCCL line (a
# 50 MB dmesg's every "failed" line through the failure catalogue cost more than the kernel parser)
_OWN_LINES = ("dmesg", "lspci", "nvidia-smi-q", "ibstat", "ibv-devinfo", "ibdev2netdev", "show-gids",
              "nvlink", "smi-topo")


def _topology(snapshot):
    """The derived topology, or None and an internal-error result when derivation fails."""
    if snapshot is None:
        return None, None
    from topodoc.numbers import LimitError
    from topodoc.topology import derive

    try:
        return derive(snapshot), None
    except LimitError:
        raise  # the input names more than any machine has: one line, exit 2 (cli.py)
    except Exception as err:  # a derivation bug must not hide the rules that need only the snapshot
        return None, InternalError("topology", f"{type(err).__name__}: {err}")


def _nccl_tests(request: Request, texts: list, snapshot, topology) -> tuple[str | None, Any]:
    """nccl-tests output (``--nccl-tests``, else the first text recognized as one) and its comparison with
    the machine's bandwidth model."""
    if request.nccl_tests:
        from topodoc.inputs import InputError, read_text

        try:
            given = read_text(request.nccl_tests)
        except InputError as err:
            raise DiagnosisError(str(err)) from err
        name, text, shown = given.name, given.text, request.nccl_tests
    else:
        found = next((i for i in texts if i.kind == "nccl-tests" and i.parsed is not None), None)
        if found is None:
            return None, None
        name, text, shown = found.path, found.text, found.path
    from topodoc.facts import nccl_tests_input
    from topodoc.parsers.nccl_tests import NcclTestsParseError

    try:
        return shown, nccl_tests_input(name, text, snapshot, topology)
    except NcclTestsParseError as err:
        raise DiagnosisError(f"{name}: {err}") from err


def _other_texts(texts: list) -> tuple | None:
    """Pastes read for the rules as they are (``Facts.texts``): p2p tests, the nvidia-smi table, tracebacks,
    env lists, Fabric Manager logs, setpci, lsmod, ulimit, lspci ..."""
    if not texts:
        return None
    from topodoc.text.inputs import FACT_KINDS

    found = tuple((i.path, i.kind, i.parsed) for i in texts if i.kind in FACT_KINDS and i.parsed is not None)
    return found or None


def _usable(facts: Facts, texts: list, machine) -> bool:
    return bool(
        machine is not None or facts.logs is not None or facts.nccl_tests is not None or facts.kernel
        or facts.texts
        or any(i.kind != "unknown" and i.parsed is not None for i in texts)
    )


# ---- what the diagnosis read ----------------------------------------------------------------------------


def _summary(request: Request, texts: list, machine, base, analysis, log_names, tests_name, kernel) -> dict:
    hardware = _hardware_line(request, texts, machine, base)
    inputs: dict = {"hardware": hardware, "log": _log_line(request, analysis, log_names),
                    "nccl-tests": tests_name}
    if texts or kernel:  # (a kernel log given that holds no event is named too: it was read)
        read = [i.path for i in texts if i.kind == "dmesg" and i.parsed is not None]
        where = dict.fromkeys([w for w, _e in kernel] + read)
        inputs["kernel-log"] = ", ".join(str(w) for w in where) or None
    if texts:
        inputs["files"] = [_file_row(i, texts, log_names) for i in texts if not i.secondary]
        inputs["notes"] = list(machine.notes) if machine is not None else []
    return inputs


def _hardware_line(request: Request, texts: list, machine, base) -> str | None:
    from_text: list[str] = []
    if texts:
        from topodoc.text.inputs import HARDWARE_KINDS

        from_text = list(dict.fromkeys(i.path for i in texts
                                       if i.kind in HARDWARE_KINDS and i.parsed is not None))
    if base is not None and from_text:
        return f"{base.source} + the inputs ({', '.join(from_text)})"
    if machine is not None and base is None:
        gpus, nics = len(machine.snapshot.gpus), len(machine.snapshot.nics)
        if machine.facets and "gpus" not in machine.facets and not gpus and not nics:
            return None
        return f"from the inputs ({gpus} GPU(s), {nics} NIC(s) described; this machine not probed)"
    if base is None:
        return None
    line = base.source
    if not base.gpus:
        # "no findings" must not read as "healthy GPUs" on a machine whose GPUs were never seen
        line += " (no NVIDIA GPU found: the GPU, NVLink and GPU-NIC rules had nothing to check)"
    return line


def _log_line(request: Request, analysis, log_names: tuple[str, ...]) -> str | None:
    names = list(dict.fromkeys(("<stdin>" if n == "-" else n) for n in request.logs)) + [
        n for n in log_names if n not in request.logs]
    names = list(dict.fromkeys(names))
    if analysis is None or not names:
        return None
    s = analysis.summary
    facts = [
        f"{s.nranks} ranks" if s.nranks else "",
        f"{s.nnodes} node(s)" if s.nnodes else "",
        f"NCCL {s.nccl_version}" if s.nccl_version else "",
        f"transport {s.transport}" if s.transport else "",
    ]
    return ", ".join(names) + (f" ({', '.join(f for f in facts if f)})" if any(facts) else "")


def _file_row(item, texts: list, log_names: tuple[str, ...]) -> dict:
    from topodoc.text import title

    name = "<stdin>" if item.path == "-" else item.path
    kind = item.kind
    if kind == "unknown" and name in log_names:
        kind = "nccl-log"  # no detector's marks, but the analyzer found NCCL lines or a known failure
    row = {"path": item.path, "kind": kind, "taken_as": title(kind)}
    also = list(item.also)
    if name in log_names and kind != "nccl-log" and "nccl-log" not in also:
        also.append("nccl-log")  # the log analyzer found NCCL lines or a known failure in it
    if also:
        row["also_contains"] = [title(k) for k in also]
        row["also_read"] = [
            k for k in also if any(s.secondary and s.path == item.path and s.kind == k for s in texts)
            or (k == "nccl-log" and name in log_names)
        ]
    if item.error and not (kind == "nccl-log" and item.kind == "unknown"):
        row["note"] = item.error
    if item.kind == "nccl-log" and name not in log_names:
        row["note"] = "no NCCL line or known failure found in it"
    if item.damaged:
        row["damaged"] = list(item.damaged)
    return row
