"""Rules on parsed NCCL logs (:class:`topodoc.logmodel.LogAnalysis`): transport, GDR, env, errors."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from topodoc.rules import loginfer
from topodoc.rules.common import kept_lines, log_line
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule
from topodoc.rules.interfaces import is_interface_choice

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import LogAnalysis, LogError, LogSummary, PluginInfo

RDMA_TRANSPORTS = ("IB", "RoCE", "EFA", "gIB", "IBext", "Slingshot")
RDMA_ENV_PREFIXES = ("NCCL_IB_", "NCCL_NET_PLUGIN", "NCCL_NET_GDR", "OFI_NCCL_", "FI_")


def _errors(logs: LogAnalysis, categories: Iterable[str]) -> list[LogError]:
    """The logged errors of ``categories``; the interface-choice lines (lo, a bridge, link-local) are
    left to ``nccl-socket-interface``, which weighs them by the node count."""
    wanted = set(categories)
    return [err for err in logs.errors if err.category in wanted and not is_interface_choice(err)]


def _error_hits(
    logs: LogAnalysis, categories: Iterable[str], severity: Severity | None = None
) -> Iterator[Hit]:
    """One hit per process and explanation: the same error repeated by one process is one finding, and
    PyTorch's ``Last error:`` is folded into the error it follows up."""
    for (subject, explanation), items in _grouped(_folded(_errors(logs, categories))).items():
        yield _group_hit(subject, explanation, items, severity=severity)


Item = tuple["LogError", tuple["LogError", ...]]  # an error and the follow-up lines folded into it
FOLLOW_UP_LINES = 5  # PyTorch's wrapper line, its interpretation, "Last error:", then the reason


def _folded(errors: list[LogError]) -> list[Item]:
    """Each error with the ``Last error:`` lines that follow it up: the NCCL WARN whose text PyTorch
    repeats, else PyTorch's own error line just above. A follow-up with neither stays an error."""
    leads = [err for err in errors if err.repeats is None]
    follow: dict[int, list[LogError]] = {}
    for err in errors:
        lead = _lead(leads, err) if err.repeats is not None else None
        if lead is not None:
            follow.setdefault(id(lead), []).append(err)
    folded = {id(err) for errs in follow.values() for err in errs}
    return [(err, tuple(follow.get(id(err), ()))) for err in errors if id(err) not in folded]


def _lead(leads: list[LogError], last: LogError) -> LogError | None:
    repeated = [err for err in leads if _repeats(last, err)]
    wrappers = [err for err in leads if err.level == "ERROR" and err.host is None and err.file == last.file
                and 0 < last.line - err.line <= FOLLOW_UP_LINES]
    return (repeated or wrappers or [None])[-1]


def _repeats(last: LogError, err: LogError) -> bool:
    """``last`` (a ``Last error:`` reason) is the text of the NCCL WARN ``err``."""
    reason = last.repeats or ""
    return err.level == "WARN" and len(reason) >= 20 and err.text.rstrip().endswith(reason)


def _root_explanation(item: Item) -> str:
    """A WARN that PyTorch repeated explains itself; PyTorch's wrapper is explained by the reason it gave."""
    err, follow = item
    return err.explanation if not follow or _repeats(follow[0], err) else follow[0].explanation


def _follow_up_note(item: Item) -> str:
    if _repeats(item[1][0], item[0]):
        return " PyTorch repeated this WARN as its 'Last error:' when the job failed: one failure, not two."
    return " PyTorch's error line and the 'Last error:' it gives as the reason are one failure, not two."


def _subject(err: LogError) -> str:
    if err.host and err.pid:
        return f"{err.host}:{err.pid}"
    return err.host or "log"


def _grouped(items: Iterable[Item]) -> dict[tuple[str, str], list[Item]]:
    groups: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        groups.setdefault((_subject(item[0]), _root_explanation(item)), []).append(item)
    return groups


