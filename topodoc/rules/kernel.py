"""Rules on kernel-log events (``dmesg`` / ``journalctl -k`` given to ``diagnose FILE...``): Xid, PCIe AER
and IOMMU faults, and the joined finding "an Xid on the GPU whose rank failed" (the Xid's PCI address vs the
``busId`` of a rank in the NCCL log).

The ``kernel`` fact is a tuple of ``(path, KernelEvent)`` pairs (:mod:`topodoc.parsers.kernel_log`); the
explanations and usual actions come from the parser (:mod:`topodoc.parsers.xid_catalog` for Xids). The
reader keeps a bounded number of events per group, the last standing for the group's later lines
(``repeats``): every count here is of lines (the sum of ``repeats``), never of events.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.rules.common import log_line
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model
    from topodoc.logmodel import LogAnalysis, RankInfo

_SEVERITY = {"critical": Severity.CRITICAL, "error": Severity.ERROR, "warning": Severity.WARNING,
             "info": Severity.INFO}
_ACTIONS = {
    "restart_app": "restart the application; the same Xid again on this GPU with other jobs points at the "
    "GPU",
    "reset_gpu": "drain the GPU's jobs and reset it (nvidia-smi -r, or reboot); watch for a repeat",
    "drain_node": "drain the node and reboot it; if it comes back, run the vendor diagnostics "
    "(dcgmi diag -r 3)",
    "rma": "drain the node and open a hardware case (RMA) for this GPU with the Xid lines",
}


def _where(path: str, event) -> Evidence:
    return Evidence("log", f"{path}:{event.line}", event.text)


def _lines(items) -> int:
    """The lines of the log that ``items`` ((path, event) pairs) stand for: an event kept for a group the
    reader bounded counts the group's later lines too (``repeats``)."""
    return sum(e.repeats for _p, e in items)


def _groups(kernel, kinds: tuple[str, ...]) -> dict[tuple, list]:
    """Events of ``kinds`` grouped by (kind, device, code), first first."""
    groups: dict[tuple, list] = {}
    for path, event in kernel:
        if event.kind in kinds and event.severity != "info":
            groups.setdefault((event.kind, event.device, event.code), []).append((path, event))
    return groups


@rule(
    "kernel-xid", "error", ("gpu", "xid", "kernel"),
    title="The NVIDIA driver reported an Xid (or a lost GPU) in the kernel log",
    fix="follow the Xid's action (restart the application, reset the GPU, drain the node or RMA)",
)
def kernel_xid(kernel) -> Iterator[Hit]:
    for (_kind, device, _code), items in _groups(kernel, ("xid", "gpu_lost", "sxid")).items():
        _path, first = items[0]
        times = f" ({lines} lines)" if (lines := _lines(items)) > 1 else ""
        yield Hit(
            subject=device or "GPU",
            message=f"{first.message}{times}",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            fix=_ACTIONS.get(first.action or ""),
            severity=_SEVERITY.get(max((e.severity for _p, e in items), key=_rank)),
        )


def _rank(severity: str) -> int:
    return ("info", "warning", "error", "critical").index(severity) if severity in _SEVERITY else 0


@rule(
    "kernel-pcie-iommu-events", "warning", ("pcie", "iommu", "kernel"),
    title="PCIe AER errors or IOMMU faults in the kernel log",
    fix="corrected AER errors in bursts: reseat or replace the card/riser and check the slot's link; IOMMU "
    "faults on GPU/NIC traffic: iommu=pt (or off) for peer-to-peer and GPUDirect RDMA",
)
def kernel_pcie_iommu_events(kernel) -> Iterator[Hit]:
    for (kind, device, _code), items in _groups(kernel, ("aer", "iommu")).items():
        _path, first = items[0]
        times = f" ({lines} lines)" if (lines := _lines(items)) > 1 else ""
        yield Hit(
            subject=device or kind,
            message=f"{first.message}{times}",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            severity=_SEVERITY.get(max((e.severity for _p, e in items), key=_rank)),
        )


