"""A :class:`LogAnalysis` for people: a one-line verdict, then short tables, each claim with file:line."""

from __future__ import annotations

import json
from collections import Counter

from topodoc.logmodel import Connection, Evidence, LogAnalysis, LogSummary
from topodoc.parsers.nccl_log.scan import LINE_LIMIT
from topodoc.report.safe import human

_TRANSPORT_NAMES = {
    "IB": "InfiniBand", "RoCE": "RoCE", "EFA": "AWS EFA (libfabric)", "Socket": "TCP sockets",
    "TCPX": "GPUDirect-TCPX", "FastSocket": "Google Fast Socket (TCP, no GPUDirect)",
    "TCPXO": "GPUDirect-TCPXO (FasTrak)", "gIB": "Google gIB",
    "Slingshot": "HPE Slingshot (libfabric cxi)", "IBext": "InfiniBand via the SHARP/IBext plugin",
    "none": "no inter-node network (single node)",
}
MAX_ROWS = 40
MAX_HCAS = 16  # HCA names listed in the verdict line
BIG_TABLE = 128  # --json: longer tables are written one compact row per line (a 16-node job has 128 ranks)


def to_json(data: dict) -> str:
    """The ``--json`` document: ``json.dumps(data, indent=2)``, except that a top-level table longer than
    :data:`BIG_TABLE` rows is written one compact row per line (same keys and values; Python's indenting
    encoder is pure Python and was the slowest step of a big log's report)."""
    if not any(isinstance(v, list) and len(v) > BIG_TABLE for v in data.values()):
        return json.dumps(data, indent=2)
    parts = [f"  {json.dumps(key)}: {_json_value(value)}" for key, value in data.items()]
    return "{\n" + ",\n".join(parts) + "\n}"


def _json_value(value) -> str:
    if isinstance(value, list) and len(value) > BIG_TABLE:
        return "[\n" + ",\n".join(f"    {json.dumps(row)}" for row in value) + "\n  ]"
    return json.dumps(value, indent=2).replace("\n", "\n  ")


@human
def render(analysis: LogAnalysis) -> str:
    parts = [verdict(analysis.summary), "", *_inputs(analysis), *_hosts(analysis), *_evidence(analysis)]
    parts += _plugins(analysis)
    parts += _connections(analysis.connections) + _env(analysis) + _inferences(analysis) + _errors(analysis)
    parts += _benign(analysis)
    notes = analysis.summary.notes
    parts += ["Notes", *(f"  {note}" for note in notes), ""] if notes else []
    return "\n".join(parts).rstrip() + "\n"


def verdict(s: LogSummary) -> str:
    """``2 nodes × 8 GPUs, NCCL 2.21.5, InfiniBand with GPUDirect RDMA on mlx5_0..7; 3 warnings``."""
    shape = _nodes(s)
    if s.local_ranks:
        shape += f" × {s.local_ranks} GPU{'s' if s.local_ranks != 1 else ''}"
    elif s.nranks:
        shape += f", {s.nranks} rank{'s' if s.nranks != 1 else ''}"
    version = f"NCCL {s.nccl_version}" if s.nccl_version else "NCCL version not logged"
    if len(s.nccl_versions) > 1:
        version += f" (also {', '.join(v for v in s.nccl_versions if v != s.nccl_version)})"
    net = _transport_name(s)
    if s.transport not in (None, "none"):
        net += {"used": " with GPUDirect RDMA", "not_used": " without GPUDirect RDMA",
                "asymmetric": " with GPUDirect RDMA on one side only"}.get(s.gdr_mode or "", "")
        if s.hcas:
            net += f" on {_hca_range(s.hcas)}"
    count = len(s.errors)
    return f"{shape}, {version}, {net}; {count} warning{'s' if count != 1 else ''}"


def _transport_name(s: LogSummary) -> str:
    """NET/IB is NCCL's verbs transport for InfiniBand and RoCE: "InfiniBand" only when the device lines
    show /IB ports (and no /RoCE one)."""
    if s.transport == "IB":
        layers = {h.rsplit("/", 1)[-1] for h in s.hcas}
        if layers == {"IB"}:
            return "InfiniBand"
        if {"IB", "RoCE"} <= layers:
            return "IB verbs over both InfiniBand and RoCE ports (mixed device list)"
        return "IB verbs (InfiniBand or RoCE: no device line shows the link layer)"
    return _TRANSPORT_NAMES.get(s.transport or "", s.transport or "transport not shown in the log")