def _group_hit(
    subject: str, explanation: str, items: list[Item], severity: Severity | None = None,
    fix: str | None = None, note: str = "", extra: tuple[Evidence, ...] = (),
) -> Hit:
    count = sum(err.count for err, _follow in items)
    times = f" ({count} times)" if count > 1 else ""
    follow = [line for _err, lines in items for line in lines]
    if follow:
        note += _follow_up_note(items[0])
    evidence = tuple(log_line(err) for err, _follow in items[:3]) + tuple(log_line(f) for f in follow[:2])
    evidence += extra + tuple(log_line(ev) for ev in items[0][0].related[:2])  # then its return-code chain
    known = _known(items)
    if known is not None:
        note += f" [failure catalogue: {known.signature}]"
        fix = fix or known.fix
    return Hit(subject, explanation + times + note, evidence, fix=fix, severity=severity)


def _known(items: list[Item]) -> LogError | None:
    """The first error of the group (or the WARN its follow-up repeats) that the failure catalogue knows."""
    for err, follow in items:
        root = (err, *follow) if not follow or _repeats(follow[0], err) else (*follow, err)
        for candidate in root:  # the line whose explanation the finding gives first
            if candidate.signature:
                return candidate
    return None


def error_rule(
    id: str, severity: str, tags: tuple[str, ...], title: str, fix: str, categories: tuple[str, ...]
) -> Rule:
    """A rule reporting each logged error of ``categories`` with the analyzer's explanation of it."""
    check = functools.partial(_error_hits, categories=categories)
    return rule(id, severity, tags, title=title, fix=fix)(check)


def _summary_evidence(summary: LogSummary, name: str, most: int = 3) -> tuple[Evidence, ...]:
    return kept_lines(summary.evidence.get(name, ()), most)


def _rdma_signals(logs: LogAnalysis) -> list[Evidence]:
    """Lines showing RDMA was wanted: HCAs or OFI NICs listed, a plugin failing, RDMA settings.

    ``NET/IB : No device found.`` alone is no such sign: every NCCL prints it on an Ethernet-only host."""
    signals = [log_line(d.evidence) for d in logs.devices if d.role in ("hca", "ofi") and d.evidence]
    signals += [log_line(e) for e in logs.errors if e.category == "plugin_error"]
    signals += [log_line(s.evidence) for s in logs.env if s.name.startswith(RDMA_ENV_PREFIXES)]
    return signals


@rule(
    "nccl-socket-fallback", "error", ("nccl", "network", "log"),
    title="NCCL fell back to TCP sockets although RDMA was expected",
    fix="make the RDMA path work (drivers, NCCL_IB_HCA, the net plugin's LD_LIBRARY_PATH); never leave "
    "NCCL_IB_DISABLE=1 or NCCL_NET=Socket in a production job",
)
def nccl_socket_fallback(logs: LogAnalysis) -> Iterator[Hit]:
    if logs.summary.transport != "Socket":
        return
    signals = _rdma_signals(logs)
    chosen = _summary_evidence(logs.summary, "transport", 1)
    passed_over = _passed_over(logs)
    if passed_over:
        yield _plugin_fallback(passed_over, chosen)
    elif signals:
        yield Hit(
            subject="job",
            message="the inter-node transport is NET/Socket (TCP through the kernel, a few GB/s at best) "
            "while the log shows RDMA devices, a net plugin or RDMA settings: something made NCCL give up "
            "on RDMA",
            evidence=chosen + tuple(signals[:3]),
        )
    elif (logs.summary.nnodes or logs.summary.nnodes_min or 1) > 1:
        nodes = logs.summary.nnodes or f"at least {logs.summary.nnodes_min}"
        yield Hit(
            subject="job",
            message=f"{nodes} nodes talk over NET/Socket (TCP through the kernel, a few GB/s "
            "at best); the log shows no RDMA device, so this is right only for an Ethernet-only cluster",
            evidence=chosen,
            fix="if the nodes have RDMA NICs, run `topodoc diagnose --from live --log FILE` on one of them "
            "to see why NCCL did not find them",
            severity=Severity.INFO,
            confidence=0.5,
        )


def _passed_over(logs: LogAnalysis) -> list[PluginInfo]:
    """Net plugins that loaded, or were found but failed, and that NCCL did not select."""
    return [
        plugin
        for plugin in logs.plugins
        if plugin.kind == "net" and plugin.status in ("loaded", "failed") and plugin.selected is False
    ]