@rule(
    "xid-on-failed-rank-gpu", "error", ("gpu", "xid", "kernel", "log", "joined"),
    title="An Xid on the GPU of a rank that failed",
    fix="treat the GPU as the cause of the job's failure: follow the Xid's action for that GPU and rerun "
    "the job without it; the NCCL errors of the other ranks are consequences",
)
def xid_on_failed_rank_gpu(kernel, logs: LogAnalysis) -> Iterator[Hit]:
    """The Xid's PCI address equals the ``busId`` NCCL printed for a rank whose process logged an error.
    A kernel log names no host: when ranks on several hosts use that bus id, the finding says so."""
    failed = {(e.host, e.pid) for e in logs.errors}
    if not failed:
        return
    for (_kind, device, _code), items in _groups(kernel, ("xid", "gpu_lost")).items():
        ranks = _ranks_on(logs.ranks, device)
        hit = [r for r in ranks if (r.host, r.pid) in failed]
        if not hit:
            continue
        path, first = items[0]
        hosts = sorted({r.host or "?" for r in ranks})
        where = f"on {hosts[0]}" if len(hosts) == 1 else (
            f"(ranks on {', '.join(hosts)} use this bus id; the kernel log does not say which host it is "
            "from)")
        rank = hit[0]
        errors = [e for e in logs.errors if (e.host, e.pid) == (rank.host, rank.pid)]
        yield Hit(
            subject=device or "GPU",
            message=f"{first.message}; this GPU ({device}) is rank {rank.rank}'s {where}, and that rank's "
            f"process logged {len(errors)} NCCL error(s): the Xid explains the failure",
            evidence=(_where(path, first), log_line(rank.evidence), log_line(errors[0])) if rank.evidence
            else (_where(path, first), log_line(errors[0])),
            fix=_ACTIONS.get(first.action or ""),
            confidence=1.0 if len(hosts) == 1 else 0.5,
        )


def _ranks_on(ranks: tuple[RankInfo, ...], device: str | None) -> list[RankInfo]:
    if not device:
        return []
    return [r for r in ranks if r.bus_id and r.bus_id.lower() == device.lower()]


_HCA_WHAT = {
    "health": ("the adapter's firmware stopped answering the driver's health poll: every RDMA transfer "
               "through it fails (NCCL: IB completion errors or 'port error' events, then a hang or "
               "ncclRemoteError on the ranks behind it)",
               "drain the node, reset the adapter (mlxfwreset, or reboot), update its firmware; open a "
               "hardware case if it returns on the same adapter"),
    "link_down": ("the port went down", "check the cable, transceiver and switch port; `ibstat` (or "
                  "`ip link show NAME`) shows its state now, and the port's link_downed counter whether "
                  "it flaps"),
    "module_error": ("the cable or transceiver in the port reported an error",
                     "reseat the cable or module, then replace it if the error returns"),
    "module_unplugged": ("the cable or transceiver was unplugged from the port",
                         "if nobody removed it, reseat it; the port's link is down while it is out"),
    "temperature": ("the adapter reported a temperature over its warning threshold",
                    "check the airflow over the adapter and the server's fan policy; `mget_temp -d DEVICE` "
                    "(NVIDIA MFT) reads the adapter's temperature"),
    "cmd_failed": ("a firmware command failed (resource creation or a queue-pair transition)",
                   "read the command and status: resource limits (memlock), a wrong GID/port, or firmware"),
    "error": ("the driver reported an error", "read the line; update driver and firmware if it repeats"),
}
# mlx5's module error types (the driver's mlx5_pme_error table), by their first word
_MODULE_ERRORS = {
    "power budget exceeded": ("the module needs more power than the port supplies",
                              "use a module of a power class the adapter supports (`ethtool -m NAME` "
                              "shows the module's)"),
    "long range for non mlnx cable": ("a long-range module of another vendor, which the adapter does not "
                                      "drive", "use a supported long-range module"),
    "bus stuck(i2c or data shorted)": ("the module's management bus is stuck (I2C or data lines shorted)",
                                       "reseat the module, then replace it"),
    "no eeprom/retry timeout": ("the module's EEPROM did not answer", "reseat the module, then replace it"),
    "enforce part number list": ("the module is not on the adapter's list of allowed part numbers",
                                 "use a module from the adapter's supported list"),
    "unknown identifier": ("the module's type identifier is not one the adapter knows",
                           "use a supported module"),
    "high temperature": ("the module is over its temperature threshold",
                         "check the module's temperature and thresholds (`ethtool -m NAME`), then the "
                         "airflow over the adapter's cages; an active optical cable dissipates more than "
                         "a passive copper one"),
    "bad or shorted cable/module": ("the cable or module is bad or shorted", "replace the cable or module"),
}