def _nodes(s: LogSummary) -> str:
    """``2 nodes``, ``at least 2 nodes`` (only some ranks logged), or ``node count unknown``."""
    if s.nnodes is not None:
        return f"{s.nnodes} node{'s' if s.nnodes != 1 else ''}"
    if s.nnodes_min and s.nnodes_min > 1:
        return f"at least {s.nnodes_min} nodes"
    return "node count unknown"


def _hca_range(hcas: tuple[str, ...]) -> str:
    """``mlx5_0..7`` for a run of numbered HCAs, else the names (at most MAX_HCAS of them).

    The run is checked by counting, never by building it: a log may name ``mlx5_100000000``."""
    names = sorted({h.split(":")[0] for h in hcas})
    stems = {n.rstrip("0123456789") for n in names}
    if len(names) > 2 and len(stems) == 1:
        stem = next(iter(stems))
        digits = [n[len(stem):] for n in names]
        if all(0 < len(d) <= 9 for d in digits):  # an index NCCL could print; longer ones are names
            numbers = sorted(int(d) for d in digits)
            if numbers[-1] - numbers[0] + 1 == len(numbers):
                return f"{stem}{numbers[0]}..{numbers[-1]}"
    shown = ", ".join(names[:MAX_HCAS])
    return shown + (f" and {len(names) - MAX_HCAS} more" if len(names) > MAX_HCAS else "")


def _where(ev: Evidence | None) -> str:
    return f"{ev.file}:{ev.line}" if ev else "-"


def _long(count: int) -> str:
    if not count:
        return ""
    return f", {count} line{'s' if count != 1 else ''} over {LINE_LIMIT} bytes read by their two ends only"


def _inputs(analysis: LogAnalysis) -> list[str]:
    rows = [f"  {i.name}: {i.lines} lines, {i.nccl_lines} NCCL lines{_long(i.long_lines)}"
            for i in analysis.inputs]
    return ["Inputs", *rows, ""]


def _hosts(analysis: LogAnalysis) -> list[str]:
    if not analysis.hosts:
        return []
    out = ["Hosts", f"  {'host':<24} {'machines':>8} {'ranks':>6}  {'NCCL':<10} {'GDR':<5} HCAs"]
    for h in analysis.hosts[:MAX_ROWS]:
        gdr = "-" if h.gdr is None else ("yes" if h.gdr else "no")
        versions = ",".join(h.nccl_versions) or "-"
        out.append(f"  {h.name:<24} {h.machines:>8} {len(h.ranks):>6}  {versions:<10} {gdr:<5} "
                   f"{' '.join(h.hcas) or '-'}")
    if len(analysis.hosts) > MAX_ROWS:
        out.append(f"  ... {len(analysis.hosts) - MAX_ROWS} more hosts (--json has them all)")
    return out + [""]


def _evidence(analysis: LogAnalysis) -> list[str]:
    s = analysis.summary
    out, shown = ["Evidence"], set()
    for name, lines in s.evidence.items():
        for ev in _first_lines(lines, 3):
            text = "(line shown above)" if (ev.file, ev.line) in shown else ev.text[:120]
            shown.add((ev.file, ev.line))
            out.append(f"  {name:<13} {_where(ev)}  {text}")
    extra = [f"net plugin {s.net_plugin}"] if s.net_plugin else []
    extra += [f"libfabric provider {s.libfabric_provider}"] if s.libfabric_provider else []
    extra += [f"intra-node {', '.join(s.intra_node)}"] if s.intra_node else []
    extra += [f"CUDA driver {s.cuda_driver_version}"] if s.cuda_driver_version else []
    return out + ([f"  {'; '.join(extra)}"] if extra else []) + [""]


def _first_lines(lines: tuple[Evidence, ...], most: int) -> list[Evidence]:
    """The ``most`` weightiest lines of a field, each (file, line) once, in file and line order."""
    distinct = {(ev.file, ev.line): ev for ev in lines}
    return sorted(list(distinct.values())[:most], key=lambda ev: (ev.file, ev.line))


def _plugins(analysis: LogAnalysis) -> list[str]:
    if not analysis.plugins:
        return []
    out = ["Plugins", f"  {'kind':<8} {'name':<24} {'status':<10} {'version':<10} {'used':<5} where"]
    for p in analysis.plugins:
        used = "-" if p.selected is None else ("yes" if p.selected else "no")
        why = f"  ({p.detail[:70]})" if p.detail and p.status == "failed" else ""
        out.append(f"  {p.kind:<8} {p.name[:24]:<24} {p.status:<10} {(p.version or '-')[:10]:<10} {used:<5} "
                   f"{_where(p.failure or p.evidence)}{why}")
    return out + [""]