def _plugin_fallback(plugins: list[PluginInfo], chosen: tuple[Evidence, ...]) -> Hit:
    first = plugins[0]
    version = f" {first.version}" if first.version else ""
    what = "failed to initialize" if first.status == "failed" else "loaded, but NCCL did not select it"
    reason = f" ({first.detail})" if first.detail and first.name not in first.detail else ""
    others = f"; also passed over: {', '.join(p.name for p in plugins[1:])}" if len(plugins) > 1 else ""
    lines = (first.evidence, first.failure) if first.failure != first.evidence else (first.evidence,)
    return Hit(
        subject="job",
        message="the inter-node transport is NET/Socket (TCP through the kernel, a few GB/s at best) because "
        f"the net plugin {first.name}{version} {what}{reason}: NCCL fell back to sockets without failing "
        f"the job{others}",
        evidence=tuple(log_line(line) for line in lines if line is not None) + chosen,
        fix=f"make {first.name} usable (its library and dependencies on LD_LIBRARY_PATH; in a container the "
        "RDMA devices under /dev/infiniband; for aws-ofi-nccl the EFA provider, `fi_info -p efa`), then set "
        "NCCL_NET to its network so that a failure stops the job instead of falling back",
    )


def _fallback_note(logs: LogAnalysis) -> str:
    """What the log shows NCCL used after a plugin or device failed: the fallback is claimed only when a
    line shows it (the chosen network, or the connections' transport)."""
    transport = logs.summary.transport
    lines = logs.summary.evidence.get("transport", ())
    where = f" ({lines[0].file}:{lines[0].line})" if lines else ""
    if transport == "Socket":
        return f" The log shows the fallback: NCCL's network is Socket{where}."
    if transport == "none":
        return " The job is proven to run on one node: no network was needed."
    if transport:
        return f" The log shows NCCL went on with {transport}{where}: no fallback to sockets."
    return " Whether NCCL then fell back to sockets is not in this log: its 'Using network' line or the " \
        "'via NET/...' connection lines settle it."


def _with_fallback_note(logs: LogAnalysis, categories: tuple[str, ...]) -> Iterator[Hit]:
    note = _fallback_note(logs)
    for hit in _error_hits(logs, categories):
        yield dataclasses.replace(hit, message=hit.message + note)


@rule(
    "nccl-net-plugin-failed", "warning", ("nccl", "plugin", "log"),
    title="A NCCL net plugin failed to load",
    fix="check the plugin path (LD_LIBRARY_PATH, NCCL_NET_PLUGIN) and its dependencies (libfabric, "
    "rdma-core)",
)
def nccl_net_plugin_failed(logs: LogAnalysis) -> Iterator[Hit]:
    """A plugin found but failing (not found is benign: nccl-benign-lines), with what the log shows NCCL
    used next: the fallback to sockets only when a line shows it."""
    yield from _with_fallback_note(logs, ("plugin_error",))


EFA_GDR_FIX = (
    "EFA offers GPUDirect RDMA only on some instance types: check the "
    "instance type, then the aws-ofi-nccl version and its GDR settings"
)


@rule(
    "nccl-gdr-not-used", "warning", ("nccl", "gdr", "log"),
    title="GPUDirect RDMA not used on an RDMA network",
    fix="load nvidia-peermem (or enable DMA-BUF), check NCCL_NET_GDR_LEVEL and the GPU-NIC PCIe distance",
)
def nccl_gdr_not_used(logs: LogAnalysis) -> Iterator[Hit]:
    summary = logs.summary
    if summary.gdr is False and summary.gdr_mode != "asymmetric" and summary.transport in RDMA_TRANSPORTS:
        yield Hit(
            subject="job",
            message=f"network connections over {summary.transport} carry no /GDRDMA: data is staged through "
            "host memory, costing PCIe and memory bandwidth and CPU time on every inter-node transfer",
            evidence=_summary_evidence(summary, "gdr"),
            fix=EFA_GDR_FIX if summary.transport == "EFA" else None,
        )


@rule(
    "nccl-gdr-asymmetric", "warning", ("nccl", "gdr", "log"),
    title="GPUDirect RDMA used on some nodes or directions but not others",
    fix="compare the nodes: the ones without GDR usually lack nvidia-peermem or have ACS/IOMMU on the path",
)
def nccl_gdr_asymmetric(logs: LogAnalysis) -> Iterator[Hit]:
    if logs.summary.gdr_mode != "asymmetric":
        return
    without = [h.name for h in logs.hosts if h.gdr is False]
    yield Hit(
        subject=", ".join(without) or "job",
        message="GPUDirect RDMA is on for some connections and off for others"
        + (f" (off on {', '.join(without)})" if without else "")
        + ": the slow side paces every collective; the classic cause is nvidia-peermem missing on one node",
        evidence=_summary_evidence(logs.summary, "gdr"),
    )


