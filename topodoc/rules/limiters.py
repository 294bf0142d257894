"""Why a measured busbw falls short of the model: the likely limiters the model itself cannot see.

The bandwidth model already prices the links as they trained (PCIe generation and width, active
NVLinks), so a shortfall comes from how NCCL used them: the transport, GPUDirect RDMA, environment
overrides (read from an NCCL log), or NICs and GDR prerequisites that the model assumes (read from the
snapshot). Pure: reads the parsed log and the snapshot, returns :class:`Cause` objects, worst first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from topodoc.model import NcclTestsRun, Snapshot
from topodoc.rules.engine import Evidence
from topodoc.rules.machine import rdma_nics

if TYPE_CHECKING:  # annotations only
    from topodoc.bandwidth.compare import Comparison

# Settings that do not switch a feature off but pin NCCL's choice, often to a slower one.
PINNING = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS",
           "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_BUFFSIZE")


@dataclass(frozen=True)
class Cause:
    limiter: str  # a few words: "socket transport (NET/Socket)"
    reason: str  # why it caps busbw, in the units of the comparison
    evidence: tuple[Evidence, ...]
    fix: str


def likely_causes(snapshot: Snapshot | None, logs, run: NcclTestsRun, best: Comparison) -> list[Cause]:
    """Every limiter the log and snapshot show, most decisive first; never empty."""
    inter = best.scope == "inter-node" or (run.nodes or 1) > 1
    found = _log_causes(logs, inter) if logs is not None else []
    if snapshot is not None and inter:
        found += _nic_causes(snapshot) + _gdr_prereq_causes(snapshot)
    return found or [_unexplained(logs is not None)]


def _log_evidence(items) -> tuple[Evidence, ...]:
    return tuple(Evidence("log", f"{e.file}:{e.line}", e.text.strip()) for e in items[:2])


def _log_causes(logs, inter: bool) -> list[Cause]:
    summary = logs.summary
    causes = []
    if summary.transport == "Socket":
        causes.append(Cause(
            "socket transport (NET/Socket)",
            "the NCCL log shows inter-node traffic over TCP sockets through host memory: a few GB/s per "
            "node instead of the NICs' RDMA rate",
            _log_evidence(summary.evidence.get("transport", ())),
            "make NCCL use RDMA: unset NCCL_IB_DISABLE / NCCL_NET=Socket, fix an NCCL_IB_HCA filter that "
            "matches nothing, expose /dev/infiniband to the container (topodoc explain nccl-socket-fallback)",
        ))
    if inter and summary.transport != "Socket" and summary.gdr_mode in ("not_used", "asymmetric"):
        causes.append(Cause(
            "GPUDirect RDMA not used",
            f"GDR is {summary.gdr_mode.replace('_', ' ')}: network data is staged through host memory, "
            "which caps each NIC well below its line rate",
            _log_evidence(summary.evidence.get("gdr", ())),
            "load nvidia_peermem (or use DMA-BUF with NCCL >= 2.18), check NCCL_NET_GDR_LEVEL and the "
            "GPU-NIC PCIe distance (topodoc explain nccl-gdr-not-used)",
        ))
    causes += [_env_cause(setting) for setting in logs.env if setting.disables or setting.name in PINNING]
    if not inter and "SHM" in summary.intra_node and not any(t.startswith("P2P") for t in summary.intra_node):
        causes.append(Cause(
            "SHM instead of P2P",
            "GPUs on this node exchange data through host shared memory, not NVLink/PCIe peer-to-peer: "
            "every byte crosses the CPU and its memory",
            _log_evidence(summary.evidence.get("intra_node", ())),
            "remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL overrides; in a VM or container check that P2P is "
            "allowed (topodoc explain nccl-p2p-disabled)",
        ))
    return causes


def _env_cause(setting) -> Cause:
    what = f"switches off {setting.disables}" if setting.disables else "pins a choice NCCL would tune itself"
    return Cause(
        f"{setting.name}={setting.value}",
        f"the environment {what}",
        _log_evidence((setting.evidence,)),
        f"rerun without {setting.name} and compare",
    )


def _nic_causes(snapshot: Snapshot) -> list[Cause]:
    down = [(nic, port) for nic in rdma_nics(snapshot) for port in nic.ports
            if port.state is not None and port.state != "ACTIVE"]
    if not down:
        return []
    names = ", ".join(f"{nic.name} port {port.port} {port.state}" for nic, port in down[:4])
    return [Cause(
        f"{len(down)} RDMA NIC port(s) not ACTIVE",
        f"{names}: the model counts every NIC in the node's bandwidth, and the ranks on those rails "
        "either share another NIC or fall back",
        tuple(Evidence("sysfs", f"/sys/class/infiniband/{nic.name}/ports/{port.port}/state", str(port.state),
                       key=f"{nic.name}:{port.port}")
              for nic, port in down[:2]),
        "check cables and the switch port (`ibstat`, `iblinkinfo`); topodoc explain ib-port-down",
    )]


def _gdr_prereq_causes(snapshot: Snapshot) -> list[Cause]:
    kernel = snapshot.kernel
    if kernel is None or kernel.peermem_module or kernel.dmabuf_supported is not False:
        return []
    return [Cause(
        "GPUDirect RDMA unavailable",
        "neither nvidia_peermem nor DMA-BUF is available, so NCCL stages network data through host "
        "memory; the model assumes GPUDirect RDMA on every rail",
        (Evidence("sysfs", "/sys/module/nvidia_peermem/version", "absent"),
         Evidence("derived", "DMA-BUF support", str(kernel.dmabuf_supported))),
        "load nvidia_peermem (`modprobe nvidia_peermem`) or use a kernel and driver with DMA-BUF; "
        "topodoc explain gdr-prereq-missing",
    )]


def _unexplained(have_logs: bool) -> Cause:
    hint = "" if have_logs else "; give this run's NCCL log (NCCL_DEBUG=INFO) with --log to see the transport"
    return Cause(
        "unknown to topodoc",
        "nothing in the snapshot" + (" or the log" if have_logs else "") + " explains the gap to the model's "
        "bottleneck" + hint,
        (),
        "check GPU clocks and throttling (`nvidia-smi -q -d PERFORMANCE,CLOCK`), other jobs on the GPUs "
        "and NICs, NCCL_ALGO/NCCL_PROTO/NCCL_NVLS_ENABLE overrides, and rerun with NCCL_DEBUG=INFO",
    )