@rule(
    "kernel-hca-events", "error", ("rdma", "nic", "kernel"),
    title="The RDMA adapter's driver reported a health failure, link drops, a cable module fault or "
    "command failures",
    fix="for a health failure drain the node and reset or replace the adapter; for link drops and module "
    "errors check the cable, transceiver and switch port",
)
def kernel_hca_events(kernel) -> Iterator[Hit]:
    """mlx5/EFA events grouped by device and code; a port that went down more than once is a flapping
    link, and whether a ``Link up`` of the same port follows its last ``Link down`` in the same log is
    said (the ``link_up`` events are info: read here, never a finding)."""
    ups: dict[tuple[str, str | None], int] = {}
    modules: dict[tuple[str, str | None], list] = {}  # the port's module events, in order
    for path, event in kernel:
        if event.code == "link_up" and event.kind == "mlx5":
            key = (path, event.device)
            ups[key] = max(ups.get(key, 0), event.last_line or event.line)
        elif event.code in ("module_error", "module_unplugged"):
            modules.setdefault((path, event.device), []).append(event)
    for (_kind, device, code), items in _groups(kernel, ("mlx5", "efa")).items():
        _path, first = items[0]
        what, fix = _HCA_WHAT.get(code or "error", _HCA_WHAT["error"])
        if code == "module_error":
            what, fix = _MODULE_ERRORS.get(dict(first.detail).get("error", "").lower(), (what, fix))
        lines = _lines(items)
        if code == "link_down":
            what = f"the port went down {lines} times: a flapping link" if lines > 1 else what
            what += _module_before(items, modules, device) + _came_back(items, ups, device)
        times = f" ({lines} lines)" if lines > 1 and code != "link_down" else ""
        yield Hit(
            subject=device or first.message.split(":")[0],
            message=f"{first.message}{times}: {what}",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            fix=fix,
            severity=_SEVERITY.get(max((e.severity for _p, e in items), key=_rank)),
        )


def _module_before(items, modules: dict, device: str | None) -> str:
    """The port's first module event (an error or an unplugged cable) before its first ``Link down``, in
    the same file: what took the link down."""
    path, first = items[0]
    before = [e for e in modules.get((path, device), ()) if e.line < first.line] if device else []
    if not before:
        return ""
    status = dict(before[0].detail)  # (the first: a group's first event is always kept)
    why = ", ".join(v for v in (status.get("status"), status.get("error")) if v)
    return f", after its module reported '{why}' ({path}:{before[0].line})"


def _came_back(items, ups: dict, device: str | None) -> str:
    """Whether the port's last ``Link down`` (of the last file that has one) is followed by a ``Link up``
    in that file."""
    path = items[-1][0]
    down = max(e.last_line or e.line for p, e in items if p == path)
    up = ups.get((path, device), 0)
    if device is None:
        return ""
    if up > down:
        return f"; it came back up ({path}:{up})"
    return (f"; no 'Link up' of this port follows its last 'Link down' ({path}:{down}) in this log: it may "
            "still be down")


_OOM_HOST_MEMORY = ("(DataLoader workers and their prefetch, pinned-memory buffers, a checkpoint or dataset "
                    "loaded whole on every rank)")
_OOM_WHY = {
    "cgroup": "raise the memory limit of the job's cgroup (Slurm --mem / --mem-per-cpu, Kubernetes "
              f"resources.limits.memory), or lower the host memory each rank uses {_OOM_HOST_MEMORY}",
    "node": f"lower the host memory each rank uses {_OOM_HOST_MEMORY}, and check what else holds the node's "
            "memory (`ps aux --sort=-rss`)",
}
_OOM_UNKNOWN = (_OOM_WHY["node"] + "; if the job runs under a memory limit (Slurm --mem, a container's "
                "limit), raise it: the log does not say which ran out")
_OOM_AFTER = ("; in a distributed job the other ranks then fail in NCCL (connection closed, watchdog "
              "timeout): those errors follow from this kill")