nccl_p2p_disabled = error_rule(
    "nccl-p2p-disabled", "error", ("nccl", "nvlink", "p2p", "log"),
    title="P2P disabled between NVLink-connected GPUs",
    fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; if P2P hangs, fix ACS/IOMMU instead of disabling P2P",
    categories=("p2p_disabled",),
)

nccl_affinity_empty = error_rule(
    "nccl-affinity-empty", "warning", ("nccl", "numa", "affinity", "log"),
    title="NCCL found no CPU affinity for a GPU",
    fix="let the job use CPUs on each GPU's socket (cpuset / --cpu-bind), or set NCCL_IGNORE_CPU_AFFINITY=1",
    categories=("affinity",),
)


@rule(
    "nccl-version-mismatch", "error", ("nccl", "version", "log"),
    title="Ranks run different NCCL versions",
    fix="use one NCCL build on every node (same container image / same torch wheel)",
)
def nccl_version_mismatch(logs: LogAnalysis) -> Iterator[Hit]:
    versions = sorted(set(logs.summary.nccl_versions))
    if _errors(logs, ("version_mismatch",)):
        yield from _error_hits(logs, ("version_mismatch",))
    elif len(versions) > 1:
        yield Hit(
            subject="job",
            message=f"ranks report NCCL {', '.join(versions)}: mixed versions disagree on protocols and "
            "topology and hang or crash at init",
            evidence=_summary_evidence(logs.summary, "nccl_versions")
            or _summary_evidence(logs.summary, "nccl_version"),
        )
    yield from loginfer.inference_hits(logs, "version_range")  # a printed version its own wordings contradict


@rule(
    "nccl-env-disables-feature", "warning", ("nccl", "env", "log"),
    title="An environment override switches a NCCL feature off",
    fix="remove the override unless it works around a known problem on this cluster",
)
def nccl_env_disables_feature(logs: LogAnalysis) -> Iterator[Hit]:
    seen: set[str] = set()
    for setting in logs.env:
        what = setting.disables
        if what and setting.name not in seen:
            seen.add(setting.name)
            yield Hit(
                subject=setting.name,
                message=f"{setting.name}={setting.value} switches off {what}",
                evidence=(log_line(setting.evidence),),
                fix=f"unset {setting.name} (or document why this cluster needs it)",
            )


COMPLETION_FIXES = {
    4: "check ACS on the PCIe bridges between each GPU and its NIC (`topodoc diagnose --from live`), "
    "IOMMU passthrough (iommu=pt) and nvidia_peermem (or DMA-BUF); NCCL_NET_GDR_LEVEL=LOC confirms it "
    "(slower, but the error goes away)",
    5: "this status only follows an earlier failure: find the first completion error or crash on the "
    "other ranks and hosts",
    10: "read the peer host's log and check its GPUDirect RDMA setup (nvidia_peermem, ACS, IOMMU)",
    12: "check both ends' ports and the switch (ibstat, port error counters), and whether the peer process "
    "died first; on RoCE let NCCL choose the GID (unset NCCL_IB_GID_INDEX on 2.21+) and check PFC/ECN; "
    "raise NCCL_IB_TIMEOUT only for long congestion stalls",
    13: "find the peer that stopped posting receives (stalled or dead process) in its own log",
}


@rule(
    "nccl-ib-completion-error", "error", ("nccl", "ib", "errors", "log"),
    title="InfiniBand/RoCE work completion error",
    fix="find the first failing rank; check the links (ibstat, port counters), ACS/IOMMU, and "
    "NCCL_IB_TIMEOUT",
)
def nccl_ib_completion_error(logs: LogAnalysis) -> Iterator[Hit]:
    """Each distinct completion error with the fix its status calls for. WR_FLUSH_ERR (5) after another
    completion error is its consequence: it is folded into the first finding instead of a second one."""
    items = _folded(_errors(logs, ("ib_completion_error",)))
    causes = [item for item in items if item[0].ib_status != 5]
    flushed = [item for item in items if item[0].ib_status == 5]
    if not causes:
        causes, flushed = flushed, []
    for number, ((subject, explanation), group) in enumerate(_grouped(causes).items()):
        status = group[0][0].ib_status
        note, extra = _gid_note(logs, status), ()
        if number == 0 and flushed:
            flushes = sum(err.count for err, _follow in flushed)
            note += f" Then {flushes} work request(s) were flushed (WR_FLUSH_ERR, 5): the queue pair had " \
                "failed, a consequence of this error, not a second fault."
            extra = (log_line(flushed[0][0]),)
        fix = COMPLETION_FIXES.get(status)
        yield _group_hit(subject, explanation, group, fix=fix, note=note, extra=extra)