def _connections(conns: tuple[Connection, ...]) -> list[str]:
    if not conns:
        return []
    kinds = Counter(c.transport for c in conns)
    out = ["Connections (rank -> peer)", "  " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common())]
    out.append(f"  {'host':<20} {'rank':>5} {'peer':>5} {'transport':<16} {'dir':<8} {'nic':>3} {'gdr':<4} "
               f"{'ch':>3}  where")
    for c in conns[:MAX_ROWS]:
        gdr = "-" if c.gdr is None else ("yes" if c.gdr else "no")
        nic = "-" if c.nic is None else str(c.nic)
        out.append(f"  {(c.host or '?')[:20]:<20} {c.rank:>5} {c.peer:>5} {c.transport[:16]:<16} "
                   f"{c.direction or '-':<8} {nic:>3} {gdr:<4} {c.channels:>3}  {_where(c.evidence)}")
    if len(conns) > MAX_ROWS:
        out.append(f"  ... {len(conns) - MAX_ROWS} more rows (--json has them all)")
    return out + [""]


def _env(analysis: LogAnalysis) -> list[str]:
    if not analysis.env:
        return []
    out = ["Environment NCCL echoed"]
    for e in analysis.env:
        off = f"  (switches off {e.disables})" if e.disables else ""
        out.append(f"  {e.name}={e.value}{off}  {_where(e.evidence)}")
    return out + [""]


_INFERENCE_TITLES = {
    "single_node": "one node", "nic_loopback": "NIC loopback", "first_failure": "first failure",
    "hang": "where it hung", "version_range": "NCCL release",
}


def _inferences(analysis: LogAnalysis) -> list[str]:
    """Conclusions drawn across lines, each with its lines and what it leaves open; then the per-process
    phases of a hang and the releases each host's wordings fit."""
    out = []
    for item in analysis.inferences:
        out.append(f"  [{_INFERENCE_TITLES.get(item.kind, item.kind)}] {item.statement}")
        out += [f"      {_where(ev)}  {ev.text[:140]}" for ev in item.evidence[:4]]
        if item.unknown:
            out.append(f"      open: {item.unknown}")
    if analysis.phases:
        out.append(f"  {'process':<28} {'ranks':<12} {'last phase':<14} {'opCount/SeqNum':>14}  where")
        for row in analysis.phases[:MAX_ROWS]:
            who = f"{row.host}:{row.pid}" if row.pid is not None else "(PyTorch lines)"
            ranks = ",".join(map(str, row.ranks[:4])) or "-"
            count = "-" if row.op_count is None else str(row.op_count)
            where = _where(row.evidence)
            out.append(f"  {who[:28]:<28} {ranks[:12]:<12} {row.phase:<14} {count:>14}  {where}")
        if len(analysis.phases) > MAX_ROWS:
            out.append(f"  ... {len(analysis.phases) - MAX_ROWS} more processes (--json has them all)")
    fitted = [h for h in analysis.host_versions if h.first or h.last]
    if fitted:
        out.append("  NCCL releases by message wording (REFERENCE.md §1):")
        for h in fitted[:MAX_ROWS]:
            span = f"{h.first or '?'} .. {h.last or 'latest'}"
            printed = f"; prints {', '.join(h.printed)}" if h.printed else ""
            name, words = (h.host or "(no host)")[:24], ", ".join(h.wordings[:4])
            out.append(f"    {name:<24} {span:<16} from {words}{printed}")
    return ["Inferences", *out, ""] if out else []


def _errors(analysis: LogAnalysis) -> list[str]:
    if not analysis.errors:
        return ["No warnings or errors."]
    out = ["Warnings and errors"]
    for e in analysis.errors:
        times = f" (x{e.count})" if e.count > 1 else ""
        after = f" (consequence of {e.consequence_of})" if e.consequence_of else ""
        out.append(f"  [{e.category}]{after} {e.file}:{e.line}{times}  {e.text[:160]}")
        out += [f"      + {_where(ev)}  {ev.text[:140]}" for ev in e.related]
        out.append(f"      {e.explanation}")
        if e.signature:
            out.append(f"      fix: {e.fix}  [failure catalogue: {e.signature}]")
    return out


def _benign(analysis: LogAnalysis) -> list[str]:
    """Lines the failure catalogue knows to be harmless: said so, so that nobody chases them."""
    if not analysis.benign:
        return []
    out = ["", "Benign lines (not faults; listed because they look alarming)"]
    for e in analysis.benign:
        times = f" (x{e.count})" if e.count > 1 else ""
        out.append(f"  [benign] {e.file}:{e.line}{times}  {e.text[:160]}")
        out.append(f"      {e.explanation}  [failure catalogue: {e.signature}]")
    return out