@rule(
    "kernel-oom-kill", "error", ("memory", "kernel"),
    title="The kernel's OOM killer killed a process",
    fix="raise the job's memory limit or lower the host memory each rank uses; in a distributed job the "
    "killed rank's peers then fail in NCCL, and those errors are consequences",
)
def kernel_oom_kill(kernel) -> Iterator[Hit]:
    """Every ``Killed process`` line, in one finding (a job's ranks are often killed together), with the
    cgroup the ``oom-kill:constraint=`` line before it names."""
    killed = _groups(kernel, ("oom",)).get(("oom", None, "killed"))
    if not killed:
        return
    contexts = [(p, e) for p, e in kernel if e.kind == "oom" and e.code == "constraint"]
    path, first = killed[0]
    detail = dict(first.detail)
    context = _oom_context(contexts, path, first)
    # (only the first two kills are read past the count: the reader keeps the first events of a group, at
    # least two, so that what is said does not depend on how many it kept)
    second = _oom_context(contexts, killed[1][0], killed[1][1], first.line if killed[1][0] == path else 0) \
        if len(killed) > 1 else {}
    scopes = {detail.get("scope") or context.get("scope")}
    scopes |= {dict(killed[1][1].detail).get("scope") or second.get("scope")} if len(killed) > 1 else set()
    scope = scopes.pop() if len(scopes) == 1 else None  # kills of both kinds, or unsaid: both fixes
    lines = _lines(killed)
    more = ""
    if lines > 1:
        second = dict(killed[1][1].detail)
        others = f", the second pid {second['pid']} ({second['process']})"
        more = f"; {lines} processes killed in all{others}"
    cgroup = f"; its cgroup: {context['memcg']}" if context.get("memcg") else ""
    if not detail.get("scope") and context.get("scope"):  # (said by the line before the kill)
        cgroup += {"cgroup": "; its memory cgroup reached its limit (the line before it)",
                   "node": "; not a cgroup's limit (the line before it)"}[context["scope"]]
    yield Hit(
        subject=f"pid {detail.get('pid')}",
        message=f"{first.message}{cgroup}{more}",
        evidence=tuple(_where(p, e) for p, e in killed[:2]),
        fix=_OOM_WHY.get(scope or "", _OOM_UNKNOWN) + _OOM_AFTER,
    )


def _oom_context(contexts: list, path: str, kill, after: int = 0) -> dict:
    """What the lines the kernel printed for ``kill`` before it say (``oom-kill:constraint=...``, or the
    older ``Task in ... killed as a result of limit of ...`` and ``Kill process ... or sacrifice child``): the
    context lines a few lines up in its file and after the kill before it (line ``after``), the later ones
    winning."""
    merged: dict = {}
    for p, e in contexts:
        if p == path and max(kill.line - 50, after) < e.line < kill.line:
            merged.update(e.detail)
    return merged


@rule(
    "oom-killed-rank", "error", ("memory", "kernel", "log", "joined"),
    title="The OOM killer killed a rank of the NCCL job",
    fix="treat the kill as the cause of the job's failure: give the rank's host memory room (the job's "
    "memory limit, DataLoader workers, pinned memory) and rerun; the NCCL errors of the other ranks are "
    "consequences",
)
def oom_killed_rank(kernel, logs: LogAnalysis) -> Iterator[Hit]:
    """A killed pid equals the pid NCCL printed for a rank. A kernel log names no host of its own: when
    ranks on several hosts had that pid, the finding says so. (Of a log of thousands of kills, the kills the
    reader kept are read: the first of their group.)"""
    for path, event, pid, rank, where, one_host in _rank_processes(kernel, logs, "oom", once=False):
        if event.code != "killed":
            continue
        errors = [e for e in logs.errors if e.pid != rank.pid or e.host != rank.host]
        after = (f"; the {len(errors)} NCCL error(s) of other processes in the log follow from it"
                 if errors and one_host else "")
        yield _rank_hit(path, event, rank, one_host,
                        f"the OOM killer killed pid {pid}, rank {rank.rank}'s process {where}{after}")