def _gid_note(logs: LogAnalysis, status: int | None) -> str:
    """Retry-exceeded on RoCE with a forced GID index: say what to check, by NCCL version (2.21 picks
    the GID itself; before it a RoCEv2 index had to be set by hand, so setting one is right there)."""
    forced = [s for s in logs.env if s.name == "NCCL_IB_GID_INDEX"]
    roce = logs.summary.transport == "RoCE" or any(d.link_layer == "RoCE" for d in logs.devices)
    if status != 12 or not forced or not roce:
        return ""
    setting = forced[0]
    where = f"NCCL_IB_GID_INDEX={setting.value} ({setting.evidence.file}:{setting.evidence.line})"
    if _version_at_least(logs.summary.nccl_version, (2, 21)):
        return f" {where} is forced although NCCL 2.21+ chooses the RoCEv2 GID itself: if that index is " \
            "not a RoCEv2 address on the same subnet on both ends, nothing is acknowledged; unset it."
    return f" {where} is set: check with show_gids that this index is the RoCEv2 IPv4 GID on every node " \
        "(GID tables differ between hosts whose interfaces differ); a mismatch gives exactly this error."


def _version_at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    parts = (version or "").split(".")
    return len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and \
        (int(parts[0]), int(parts[1])) >= wanted


nccl_timeout = error_rule(
    "nccl-timeout", "error", ("nccl", "errors", "log"),
    title="A collective timed out",
    fix="find the rank that stopped first (earliest WARN, missing heartbeat); a hang is usually a dead peer, "
    "a link down, or ranks calling different collectives",
    categories=("timeout",),
)

nccl_remote_error = error_rule(
    "nccl-remote-error", "error", ("nccl", "network", "errors", "log"),
    title="A peer vanished or a connection failed",
    fix="look for the earliest error on the other ranks: the remote process usually crashed or was killed "
    "first; otherwise check firewall rules and NCCL_SOCKET_IFNAME",
    categories=("remote_error", "socket_error"),
)


@rule(
    "nccl-error", "error", ("nccl", "errors", "log"),
    title="NCCL reported a CUDA, system, usage or internal error",
    fix="read the WARN line above the failure; it names the failing call",
)
def nccl_error(logs: LogAnalysis) -> Iterator[Hit]:
    """Each error with its explanation; one the failure catalogue does not know (no cause can be named from
    the line) also says which outputs settle it, ranked."""
    found = _errors(logs, ("cuda_error", "system_error", "invalid_usage", "internal_error"))
    for (subject, explanation), items in _grouped(_folded(found)).items():
        yield _group_hit(subject, explanation, items, note=_settle(items))
    unknown = [err for err in _errors(logs, ("other",)) if not err.signature]
    for (subject, explanation), items in _grouped(_folded(unknown)).items():
        yield _group_hit(subject, explanation, items, severity=Severity.WARNING, note=_settle(items))


SETTLE_UNKNOWN = (
    " No catalogued cause fits this line; what settles it, in order: 1. the lines just before it with "
    "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the call that failed and its errno); 2. the other ranks' "
    "logs (the earliest error across ranks: this one may only react to it); 3. `sudo dmesg -T | grep -i "
    "-e xid -e nvrm -e mlx5 -e dmar` on this node at that time (a GPU, NIC or IOMMU event)."
)


def _settle(items: list[Item]) -> str:
    return "" if _known(items) is not None else SETTLE_UNKNOWN


