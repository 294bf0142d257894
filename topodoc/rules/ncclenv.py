"""Rules on pasted NCCL / libfabric / UCX settings (``env | grep NCCL``, ``export`` lines, launcher flags,
``/etc/nccl.conf``) given to ``diagnose FILE...``: what each setting changes, and the settings that cause
the symptoms people report.

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kind ``nccl-env``
(:mod:`topodoc.parsers.envlist`), by attribute. What each variable does: NCCL's env.rst and the sources
cited in /work/shared/REFERENCE.md §2 (NCCL 2.30).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule

KIND = "nccl-env"
TITLE = "settings"

# name -> what it changes (NCCL env.rst, REFERENCE.md §2)
EXPLAIN: dict[str, str] = {
    "NCCL_DEBUG": "log level (VERSION, WARN, INFO, TRACE)",
    "NCCL_DEBUG_SUBSYS": "which subsystems log (default INIT,BOOTSTRAP,ENV)",
    "NCCL_DEBUG_FILE": "log to a file per process (%h host, %p pid)",
    "NCCL_SOCKET_IFNAME": "interfaces for bootstrap and socket traffic (prefix list, ^ excludes, = exact; "
    "default skips lo and docker*)",
    "NCCL_SOCKET_FAMILY": "forces IPv4 or IPv6 for sockets",
    "NCCL_IB_HCA": "which RDMA devices/ports NCCL uses (prefix match: mlx5_1 also matches mlx5_10-19; ^ "
    "excludes, = exact)",
    "NCCL_IB_DISABLE": "1 = no InfiniBand/RoCE verbs: the network falls back to TCP sockets",
    "NCCL_IB_GID_INDEX": "fixed RoCE GID index (default: NCCL picks one, 2.21+)",
    "NCCL_IB_TIMEOUT": "IB retransmit timeout 4.096 us * 2^t (default 20)",
    "NCCL_IB_RETRY_CNT": "IB retry count (default 7)",
    "NCCL_IB_SL": "IB service level (QoS)",
    "NCCL_IB_TC": "RoCE traffic class (QoS)",
    "NCCL_IB_PCI_RELAXED_ORDERING": "PCIe relaxed ordering for IB registrations",
    "NCCL_IB_ADAPTIVE_ROUTING": "IB adaptive routing (default on for IB, off for RoCE)",
    "NCCL_NET": "forces the network by name (IB, Socket, or a plugin's name)",
    "NCCL_NET_PLUGIN": "which network plugin library to load (none = no plugin)",
    "NCCL_NET_GDR_LEVEL": "farthest GPU-NIC path on which GPUDirect RDMA is used (LOC, PIX, PXB, PHB, SYS; "
    "default PXB)",
    "NCCL_NET_GDR_READ": "GPUDirect RDMA for sends (0 = sends staged through host memory)",
    "NCCL_DMABUF_ENABLE": "DMA-BUF registration of GPU memory (default 1)",
    "NCCL_P2P_DISABLE": "1 = no direct GPU-to-GPU transport (P2P/NVLink/PCIe): traffic goes through host "
    "memory or the network",
    "NCCL_P2P_LEVEL": "farthest GPU-GPU path on which P2P is used (LOC, NVL, PIX, PXB, PHB, SYS; default "
    "PXB)",
    "NCCL_P2P_DIRECT_DISABLE": "no direct pointer access between GPUs of one process",
    "NCCL_SHM_DISABLE": "1 = no shared-memory transport (falls back to the network)",
    "NCCL_CROSS_NIC": "whether rings may use different NICs on different nodes (0 no, 1 yes, 2 prefer not)",
    "NCCL_ALGO": "which algorithms NCCL may use (Ring, Tree, NVLS, CollNet, PAT...)",
    "NCCL_PROTO": "which protocols NCCL may use (LL, LL128, Simple)",
    "NCCL_TOPO_FILE": "topology XML loaded instead of / before detecting the machine",
    "NCCL_TOPO_DUMP_FILE": "writes the detected topology XML",
    "NCCL_NVLS_ENABLE": "NVLink SHARP (NVLS) on NVSwitch systems",
    "NCCL_MNNVL_ENABLE": "multi-node NVLink (needs IMEX)",
    "NCCL_CUMEM_ENABLE": "cuMem allocations (auto since 2.19)",
    "NCCL_COLLNET_ENABLE": "SHARP CollNet",
    "NCCL_COMM_ID": "rendezvous address ip:port",
    "NCCL_BUFFSIZE": "buffer size per channel",
    "NCCL_MIN_NCHANNELS": "minimum channels",
    "NCCL_MAX_NCHANNELS": "maximum channels",
    "NCCL_NET_FORCE_FLUSH": "forces a flush after GPUDirect RDMA receives",
    "NCCL_IGNORE_CPU_AFFINITY": "ignores the process's CPU affinity when binding NCCL's threads",
    "NCCL_ASYNC_ERROR_HANDLING": "PyTorch (older name of TORCH_NCCL_ASYNC_ERROR_HANDLING)",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "PyTorch: abort the communicator on an error or timeout",
    "TORCH_NCCL_BLOCKING_WAIT": "PyTorch: wait() blocks and raises on timeout",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "PyTorch flight recorder size",
    "CUDA_VISIBLE_DEVICES": "which GPUs the process sees, and their numbering",
    "GLOO_SOCKET_IFNAME": "interface of PyTorch's gloo backend (not NCCL's)",
    "FI_PROVIDER": "libfabric provider (efa, cxi, verbs, tcp)",
    "FI_EFA_USE_DEVICE_RDMA": "EFA: RDMA read/write with GPU memory (p4d and later)",
    "FI_EFA_FORK_SAFE": "EFA: fork safety",
}

_LOOPBACK = re.compile(r"^(?:=)?(?:lo|docker\d*|virbr\d*|veth\w*)$")


def _risk(name: str, value: str) -> tuple[str, Severity] | None:
    """What a setting does to a job, when that is a symptom people report; None when it is not risky."""
    v = value.strip()
    if name == "NCCL_P2P_DISABLE" and v == "1":
        return ("GPU-to-GPU traffic inside a node goes through host memory instead of NVLink/PCIe P2P: "
                "intra-node bandwidth drops to a fraction. It is often left from a workaround for a P2P hang "
                "on a PCIe machine, whose cause (ACS redirect or IOMMU) then stays", Severity.WARNING)
    if name == "NCCL_SHM_DISABLE" and v == "1":
        return ("no shared-memory transport: with P2P also off, traffic inside a node goes over the network",
                Severity.WARNING)
    if name == "NCCL_IB_DISABLE" and v == "1":
        return ("no InfiniBand/RoCE: traffic between nodes goes over TCP sockets (NET/Socket), many times "
                "slower on an RDMA cluster", Severity.WARNING)
    if name == "NCCL_NET_GDR_LEVEL" and v.upper() in ("LOC", "0"):
        return ("GPUDirect RDMA off: every network transfer is staged through host memory", Severity.WARNING)
    if name == "NCCL_NET_GDR_READ" and v == "0":
        return ("GPUDirect RDMA off for sends: sends are staged through host memory", Severity.INFO)
    if name == "NCCL_SOCKET_IFNAME":
        parts = [p.strip() for p in v.removeprefix("^").split(",") if p.strip()]
        if v.startswith("^") and not any(p in ("lo", "=lo") for p in parts):
            return ("an exclusion list that leaves out `lo`: it replaces NCCL's default (which skips lo and "
                    "docker*), so the loopback interface can be chosen and ranks on other nodes cannot reach "
                    "it (aws/deep-learning-containers#4756); add lo: ^docker,lo", Severity.WARNING)
        if not v.startswith("^") and any(_LOOPBACK.match(p) for p in parts):
            return ("a loopback or container-bridge interface: only ranks on this host can connect; a job "
                    "across nodes hangs at bootstrap", Severity.WARNING)
        return None
    if name == "NCCL_IB_GID_INDEX":
        return ("a fixed RoCE GID index: it must be a RoCEv2 address on every port of every node (check "
                "`show_gids`); a wrong one fails connection setup (ibv_modify_qp) or uses RoCEv1. NCCL 2.21+ "
                "picks the index itself: unset it there", Severity.INFO)
    if name == "NCCL_TOPO_FILE":
        return ("NCCL takes the topology from this file: a file written for another machine type or PCI "
                "layout gives wrong GPU/NIC paths (hangs, slow rings, NICs not found)", Severity.INFO)
    if name == "NCCL_PROTO":
        return ("restricting protocols costs bandwidth or latency, and forcing LL128 on a platform that does "
                "not support it can corrupt data", Severity.INFO)
    if name == "NCCL_ALGO":
        return ("restricting algorithms costs performance; forcing NVLS or CollNet where the hardware lacks "
                "them fails at init", Severity.INFO)
    if name == "NCCL_NET" and v.lower() == "socket":
        return ("forces TCP sockets even where RDMA NICs work", Severity.WARNING)
    if name == "NCCL_P2P_LEVEL" and v.upper() in ("LOC", "0"):
        return ("P2P off for every GPU pair (same as NCCL_P2P_DISABLE=1)", Severity.WARNING)
    return None


_FEATURE = {  # the names of topodoc.parsers.nccl_log's "disables" (what the log says a setting turns off)
    "NCCL_P2P_DISABLE": "P2P", "NCCL_P2P_LEVEL": "P2P", "NCCL_SHM_DISABLE": "SHM",
    "NCCL_IB_DISABLE": "IB/RoCE verbs transport", "NCCL_NET_GDR_LEVEL": "GPUDirect RDMA",
    "NCCL_NET_GDR_READ": "GPUDirect RDMA reads",
}




@rule(
    "nccl-env-risky-setting", "warning", ("nccl", "env"),
    title="A pasted NCCL setting causes a symptom people report (P2P/IB/GDR off, wrong interface, GID)",
    fix="remove the setting unless it works around a known problem on this cluster, and fix that problem",
)
def nccl_env_risky_setting(texts, logs=None) -> Iterator[Hit]:
    # what the NCCL log of the run already says is off is nccl-env-disables-feature's (P2P_DISABLE=1 is
    # logged as NCCL_P2P_LEVEL set to LOC: one feature, two names)
    off = {s.disables for s in getattr(logs, "env", ()) if getattr(s, "disables", None)} if logs else set()
    for path, found in texts_of(texts, KIND):
        for name, setting in found.last().items():
            risk = _risk(name, setting.value)
            if risk is None or _FEATURE.get(name) in off:
                continue
            text, severity = risk
            yield Hit(
                subject=name,
                message=f"{name}={setting.value}: {text}",
                evidence=(Evidence(TITLE, f"{path}:{setting.line}", f"{name}={setting.value}"),),
                fix=f"unset {name} (or document why this cluster needs it)" if severity != Severity.INFO
                else f"check that {name}={setting.value} is right for every node of the job",
                severity=severity,
            )


@rule(
    "nccl-env-explained", "info", ("nccl", "env"),
    title="What each pasted NCCL / libfabric / UCX setting changes",
    fix="nothing to fix: this lists what the settings do",
)
def nccl_env_explained(texts) -> Iterator[Hit]:
    for path, found in texts_of(texts, KIND):
        last = found.last()
        lines = []
        for name, setting in last.items():
            what = EXPLAIN.get(name, "not in topodoc's table (check NCCL's env.rst for its name)")
            lines.append(f"{name}={setting.value}: {what}")
        yield Hit(
            subject=f"{len(last)} setting(s)",
            message="; ".join(lines),
            evidence=tuple(Evidence(TITLE, f"{path}:{s.line}", f"{s.name}={s.value}") for s in
                           list(last.values())[:4]),
            fix="nothing to fix: this lists what the settings do",
        )


RULES: tuple[Rule, ...] = (nccl_env_risky_setting, nccl_env_explained)