def _rank_processes(kernel, logs: LogAnalysis, kind: str, *, once: bool):
    """``(path, event, pid, rank, where, one_host)`` for each ``kind`` event whose pid NCCL printed for a
    rank (``once``: the first event of each pid only). A kernel log names no host of its own: ``where`` says
    the rank's host, or the hosts whose ranks had that pid."""
    by_pid: dict[int, list[RankInfo]] = {}
    for rank in logs.ranks:
        if rank.pid is not None:
            by_pid.setdefault(rank.pid, []).append(rank)
    seen: set[int] = set()
    for path, event in kernel:
        pid = dict(event.detail).get("pid", "")
        if event.kind != kind or not pid.isdigit() or int(pid) not in by_pid or int(pid) in seen:
            continue
        if once:
            seen.add(int(pid))
        ranks = by_pid[int(pid)]
        hosts = sorted({r.host or "?" for r in ranks})
        where = f"on {hosts[0]}" if len(hosts) == 1 else (
            f"(ranks on {', '.join(hosts)} had pid {pid}; the kernel log does not say which host it is from)")
        yield path, event, pid, ranks[0], where, len(hosts) == 1


def _rank_hit(path: str, event, rank: RankInfo, one_host: bool, message: str) -> Hit:
    return Hit(
        subject=f"rank {rank.rank}",
        message=message,
        evidence=(_where(path, event),) + ((log_line(rank.evidence),) if rank.evidence else ()),
        confidence=1.0 if one_host else 0.5,
    )


_PEERMEM_WHY = {
    "ib_core": {
        "version": "the RDMA core (ib_core) loaded is not the one the module was built against: MLNX_OFED / "
                   "DOCA-OFED installed, upgraded or removed since, or the kernel's own ib_core loaded "
                   "instead of OFED's",
        "missing": "the RDMA core (ib_core) loaded has no peer-memory API: the kernel's own RDMA stack "
                   "without MLNX_OFED / DOCA-OFED, or an OFED changed since the module was built",
    },
    "nvidia": {
        "version": "the NVIDIA driver loaded is not the one the module was built against: the driver changed "
                   "(upgraded or reinstalled) since",
        "missing": "the NVIDIA driver that exports the symbol is not loaded",
    },
}
_PEERMEM_FIX = ("rebuild the module against what is loaded now: nvidia-peermem ships with the NVIDIA driver, "
                "so reinstall the driver (or its DKMS module) after installing or upgrading MLNX_OFED / "
                "DOCA-OFED; then `modprobe nvidia-peermem` and check /sys/module/nvidia_peermem/version. "
                "With the open NVIDIA kernel driver on a kernel >= 5.12, NCCL's DMA-BUF path needs no "
                "peer-memory module")


@rule(
    "kernel-peermem-load-failed", "error", ("gdr", "gpudirect", "kernel"),
    title="The GPU peer-memory module (nvidia-peermem / nv_peer_mem) failed to load",
    fix="rebuild the module against the RDMA core and NVIDIA driver loaded now (reinstall the NVIDIA driver "
    "after installing or upgrading MLNX_OFED / DOCA-OFED), then modprobe nvidia-peermem; or use the DMA-BUF "
    "path, which needs no peer-memory module",
)
def kernel_peermem_load_failed(kernel) -> Iterator[Hit]:
    """``Unknown symbol`` / ``disagrees about version of symbol`` lines of nvidia_peermem or nv_peer_mem,
    one finding per kind of symbol (the RDMA core's, the NVIDIA driver's)."""
    for (_kind, _device, code), items in _groups(kernel, ("peermem",)).items():
        _path, first = items[0]
        detail = dict(first.detail)
        versions = {dict(e.detail).get("why") for _p, e in items[:2]}
        why = "version" if "version" in versions else "missing"
        cause = _PEERMEM_WHY.get(code or "", {}).get(why, "a symbol it needs is not what the kernel offers")
        yield Hit(
            subject=detail.get("module", "peermem"),
            message=f"{first.message} ({_lines(items)} line(s)): {cause}. Without a peer-memory module (or "
            "DMA-BUF) NCCL cannot hand GPU memory to the NIC: GPUDirect RDMA is off ('GPU Direct RDMA "
            "Disabled'), inter-node traffic is staged through host memory, or registering GPU buffers fails",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            fix=_PEERMEM_FIX,
        )


_HUNG_FIX = ("read the call trace printed after the line: frames in [nvidia] / [nvidia_uvm] point at the GPU "
             "driver (look for an Xid on the node, then reset the GPU or reboot), frames in a file system "
             "(nfs, lustre, fuse) at storage. A rank stuck there stalls every collective of its job: the "
             "other ranks' NCCL timeouts follow from it")


