"""Which NCCL / PyTorch / verbs messages mean what, and what to try.

:func:`lookup` maps one message to a :class:`Verdict` (category, explanation, and when the failure
catalogue :mod:`topodoc.catalogue` knows the line: its signature id, cause, fix and whether it is benign)
or ``None``; :func:`classify` is its ``(category, explanation)`` pair. The catalogue's data is tried
first; what stays here is what data cannot express: the IB completion status table (an explanation
computed from the status and vendor numbers), return-code chains, and word-level fallbacks for lines no
record knows (:data:`_WORDS`, which says why each cannot be a record).
Categories are the fixed names in :data:`topodoc.logmodel.ERROR_CATEGORIES`. Sources:
REFERENCE.md §1.14 (message texts and their usual meaning), §1.4-§1.8 (plugin and device messages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoc import catalogue

# how the explanation of PyTorch's "Last error:" line (NCCL's last WARN, repeated) starts
LAST_ERROR_NOTE = "PyTorch printed NCCL's last warning (ncclGetLastError) as the reason for the failure: "

# verbs ibv_wc_status, in enum order (REFERENCE.md §1.14)
WC_STATUS = (
    "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
    "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
    "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
    "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
)
_STATUS_HELP = {
    4: "local protection error: the NIC was refused access to the registered buffer. With GPU buffers "
    "this is usually PCIe ACS or the IOMMU redirecting peer-to-peer traffic, or nvidia_peermem missing; "
    "disable ACS on the bridges (or iommu=pt), load nvidia_peermem, or confirm with NCCL_NET_GDR_LEVEL=LOC.",
    5: "work request flushed: the queue pair had already failed, so this is a consequence; look for the "
    "first error before it (on another rank or host).",
    10: "remote access error: the peer refused the RDMA access (its memory registration or GPUDirect "
    "setup failed); check the peer host's peermem/ACS state and its own log.",
    12: "transport retry counter exceeded: the peer never acknowledged. A link, switch or the peer process "
    "went away, or on RoCE the GID index / RoCE version does not match (do not force NCCL_IB_GID_INDEX on "
    "2.21+); check ibstat/port counters on both ends and NCCL_IB_TIMEOUT.",
    13: "receiver-not-ready retries exceeded: the peer stopped posting receives (stalled or dead process).",
}
_VENDOR_HELP = {
    129: "vendor syndrome 0x81: the HCA's retry timer expired (no ACK from the remote side)",
    81: "vendor syndrome 0x51: the HCA reported a local protection fault on the DMA (GPU memory path)",
    136: "vendor syndrome 0x88: the remote side rejected the access",
    244: "vendor syndrome 0xf4: the QP was already in error and the request was flushed",
    249: "vendor syndrome 0xf9: the request was flushed after an earlier error",
}
_IB_CQE = re.compile(
    # "from peer <address> with ...", or "from peer with ..." where the user blanked the address
    r"Got completion (?:from peer )?(?:(?!with )(?P<peer>\S+) )?with (?:error |status=)"
    r"(?:\w+\()?(?P<status>\d+)\)?"
    r"(?:.*?vendor[ _]err(?:=| )?(?P<vendor>\d+))?"
)

# The last resort for warning lines that no record of the failure catalogue knows. Every message that is a
# signature lives in the catalogue (topodoc/catalogue/signatures.toml) with a real example line; what stays
# here cannot be a record: (1) words and word classes ("timed out", "ibv_... failed", "plugin") that name no
# single message, cause or fix, so a record would have no specific explanation and no example that is its
# own; (2) a few messages for which no real line from a public thread has been found yet (marked "no real
# line yet"): they become records, and leave this list, once one is.
_WORDS: tuple[tuple[str, str, str], ...] = (
    (r"Watchdog caught collective operation timeout|timed out|Timeout\(ms\)|[Tt]imeout waiting|"
     r"NCCL timeout|ncclTimeout", "timeout",
     "A collective did not finish in time. Usually one rank stopped (crash, hang, OOM, a straggler in data "
     "loading) or the network path stalled; find the first rank that stopped logging and its first WARN."),
    # "No device found" in any plugin's wording; the rest: no real line yet
    (r"No device found|No eligible providers|No IP interface found|Failed to initialize any NET"
     r"|no interface found|No usable listening interface",
     "no_net_device",
     "NCCL found no usable device for this network and falls back to the next one (usually Socket): check "
     "that the RDMA/EFA devices are visible (/dev/infiniband in containers), the interface names in "
     "NCCL_SOCKET_IFNAME / NCCL_IB_HCA, and NCCL_NET."),
    (r"[Cc]onnect to \S+ (?:failed|returned)|Connection refused", "socket_error",
     "A rank could not open a TCP connection to a peer: nothing listens at that address (the peer already "
     "exited, or a stale MASTER_ADDR / NCCL_COMM_ID / rendezvous file from another job), a firewall, or an "
     "interface the peer cannot reach; check that the address belongs to this job and NCCL_SOCKET_IFNAME on "
     "every node."),
    (r"Connection closed by remote peer|socketProgress|[Mm]essage truncated|[Aa]ccept failed|"
     r"Connection reset|[Bb]roken pipe|socket\w* failed|ncclSocketInit",
     "socket_error",
     "A TCP socket between ranks failed. Usually another rank exited or crashed first (find the earliest "
     "error across ranks); otherwise a firewall, a wrong NCCL_SOCKET_IFNAME, or ranks running different "
     "collectives / NCCL versions."),
    (r"remote process exited|remote error|retcode 6\b", "remote_error",
     "A remote rank exited or its network failed; this rank only noticed. Look at the other ranks' logs "
     "for the first failure."),
    (r"CUDA error|unhandled cuda error|cudaError", "cuda_error",
     "A CUDA call failed inside NCCL (out of memory, a GPU fault or Xid, an NVLS/Fabric Manager problem); "
     "check nvidia-smi, dmesg for Xid errors and the Fabric Manager on NVSwitch systems."),
    (r"ibv_(?:reg_mr|reg_dmabuf_mr|create_qp|create_cq)\w*(?:\(\))? (?:failed|returned)", "system_error",
     "A verbs resource could not be created: the locked-memory limit is too low (ulimit -l must be "
     "unlimited for the job, e.g. in the Slurm/systemd/container limits), or the HCA ran out of resources."),
    (r"ibv_modify_qp\w*(?:\(\))? (?:failed|returned)", "system_error",
     "Moving a queue pair to its connected state failed: on RoCE this is usually a GID index that is not a "
     "valid RoCEv2 address on this port (check NCCL_IB_GID_INDEX against show_gids; 2.21+ picks one itself), "
     "on IB a wrong port or a port that is down."),
    (r"unlink shared memory", "system_error",  # no real line yet
     "NCCL could not allocate or release its shared-memory segment: /dev/shm is too small, usually a "
     "container's 64 MB default (docker --shm-size, or mount a larger tmpfs in Kubernetes)."),
    (r"Failed to open libnvidia-ml", "system_error",  # no real line yet
     "NCCL could not load NVML: the driver's libnvidia-ml.so.1 is not visible to the process (container "
     "without the NVIDIA runtime, or a broken driver install)."),
    (r"Could not find real path", "system_error",
     "NCCL could not map a PCI bus id to sysfs, so it cannot read the topology: common in containers or VMs "
     "with a partial /sys; give it the host's /sys or an NCCL_TOPO_FILE."),
    (r"ibv_\w+(?:\(\))? (?:failed|returned)|unhandled system error|ncclSystemError", "system_error",
     "A system, socket or verbs call failed (ncclSystemError); the NCCL WARN line just before the failure "
     "names the call. It can also follow a remote peer that exited."),
    (r"invalid usage|invalid argument|Invalid NCCL_COMM_ID|Invalid value|ncclInvalidUsage|"
     r"ncclInvalidArgument", "invalid_usage",
     "NCCL was called in a way it rejects (two ranks on one GPU, a bad argument, a malformed setting); "
     "check the launcher's GPU assignment and the NCCL_* values."),
    (r"internal error|ncclInternalError", "internal_error",
     "NCCL reported an internal error; often a consequence of an earlier failure or a topology the build "
     "does not handle. Read the WARN lines before it."),
    (r"Affinity for GPU \d+ is empty", "affinity",  # no real line yet
     "The process's CPU set does not intersect the GPU's local CPUs, so NCCL ignores affinity: the launcher "
     "bound this rank to the wrong NUMA node; fix the binding (--cpu-bind, numactl) or the container "
     "cpuset."),
    (r"Could not enable P2P|P2P is disabled between", "p2p_disabled",
     "Peer-to-peer between these GPUs is off, so traffic bounces through host memory: check NCCL_P2P_DISABLE "
     "/ NCCL_P2P_LEVEL, ACS and IOMMU settings, and on NVLink systems the Fabric Manager."),
    (r"NET/OFI|Failed to initialize NET plugin|NET/Plugin.*(?:undefined symbol|wrong ELF|incompatible)|"
     r"NET/GPUDirectTCPX|plugin", "plugin_error",
     "A network plugin failed; NCCL goes on with the next network it can use (often Socket: its 'Using "
     "network' line says which). Check the plugin's "
     "libraries (aws-ofi-nccl, libfabric, the SHARP plugin) and pin NCCL_NET so a fallback fails loudly."),
)
_COMPILED = tuple((re.compile(p), c, e) for p, c, e in _WORDS)
_RETURN_CODE = {
    1: ("cuda_error", "a CUDA error propagated (code 1, ncclUnhandledCudaError)"),
    2: ("system_error", "a system call error propagated (code 2, ncclSystemError)"),
    4: ("invalid_usage", "an invalid argument propagated (code 4)"),
    5: ("invalid_usage", "an invalid usage propagated (code 5)"),
    6: ("remote_error", "a remote error propagated (code 6, ncclRemoteError)"),
}


@dataclass(frozen=True)
class Verdict:
    """What one message means: the LogError fields the analyzer fills from it."""

    category: str
    explanation: str
    signature: str | None = None
    cause: str | None = None
    fix: str | None = None
    benign: bool = False
    ib_status: int | None = None
    nccl_version: str | None = None  # the NCCL release the line states (PyTorch's, vLLM's own lines)

    def detail(self) -> dict:
        """The structured fields, for :meth:`LogState.note_error`."""
        return {"signature": self.signature, "cause": self.cause, "fix": self.fix, "benign": self.benign,
                "ib_status": self.ib_status}


def _signature(msg: str, line: str) -> catalogue.Signature | None:
    """The catalogue record of the whole line (its patterns may name the source location or ``NCCL
    WARN``), else of the message alone."""
    whole = line if line and msg in line else msg  # a literal missing from the line is missing from msg
    if not catalogue.holds_literal(whole[: catalogue.MAX_LINE]):
        return None
    return catalogue.match(whole) or (catalogue.match(msg) if whole is not msg else None)


def lookup(msg: str, line: str = "") -> Verdict | None:
    """The verdict on an error or warning message (``line``: the whole line it came from, when known), or
    ``None`` when nothing knows it."""
    sig = _signature(msg, line)
    version = _stated_version(sig, line or msg)
    cqe = _IB_CQE.search(msg)
    if cqe:
        status = int(cqe["status"])
        extra = {"signature": sig.id, "cause": sig.cause, "fix": sig.fix} if sig else {}
        return Verdict("ib_completion_error", explain_completion(status, cqe["vendor"]), ib_status=status,
                       **extra)
    if sig is None:
        return _generic(msg)
    wrapped = _wrapped(sig, line or msg, msg) if sig.category == "other" and not sig.benign else None
    if wrapped is not None:
        # a wrapper signature (PyTorch's DistBackendError): what it wraps names the category
        return Verdict(wrapped.category, wrapped.explanation, sig.id, sig.cause, sig.fix,
                       nccl_version=version)
    return Verdict(sig.category, sig.explanation, sig.id, sig.cause, sig.fix, sig.benign,
                   nccl_version=version)


def _stated_version(sig: catalogue.Signature | None, line: str) -> str | None:
    return catalogue.fields(sig, line).get("nccl_version") if sig is not None else None


def _wrapped(sig: catalogue.Signature, line: str, msg: str) -> Verdict | None:
    """What a wrapper line wraps (its ``what`` group, e.g. PyTorch's "unhandled system error"): the record
    that knows those words, else the word-level fallback on the whole message."""
    what = catalogue.fields(sig, line).get("what")
    inner = catalogue.match(what) if what else None
    if inner is not None and inner.id != sig.id and not inner.benign:
        return Verdict(inner.category, inner.explanation)
    return _generic(msg)


# A verbs call's errno decides what its failure means (the strerror text after "failed with error"): one
# call, different causes. Computed from (call, errno) because no record can hold every pair with a real
# example line; a line without an errno is explained no further than the call (REFERENCE.md §1.14).
_VERBS_FAILED = re.compile(r"(?P<call>ibv_\w+)(?:\(\))? (?:failed|returned)(?P<rest>[^\n]{0,120})")
_ERRNO = {
    "Cannot allocate memory": ("ENOMEM", {
        "reg": "the kernel refused to pin the buffer: the process's locked-memory limit (RLIMIT_MEMLOCK, "
        "`ulimit -l` inside the job) is below the registration's size, or the registration is larger than "
        "the HCA's translation tables allow (very large NCCL_BUFFSIZE or registered user buffers); set "
        "memlock to unlimited for the job (docker --ulimit memlock=-1, Slurm/systemd limits) and check it "
        "from inside a rank",
        "": "the HCA or the kernel ran out of memory for the resource: usually the locked-memory limit "
        "(`ulimit -l` inside the job must be unlimited), else too many queue pairs / completion queues "
        "(several communicators or libraries at once)",
    }),
    "Operation not supported": ("EOPNOTSUPP", {
        "dmabuf": "the RDMA stack cannot register GPU memory through DMA-BUF: a kernel before 5.12, a "
        "MOFED/rdma-core or HCA driver without dmabuf support, or the proprietary GPU kernel module "
        "(DMA-BUF needs the open one); NCCL_DMABUF_ENABLE=0 uses nvidia-peermem instead",
        "": "the HCA or its driver does not support the requested operation or attribute on this port",
    }),
    "Operation not permitted": ("EPERM", {
        "": "the process lacks a privilege the call needs: in a container, IPC_LOCK (memory pinning) or "
        "access to /dev/infiniband/uverbs*; run with --cap-add=IPC_LOCK and the RDMA devices (Kubernetes: "
        "the RDMA device plugin and the IPC_LOCK capability), or a memlock limit that covers the buffers",
    }),
    "Bad address": ("EFAULT", {
        "": "the kernel could not pin the pages for the NIC: for a GPU buffer no peer-memory path "
        "(nvidia-peermem not loaded or built against another OFED, a GPU without GPUDirect RDMA such as "
        "GeForce), or ACS/IOMMU on the path",
    }),
    "Invalid argument": ("EINVAL", {
        "modify_qp": "the queue pair's attributes do not fit this port: on RoCE a GID index that is not a "
        "valid RoCEv2 address here (check NCCL_IB_GID_INDEX against show_gids), an MTU or port the HCA "
        "rejects",
        "": "the driver rejected the call's arguments (access flags, sizes or a port the HCA does not "
        "support); for a GPU buffer, also no peer-memory client to take it",
    }),
    "No such device": ("ENODEV", {
        "": "the device or port is gone (link down, HCA reset, a GID index pointing at no address)",
    }),
    "Resource temporarily unavailable": ("EAGAIN", {
        "": "the HCA is out of a resource for now (queue pairs, memory regions); too many at once",
    }),
}


def _verbs_errno(msg: str) -> Verdict | None:
    """A failed verbs call explained by its errno (its strerror text anywhere after the call: "with error
    X", "with 22 X", ": X"); the call alone when none, or an unknown one, is printed."""
    found = _VERBS_FAILED.search(msg)
    if found is None:
        return None
    call, rest = found["call"], found["rest"]
    err = next((text for text in _ERRNO if text.lower() in rest.lower()), None)
    if err is None:
        shown = rest.strip(" :.,")
        said = f" ('{shown[:60]}')" if shown else " without an errno"
        return Verdict("system_error", f"The verbs call {call} failed{said}; the errno is what tells the "
                       "causes apart (ENOMEM: the locked-memory limit; EOPNOTSUPP: no DMA-BUF support; "
                       "EPERM: container capabilities; EFAULT: no peer-memory path for GPU memory).")
    name, by_call = _ERRNO[err]
    kind = next((k for k in by_call if k and k in call), "")
    return Verdict("system_error", f"The verbs call {call} failed with {name} ({err}): {by_call[kind]}.")


def _generic(msg: str) -> Verdict | None:
    verbs = _verbs_errno(msg)
    if verbs is not None:
        return verbs
    for pattern, category, explanation in _COMPILED:
        if pattern.search(msg):
            return Verdict(category, explanation)
    return None


def catalogued(msg: str, line: str = "") -> Verdict | None:
    """The verdict of the failure catalogue alone (lines that are not warnings: INFO, framework lines)."""
    sig = _signature(msg, line)
    if sig is None:
        return None
    return Verdict(sig.category, sig.explanation, sig.id, sig.cause, sig.fix, sig.benign,
                   nccl_version=_stated_version(sig, line or msg))


def classify(msg: str) -> tuple[str, str] | None:
    """Category and explanation for an error or warning message, or ``None`` when none applies."""
    found = lookup(msg)
    return (found.category, found.explanation) if found else None


def completion_status(text: str) -> int | None:
    """The verbs status of an IB completion error line (``error 12`` / ``status=...(12)``), else ``None``."""
    cqe = _IB_CQE.search(text)
    return int(cqe["status"]) if cqe else None


def explain_completion(status: int, vendor: str | None) -> str:
    name = WC_STATUS[status] if 0 <= status < len(WC_STATUS) else f"status {status}"
    text = f"IB work completion failed with {name} ({status}): "
    text += _STATUS_HELP.get(status, "the verbs layer reported a failed transfer; check both ends' ports.")
    if vendor is not None and int(vendor) in _VENDOR_HELP:
        text += f" Vendor error {vendor}: {_VENDOR_HELP[int(vendor)]}."
    return text


def return_code_error(code: int) -> tuple[str, str] | None:
    """An error for an ``file.cc:123 -> N`` chain seen without a WARN; ``None`` for benign codes (3, 7)."""
    found = _RETURN_CODE.get(code)
    if found is None:
        return None
    category, what = found
    return category, f"NCCL printed a return-code chain: {what}, without a WARN line explaining it."
