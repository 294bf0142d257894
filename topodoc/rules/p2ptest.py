"""Rules on the CUDA samples people run to test peer-to-peer (``p2pBandwidthLatencyTest``, ``simpleP2P``):
wrong data or CUDA errors in peer copies, a run that stops after a matrix, and peer copies slower than
copies staged through host memory.

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kind ``cuda-p2p``
(:mod:`topodoc.parsers.cuda_samples`), by attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule

KIND = "cuda-p2p"
TITLE = "CUDA samples"
SETTLE = (
    "Settle it with `nvidia-smi topo -m` (the path between the GPUs), `sudo lspci -vvv | grep -i acsctl` "
    "(ReqRedir+/CmpltRedir+ on a bridge between them redirects peer traffic), `cat /proc/cmdline` and "
    "`sudo dmesg | grep -e DMAR -e AMD-Vi` (IOMMU translation)"
)
FIX = (
    "clear ACS redirect on the bridges between the GPUs (BIOS, `pci=noacs`, or `setpci -s BDF "
    "ECAP_ACS+6.w=0000` at boot), boot with `iommu=pt` (or the IOMMU off) on bare metal; until then run "
    "NCCL with NCCL_P2P_DISABLE=1"
)




def _at(path: str, line: int, text: str) -> Evidence:
    return Evidence(TITLE, f"{path}:{line}", text)


@rule(
    "cuda-p2p-test-failed", "error", ("p2p", "pcie", "cuda-samples"),
    title="A CUDA peer-to-peer test read wrong data, failed, or stopped after a matrix",
    fix=FIX,
)
def cuda_p2p_test_failed(texts) -> Iterator[Hit]:
    for path, run in texts_of(texts, KIND):
        wrong = [p for p in run.problems if p.kind == "wrong_data"]
        if wrong:
            yield Hit(
                subject="peer copies",
                message=f"{len(wrong)} verification error(s) after peer-to-peer copies (first at {path}:"
                f"{wrong[0].line}): the data written from one GPU into another's memory arrived wrong. On a "
                "PCIe machine peer DMA is being redirected or translated (ACS, IOMMU) or the platform does "
                f"not carry it; NCCL over the same path hangs or corrupts results. {SETTLE}",
                evidence=tuple(_at(path, p.line, p.text) for p in wrong[:2]),
            )
        errors = [p for p in run.problems if p.kind == "cuda_error"]
        if errors:
            yield Hit(
                subject="peer copies",
                message=f"a CUDA error in the peer-to-peer test ({path}:{errors[0].line}: {errors[0].text})",
                evidence=tuple(_at(path, p.line, p.text) for p in errors[:2]),
            )
        failed = [p for p in run.problems if p.kind == "failed"]
        if failed and not wrong and not errors:
            yield Hit(
                subject="peer copies",
                message=f"the test reported failure ({path}:{failed[0].line}: {failed[0].text}) without a "
                f"verification or CUDA error line in the paste: the lines above it say why. {SETTLE}",
                evidence=(_at(path, failed[0].line, failed[0].text),),
                confidence=0.7,
            )
        stop = _stopped(run)
        if stop is not None:
            line, what = stop
            yield Hit(
                subject="peer copies",
                message=f"the output ends after {what} ({path}:{line}) without the program's closing line: "
                "if the program did not return (it was not just cut when pasted), it hung in the copies "
                f"measured next, which points at DMA between the GPUs blocked on their path. {SETTLE}",
                evidence=(_at(path, line, what),),
                severity=Severity.WARNING,
                confidence=0.5,
            )


def _stopped(run) -> tuple[int, str] | None:
    """The last step printed when the run ends right after one that precedes a peer copy: a complete matrix
    of p2pBandwidthLatencyTest (each matrix is printed whole once measured), or simpleP2P's copy or kernel
    lines. A matrix cut mid-row is a cut paste, not a hang."""
    if run.finished or run.problems or run.damaged:
        return None
    if "p2pBandwidthLatencyTest" in run.programs and run.matrices:
        last = run.matrices[-1]
        end = max((r.line for r in last.rows), default=last.line)
        if end == run.last_line and last.rows:
            return end, f"the {last.title}"
    if "simpleP2P" in run.programs and run.stopped_after and run.stopped_after.startswith(
        ("Run kernel on GPU", "cudaMemcpyPeer")
    ):
        return run.last_line, f"'{run.stopped_after}'"
    return None


@rule(
    "cuda-p2p-slower-than-staged", "warning", ("p2p", "pcie", "bandwidth", "cuda-samples"),
    title="Peer-to-peer copies are slower than copies staged through host memory",
    fix="find why peer writes are slow on this path (ACS redirect, IOMMU, a root complex that forwards peer "
    "traffic slowly); until then NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL below this path) is faster",
)
def cuda_p2p_slower_than_staged(texts) -> Iterator[Hit]:
    for path, run in texts_of(texts, KIND):
        staged = _uni(run, False)
        peer = _uni(run, True)
        if staged is None or peer is None:
            continue
        slow = []
        for row in peer.rows:
            for dst, value in enumerate(row.values):
                base = staged.value(row.src, dst)
                if dst != row.src and base and value < 0.6 * base:
                    slow.append((row.src, dst, value, base, row.line))
        if not slow:
            continue
        pairs = len([1 for r in peer.rows for d in range(len(r.values)) if d != r.src])
        worst = min(slow, key=lambda s: s[2] / s[3])
        src, dst, value, base, line = worst
        yield Hit(
            subject=f"GPU{src} -> GPU{dst}" if len(slow) == 1 else f"{len(slow)} of {pairs} GPU pairs",
            message=f"with P2P enabled GPU{src} -> GPU{dst} copies at {value:g} GB/s, staged through host "
            f"memory at {base:g} GB/s ({path}:{line}); {len(slow)} of {pairs} pairs are below 60 % of their "
            "staged figure. Peer writes take a slow path: ACS redirect or IOMMU translation, or a CPU root "
            f"complex that forwards peer traffic slowly (common across root ports). {SETTLE}",
            evidence=(
                _at(path, line, f"{peer.title}: row {src} column {dst} = {value:g}"),
                _at(path, next((r.line for r in staged.rows if r.src == src), staged.line),
                    f"{staged.title}: row {src} column {dst} = {base:g}"),
            ),
        )


def _uni(run, p2p: bool):
    """The first unidirectional bandwidth matrix with P2P on (writes when both are printed) or off."""
    for matrix in run.matrices:
        if matrix.measure == "bandwidth" and matrix.direction == "uni" and matrix.p2p is p2p:
            return matrix
    return None


@rule(
    "cuda-p2p-access-denied", "info", ("p2p", "pcie", "cuda-samples"),
    title="CUDA reports no peer access between some GPU pairs",
    fix="nothing to fix when the platform does not carry P2P between those GPUs (NCCL then uses shared "
    "memory); if it should, check the path (`nvidia-smi topo -m`, `nvidia-smi topo -p2p r`) and ACS/IOMMU",
)
def cuda_p2p_access_denied(texts) -> Iterator[Hit]:
    for path, run in texts_of(texts, KIND):
        denied = [a for a in run.peer_access if not a.allowed]
        waived = [p for p in run.problems if p.kind == "waived"]
        if not denied and not waived:
            continue
        pairs = sorted({tuple(sorted((a.src, a.dst))) for a in denied})
        shown = ", ".join(f"GPU{a}-GPU{b}" for a, b in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
        total = len({tuple(sorted((a.src, a.dst))) for a in run.peer_access})
        what = (f"no peer access for {len(pairs)} of {total} GPU pairs ({shown})" if pairs
                else "the test was waived: no GPU pair has peer access")
        first = denied[0] if denied else waived[0]
        yield Hit(
            subject="peer access",
            message=f"CUDA reports {what}: between those GPUs the driver does not allow P2P (the platform or "
            "the PCIe path does not carry it, or the GPU model/driver does not enable it), so NCCL moves "
            "their traffic through host memory (SHM). This is a fact of the machine, not a failure; it "
            "matters when those pairs were expected to use P2P",
            evidence=(_at(path, first.line, getattr(first, "text", None) or
                          f"Device={first.src} CANNOT Access Peer Device={first.dst}"),),
        )


RULES: tuple[Rule, ...] = (cuda_p2p_test_failed, cuda_p2p_slower_than_staged, cuda_p2p_access_denied)