@rule(
    "kernel-hung-task", "warning", ("hang", "kernel"),
    title="The kernel saw a task stuck (hung task or soft lockup)",
    fix="read the call trace printed after the line: frames in [nvidia] / [nvidia_uvm] point at the GPU "
    "driver (check for Xids, then reset the GPU or reboot), frames in a file system (nfs, lustre, fuse) at "
    "storage; a rank stuck there stalls every collective of its job",
)
def kernel_hung_task(kernel) -> Iterator[Hit]:
    """``INFO: task NAME:PID blocked for more than N seconds.`` and soft lockups, one finding per kind."""
    for (_kind, _device, code), items in _groups(kernel, ("hung_task",)).items():
        _path, first = items[0]
        lines = _lines(items)
        times = f" ({lines} lines)" if lines > 1 else ""
        what = ("uninterruptible sleep: it cannot be killed until the kernel call it waits on returns"
                if code == "blocked" else "the CPU did not schedule anything else meanwhile")
        yield Hit(
            subject=f"pid {dict(first.detail).get('pid')}",
            message=f"{first.message}{times}: {what}; the call trace after the line says where",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            fix=_HUNG_FIX,
        )


@rule(
    "hung-rank-process", "error", ("hang", "kernel", "log", "joined"),
    title="A rank's process was stuck in the kernel",
    fix="treat the stuck process as the cause of the job's hang: read its call trace in the kernel log "
    "(GPU driver, file system), deal with that, and rerun; the NCCL timeouts of the other ranks are "
    "consequences",
)
def hung_rank_process(kernel, logs: LogAnalysis) -> Iterator[Hit]:
    """A pid of a hung-task or soft-lockup line equals the pid NCCL printed for a rank (the kernel log names
    no host: ranks on several hosts with that pid are said, with a lower confidence)."""
    for path, event, _pid, rank, where, one_host in _rank_processes(kernel, logs, "hung_task", once=True):
        yield _rank_hit(path, event, rank, one_host, f"{event.message}: that is rank {rank.rank}'s process "
                        f"{where}; a rank stuck in the kernel stalls every collective of the job")


_NFS_FIX = ("find why the server or the path to it stalled (server load, network); a hard mount makes every "
            "process that reads data or writes a checkpoint through it wait without end, so a training job "
            "stalls on all its ranks (watchdog timeouts, not a network fault of NCCL's)")


@rule(
    "kernel-nfs-stall", "warning", ("storage", "hang", "kernel"),
    title="An NFS server stopped answering the node",
    fix="find why the server or the path to it stalled (server load, network); while it does not answer, "
    "every rank reading data or writing a checkpoint through the mount waits, and its job stalls",
)
def kernel_nfs_stall(kernel) -> Iterator[Hit]:
    """``nfs: server X not responding`` lines, one finding per server, with whether an ``nfs: server X OK``
    follows the last of them in the same file."""
    oks: dict[tuple[str, str | None], int] = {}
    for path, event in kernel:
        if event.kind == "nfs" and event.code == "ok":
            key = (path, dict(event.detail).get("server"))
            oks[key] = max(oks.get(key, 0), event.last_line or event.line)
    servers: dict[str | None, list] = {}
    for (_kind, _device, code), items in _groups(kernel, ("nfs",)).items():
        if code == "not_responding":
            for path, event in items:
                servers.setdefault(dict(event.detail).get("server"), []).append((path, event))
    for server, items in servers.items():
        path, first = items[0]
        last_path = items[-1][0]
        last = max(e.last_line or e.line for p, e in items if p == last_path)
        back = oks.get((last_path, server), 0)
        after = (f"; it answered again ({last_path}:{back})" if back > last else
                 f"; no 'nfs: server {server} OK' follows its last line ({last_path}:{last}) in this log: it "
                 "may still not answer")
        lines = _lines(items)
        yield Hit(
            subject=f"nfs {server}",
            message=f"{first.message} ({lines} line(s)){after}",
            evidence=tuple(_where(p, e) for p, e in items[:2]),
            severity=_SEVERITY.get(max((e.severity for _p, e in items), key=_rank)),
            fix=_NFS_FIX,
        )


RULES: tuple[Rule, ...] = (kernel_xid, kernel_pcie_iommu_events, xid_on_failed_rank_gpu, kernel_hca_events,
                           kernel_oom_kill, oom_killed_rank, kernel_peermem_load_failed, kernel_hung_task,
                           hung_rank_process, kernel_nfs_stall)