@rule(
    "nccl-known-failure", "warning", ("nccl", "catalogue", "log"),
    title="A line the failure catalogue knows (a signature outside the other rules' categories)",
    fix="apply the fix of the catalogue signature named in the finding",
)
def nccl_known_failure(logs: LogAnalysis) -> Iterator[Hit]:
    """Lines a catalogue signature matched whose category no other rule reports ("other": GPUDirect RDMA
    disabled for an HCA, NVLS or IMEX set-up, ...): the signature's explanation, id and fix."""
    known = [err for err in _errors(logs, ("other",)) if err.signature]
    for (subject, explanation), items in _grouped(_folded(known)).items():
        yield _group_hit(subject, explanation, items)


@rule(
    "nccl-no-net-device", "warning", ("nccl", "network", "log"),
    title="NCCL found no usable device for a network and moved on to the next one",
    fix="make the RDMA/EFA devices visible (/dev/infiniband in containers, the provider libraries) or set "
    "NCCL_SOCKET_IFNAME / NCCL_IB_HCA to names that exist; pin NCCL_NET so a fallback fails loudly",
)
def nccl_no_net_device(logs: LogAnalysis) -> Iterator[Hit]:
    yield from _with_fallback_note(logs, ("no_net_device",))


@rule(
    "nccl-mixed-link-layers", "warning", ("nccl", "ib", "roce", "log"),
    title="NCCL's IB device list mixes InfiniBand and RoCE ports",
    fix="restrict NCCL_IB_HCA to the ports of the training fabric (e.g. NCCL_IB_HCA=^mlx5_1 or an explicit "
    "list), or give the RDMA devices persistent names so that the Ethernet NIC is never among them",
)
def nccl_mixed_link_layers(logs: LogAnalysis) -> Iterator[Hit]:
    """One host whose NET/IB device list holds /IB and /RoCE ports: NCCL stripes traffic over every listed
    port, and a RoCE (Ethernet) port among InfiniBand rails cannot reach the InfiniBand peers (a front-end
    NIC picked up by NCCL, often after device renaming on cloud VMs)."""
    by_host: dict[str | None, dict[str, list]] = {}
    for device in logs.devices:
        if device.role == "hca" and device.link_layer in ("IB", "RoCE"):
            by_host.setdefault(device.host, {}).setdefault(device.link_layer, []).append(device)
    for host, layers in by_host.items():
        if len(layers) < 2:
            continue
        roce, ib = layers["RoCE"], layers["IB"]
        names = ", ".join(f"{d.name}:{d.port}" for d in roce[:4])
        yield Hit(
            subject=host or "log",
            message=f"NCCL uses {len(ib)} InfiniBand port(s) and {len(roce)} RoCE port(s) ({names}) "
            "together: traffic striped onto the RoCE port cannot reach peers on the InfiniBand fabric (and "
            "the reverse), so connections through it fail or hang",
            evidence=tuple(log_line(d.evidence) for d in roce[:1] if d.evidence),
        )


@rule(
    "nccl-benign-lines", "info", ("nccl", "catalogue", "log"),
    title="Lines that look alarming but are benign",
    fix="nothing to do: these lines are expected; look elsewhere for the cause of a failure",
)
def nccl_benign_lines(logs: LogAnalysis) -> Iterator[Hit]:
    """Benign lines users chase (``Failed to find CUDA library``, a missing optional plugin), said to be
    benign once per signature, so that nobody mistakes them for the failure."""
    by_signature: dict[str, list[LogError]] = {}
    for err in logs.benign:
        by_signature.setdefault(err.signature or err.explanation, []).append(err)
    for signature, errs in by_signature.items():
        count = sum(err.count for err in errs)
        times = f" ({count} lines)" if count > 1 else ""
        yield Hit(
            subject="log",
            message=f"benign, not a fault{times}: {errs[0].explanation} [failure catalogue: {signature}]",
            evidence=tuple(log_line(err) for err in errs[:2]),
            fix=errs[0].fix,
            severity=Severity.INFO,
        )


RULES: tuple[Rule, ...] = (
    nccl_socket_fallback,
    nccl_net_plugin_failed,
    nccl_gdr_not_used,
    nccl_gdr_asymmetric,
    nccl_p2p_disabled,
    nccl_affinity_empty,
    nccl_version_mismatch,
    nccl_env_disables_feature,
    nccl_ib_completion_error,
    nccl_timeout,
    nccl_remote_error,
    nccl_error,
    nccl_known_failure,
    nccl_no_net_device,
    nccl_mixed_link_layers,
    nccl_benign_lines,
)
