"""Rules on Python tracebacks and framework lines that hold an NCCL error (PyTorch, vLLM, SGLang, DeepSpeed,
Ray, cupy, JAX) given to ``diagnose FILE...``.

The ``texts`` fact holds ``(path, kind, parsed)``; this rule reads kind ``nccl-traceback``
(:mod:`topodoc.parsers.pytrace`), by attribute. When the same file was also read as an NCCL log, the
file is left to the log rules when the analyzer found errors in it.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, rule

KIND = "nccl-traceback"
TITLE = "traceback"

# what each ncclResult_t covers, and the output that settles which case it is, most telling first
MEANING: dict[int, tuple[str, str]] = {
    1: ("a CUDA call inside NCCL failed (out of memory, a GPU fault with an Xid, CUDA error 802 'system not "
        "yet initialized' when the Fabric Manager is down on an NVSwitch system, CUDA IPC/P2P refused in a "
        "container)",
        "`sudo dmesg | grep -i -e xid -e nvrm`, `nvidia-smi`, `systemctl status nvidia-fabricmanager` on "
        "NVSwitch systems, and the job rerun with NCCL_DEBUG=INFO (the WARN line names the CUDA call)"),
    2: ("a system call failed inside NCCL (a socket to another rank, shared memory, a verbs call, an "
        "allocation): in containers most often /dev/shm too small, the locked-memory limit, or a socket on "
        "the wrong interface",
        "the job rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the WARN line names the call), "
        "`df -h /dev/shm` and `ulimit -l` inside the job's container, `env | grep NCCL_`"),
    3: ("NCCL hit an internal check; it is often the consequence of an earlier failure (a remote error "
        "surfacing as internal, NVIDIA/nccl#795) or of a topology it could not read",
        "the job rerun with NCCL_DEBUG=INFO: the first WARN line, not this one, is the cause"),
    4: ("NCCL rejected an argument",
        "the job rerun with NCCL_DEBUG=WARN (the WARN line names the argument)"),
    5: ("NCCL rejected the call: two ranks on one GPU (each process must call torch.cuda.set_device with "
        "its LOCAL_RANK), collectives that differ across ranks, or a malformed NCCL_* setting",
        "the job rerun with NCCL_DEBUG=WARN, `nvidia-smi` during the job (two processes on one GPU), "
        "`env | grep NCCL_`"),
    6: ("another rank exited or the network between ranks failed: this process's error is a consequence; "
        "the cause is on the first rank that failed or on the network it names",
        "the first failing rank's own log (its earliest error), the kernel log of its node, and the "
        "`Last error:` line's network (IB port state: `ibstat`)"),
    7: ("an NCCL operation was still in progress (non-blocking communicator)",
        "the job rerun with NCCL_DEBUG=INFO"),
    8: ("an NCCL operation timed out", "the job rerun with NCCL_DEBUG=INFO"),
}




@rule(
    "nccl-error-in-traceback", "error", ("nccl", "traceback", "framework"),
    title="A framework traceback holds an NCCL error",
    fix="read the NCCL result code's usual causes below, and run what settles which one it is",
)
def nccl_error_in_traceback(texts, logs=None) -> Iterator[Hit]:
    # a file also read as an NCCL log whose analyzer found errors in it is the log rules' (the analyzer reads
    # PyTorch's wrappers and Last error lines too); this rule speaks for the files it alone read
    analyzed = {e.file for e in getattr(logs, "errors", ())} if logs is not None else set()
    for path, trace in texts_of(texts, KIND):
        if path in analyzed:
            continue
        groups: dict[int | None, list] = {}
        for error in trace.nccl_errors:
            groups.setdefault(error.code, []).append(error)
        for code, errors in groups.items():
            first = errors[0]
            meaning, settle = MEANING.get(code, ("NCCL returned an error the line does not name", "the job "
                                                 "rerun with NCCL_DEBUG=INFO"))
            what = f"{first.name} (code {code})" if code is not None else "an NCCL error"
            where = f" in {first.call}" if first.call else ""
            calls = f" during {trace.calls[-1]}" if trace.calls else ""
            frames = f" ({', '.join(trace.frameworks)})" if trace.frameworks else ""
            version = f"; NCCL {first.nccl_version}" if first.nccl_version else ""
            last = trace.last_errors[0] if trace.last_errors else None
            said = f"; the Last error line says: {last.text}" if last else ""
            evidence = [Evidence(TITLE, f"{path}:{first.line}", first.text)]
            if last:
                evidence.append(Evidence(TITLE, f"{path}:{last.line}", last.text))
            yield Hit(
                subject=first.name or "NCCL",
                message=f"NCCL returned {what}{where}{calls}{frames}{version}{said}. It means {meaning}. "
                f"What settles it: {settle}",
                evidence=tuple(evidence),
                fix=f"find which case it is with {settle}",
                confidence=1.0 if code is not None else 0.5,
            )
        for timeout in trace.timeouts[:1]:
            yield Hit(
                subject=f"{timeout.op or 'collective'} #{timeout.seq}",
                message=f"PyTorch's watchdog timed out {timeout.op or 'a collective'} (SeqNum {timeout.seq}) "
                f"after {timeout.ran_ms or timeout.timeout_ms} ms: one rank never joined it (stuck, dead, or "
                "on a different code path) or its data could not move (P2P or network blocked)",
                evidence=(Evidence(TITLE, f"{path}:{timeout.line}", timeout.text),),
                fix="find the rank that did not reach this collective (its last log lines, py-spy dump) and "
                "rerun with NCCL_DEBUG=INFO; a first collective that never completes on a PCIe machine "
                "points at P2P blocked (ACS/IOMMU)",
            )


RULES: tuple[Rule, ...] = (nccl_error_in_traceback,)
