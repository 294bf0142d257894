"""Rules on parsed NCCL logs (:class:`topodoc.logmodel.LogAnalysis`): transport, GDR, env, errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from topodoc.logmodel import Evidence as LineEvidence
from topodoc.logmodel import LogAnalysis, LogError
from topodoc.rules.engine import Evidence, Facts, Hit, Severity, rule

RDMA_TRANSPORTS = ("IB", "RoCE", "EFA", "gIB", "IBext", "Slingshot")
RDMA_ENV_PREFIXES = ("NCCL_IB_", "NCCL_NET_PLUGIN", "NCCL_NET_GDR", "OFI_NCCL_", "FI_")


def line(ev: LineEvidence) -> Evidence:
    """A log line the analyzer kept (file, line number, text) as finding evidence."""
    return Evidence("log", f"{ev.file}:{ev.line}", ev.text.strip())


def log_evidence(err: LogError) -> Evidence:
    return Evidence("log", f"{err.file}:{err.line}", err.text.strip())


def _logs(facts: Facts) -> LogAnalysis:
    return facts.logs


def _errors(facts: Facts, categories: Iterable[str]) -> list[LogError]:
    wanted = set(categories)
    return [err for err in _logs(facts).errors if err.category in wanted]


def _subject(err: LogError) -> str:
    if err.host and err.pid:
        return f"{err.host}:{err.pid}"
    return err.host or "log"


def _error_hits(facts: Facts, categories: Iterable[str], severity: Severity | None = None) -> Iterator[Hit]:
    for err in _errors(facts, categories):
        times = f" ({err.count} times)" if err.count > 1 else ""
        yield Hit(_subject(err), err.explanation + times, (log_evidence(err),), severity=severity)


def _rdma_signals(logs: LogAnalysis) -> list[Evidence]:
    """Lines showing RDMA was wanted: HCAs or OFI NICs listed, a plugin failing, RDMA settings.

    ``NET/IB : No device found.`` alone is no such sign: every NCCL prints it on an Ethernet-only host."""
    signals = [line(d.evidence) for d in logs.devices if d.role in ("hca", "ofi") and d.evidence]
    signals += [log_evidence(e) for e in logs.errors if e.category == "plugin_error"]
    signals += [line(s.evidence) for s in logs.env if s.name.startswith(RDMA_ENV_PREFIXES)]
    return signals


@rule(
    id="nccl-socket-fallback",
    title="NCCL fell back to TCP sockets although RDMA was expected",
    severity="error",
    tags=("nccl", "network", "log"),
    needs=("logs",),
    fix="make the RDMA path work (drivers, NCCL_IB_HCA, the net plugin's LD_LIBRARY_PATH); never leave "
    "NCCL_IB_DISABLE=1 or NCCL_NET=Socket in a production job",
)
def nccl_socket_fallback(facts: Facts) -> Iterator[Hit]:
    logs = _logs(facts)
    if logs.summary.transport != "Socket":
        return
    signals = _rdma_signals(logs)
    chosen = tuple(line(e) for e in logs.summary.evidence.get("transport", ())[:1])
    if signals:
        yield Hit(
            subject="job",
            message="the inter-node transport is NET/Socket (TCP through the kernel, a few GB/s at best) "
            "while the log shows RDMA devices, a net plugin or RDMA settings: something made NCCL give up "
            "on RDMA",
            evidence=chosen + tuple(signals[:3]),
        )
    elif (logs.summary.nnodes or 1) > 1:
        yield Hit(
            subject="job",
            message=f"{logs.summary.nnodes} nodes talk over NET/Socket (TCP through the kernel, a few GB/s "
            "at best); the log shows no RDMA device, so this is right only for an Ethernet-only cluster",
            evidence=chosen,
            fix="if the nodes have RDMA NICs, run `topodoc diagnose --from live --log FILE` on one of them "
            "to see why NCCL did not find them",
            severity=Severity.INFO,
            confidence=0.5,
        )


@rule(
    id="nccl-net-plugin-failed",
    title="A NCCL net plugin failed to load",
    severity="warning",
    tags=("nccl", "plugin", "log"),
    needs=("logs",),
    fix="check the plugin path (LD_LIBRARY_PATH, NCCL_NET_PLUGIN) and its dependencies (libfabric, "
    "rdma-core)",
)
def nccl_net_plugin_failed(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("plugin_error",))


@rule(
    id="nccl-gdr-not-used",
    title="GPUDirect RDMA not used on an RDMA network",
    severity="warning",
    tags=("nccl", "gdr", "log"),
    needs=("logs",),
    fix="load nvidia-peermem (or enable DMA-BUF), check NCCL_NET_GDR_LEVEL and the GPU-NIC PCIe distance",
)
def nccl_gdr_not_used(facts: Facts) -> Iterator[Hit]:
    summary = _logs(facts).summary
    if summary.gdr is False and summary.gdr_mode != "asymmetric" and summary.transport in RDMA_TRANSPORTS:
        yield Hit(
            subject="job",
            message=f"network connections over {summary.transport} carry no /GDRDMA: data is staged through "
            "host memory, costing PCIe and memory bandwidth and CPU time on every inter-node transfer",
            evidence=_summary_evidence(summary, "gdr"),
            fix=EFA_GDR_FIX if summary.transport == "EFA" else None,
        )


EFA_GDR_FIX = (
    "EFA offers GPUDirect RDMA only on some instance types: check the "
    "instance type, then the aws-ofi-nccl version and its GDR settings"
)


@rule(
    id="nccl-gdr-asymmetric",
    title="GPUDirect RDMA used on some nodes or directions but not others",
    severity="error",
    tags=("nccl", "gdr", "log"),
    needs=("logs",),
    fix="compare the nodes: the ones without GDR usually lack nvidia-peermem or have ACS/IOMMU on the path",
)
def nccl_gdr_asymmetric(facts: Facts) -> Iterator[Hit]:
    logs = _logs(facts)
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


def _summary_evidence(summary, name: str) -> tuple[Evidence, ...]:
    return tuple(line(e) for e in summary.evidence.get(name, ())[:3])


@rule(
    id="nccl-p2p-disabled",
    title="P2P disabled between NVLink-connected GPUs",
    severity="error",
    tags=("nccl", "nvlink", "p2p", "log"),
    needs=("logs",),
    fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; if P2P hangs, fix ACS/IOMMU instead of disabling P2P",
)
def nccl_p2p_disabled(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("p2p_disabled",))


@rule(
    id="nccl-affinity-empty",
    title="NCCL found no CPU affinity for a GPU",
    severity="warning",
    tags=("nccl", "numa", "affinity", "log"),
    needs=("logs",),
    fix="let the job use CPUs on each GPU's socket (cpuset / --cpu-bind), or set NCCL_IGNORE_CPU_AFFINITY=1",
)
def nccl_affinity_empty(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("affinity",))


@rule(
    id="nccl-version-mismatch",
    title="Ranks run different NCCL versions",
    severity="error",
    tags=("nccl", "version", "log"),
    needs=("logs",),
    fix="use one NCCL build on every node (same container image / same torch wheel)",
)
def nccl_version_mismatch(facts: Facts) -> Iterator[Hit]:
    logs = _logs(facts)
    derived = _errors(facts, ("version_mismatch",))
    if derived:
        yield from _error_hits(facts, ("version_mismatch",))
    elif len(set(logs.summary.nccl_versions)) > 1:
        yield Hit(
            subject="job",
            message="ranks report NCCL "
            + ", ".join(sorted(set(logs.summary.nccl_versions)))
            + ": mixed versions disagree on protocols and topology and hang or crash at init",
            evidence=_summary_evidence(logs.summary, "nccl_versions")
            or _summary_evidence(logs.summary, "nccl_version"),
        )


@rule(
    id="nccl-env-disables-feature",
    title="An environment override switches a NCCL feature off",
    severity="warning",
    tags=("nccl", "env", "log"),
    needs=("logs",),
    fix="remove the override unless it works around a known problem on this cluster",
)
def nccl_env_disables_feature(facts: Facts) -> Iterator[Hit]:
    seen: set[str] = set()
    for setting in _logs(facts).env:
        what = setting.disables
        if what and setting.name not in seen:
            seen.add(setting.name)
            yield Hit(
                subject=setting.name,
                message=f"{setting.name}={setting.value} switches off {what}",
                evidence=(line(setting.evidence),),
                fix=f"unset {setting.name} (or document why this cluster needs it)",
            )


@rule(
    id="nccl-ib-completion-error",
    title="InfiniBand/RoCE work completion error",
    severity="error",
    tags=("nccl", "ib", "errors", "log"),
    needs=("logs",),
    fix="find the first failing rank; check the links (ibstat, port counters), ACS/IOMMU, and "
    "NCCL_IB_TIMEOUT",
)
def nccl_ib_completion_error(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("ib_completion_error",))


@rule(
    id="nccl-timeout",
    title="A collective timed out",
    severity="error",
    tags=("nccl", "errors", "log"),
    needs=("logs",),
    fix="find the rank that stopped first (earliest WARN, missing heartbeat); a hang is usually a dead peer, "
    "a link down, or ranks calling different collectives",
)
def nccl_timeout(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("timeout",))


@rule(
    id="nccl-remote-error",
    title="A peer vanished or a connection failed",
    severity="error",
    tags=("nccl", "network", "errors", "log"),
    needs=("logs",),
    fix="look for the earliest error on the other ranks: the remote process usually crashed or was killed "
    "first; otherwise check firewall rules and NCCL_SOCKET_IFNAME",
)
def nccl_remote_error(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("remote_error", "socket_error"))


@rule(
    id="nccl-error",
    title="NCCL reported a CUDA, system, usage or internal error",
    severity="error",
    tags=("nccl", "errors", "log"),
    needs=("logs",),
    fix="read the WARN line above the failure; it names the failing call",
)
def nccl_error(facts: Facts) -> Iterator[Hit]:
    yield from _error_hits(facts, ("cuda_error", "system_error", "invalid_usage", "internal_error"))
    yield from _error_hits(facts, ("other",), severity=Severity.WARNING)


RULES = (
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
)
