"""NCCL's default P2P and GPUDirect RDMA levels, by CPU and NCCL version — one place for the statements.

From NCCL ``src/graph/paths.cc`` (HEAD; REFERENCE.md §"Environment"):

* ``ncclTopoCheckP2p``: P2P is used up to ``PATH_PXB`` by default; on x86 AMD CPUs with at most two
  GPUs the default is ``PATH_SYS``; ``NCCL_P2P_LEVEL`` / ``NCCL_P2P_DISABLE`` override it.
* ``ncclTopoCheckGdr``: GPUDirect RDMA is used up to ``PATH_PXB`` by default, or up to ``PATH_P2C``
  (a Grace GPU reaching the NIC's CPU over NVLink-C2C) when ``NCCL_NET_GDR_C2C`` is 1 — its default
  from 2.27 (2.26 has it, off by default; older versions lack it); ``NCCL_NET_GDR_LEVEL`` overrides.

Legacy integer levels map 0..4 to LOC, PIX, PXB, PHB, SYS (larger -> SYS), as ``ncclGetLevel`` does.
"""

from __future__ import annotations

from topodoc.topology.vocab import NCCL_PATHS

P2P_DEFAULT = GDR_DEFAULT = "PXB"
LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")
SMI_TO_NCCL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
AMD = "AuthenticAMD"


def level(value: str | None) -> str | None:
    """An ``NCCL_*_LEVEL`` value as NCCL reads it (``PHB``, ``3``), or None when NCCL would ignore it."""
    text = (value or "").strip().upper()
    if text in NCCL_PATHS:
        return text
    if text[:1].isdigit():
        digits = "".join(c for c in text if c.isdigit()) or "0"
        return LEGACY_LEVELS[min(int(digits[:3]), len(LEGACY_LEVELS) - 1)]
    return None


def within(path: str | None, limit: str) -> bool:
    """True when NCCL path type (or nvidia-smi class) ``path`` is no farther than ``limit``."""
    nccl = SMI_TO_NCCL.get(path or "", path)
    if nccl not in NCCL_PATHS or limit not in NCCL_PATHS:
        return False
    return NCCL_PATHS.index(nccl) <= NCCL_PATHS.index(limit)


def p2p_default(cpu_vendor: str | None, gpus: int | None) -> tuple[str | None, str]:
    """NCCL's default P2P level on this machine and why; (None, why) when the CPU is unknown and matters."""
    if gpus is not None and gpus > 2:
        return P2P_DEFAULT, f"NCCL's default NCCL_P2P_LEVEL is PXB with more than two GPUs ({gpus} here)"
    if cpu_vendor is None:
        return None, ("NCCL's default NCCL_P2P_LEVEL depends on the CPU: PXB, except SYS on AMD x86 CPUs "
                      "with at most two GPUs (src/graph/paths.cc); the CPU is not known here")
    if cpu_vendor == AMD:  # the AuthenticAMD CPUID string is x86 only
        return "SYS", "NCCL's default NCCL_P2P_LEVEL is SYS on an AMD x86 CPU with at most two GPUs"
    return P2P_DEFAULT, f"NCCL's default NCCL_P2P_LEVEL is PXB on this CPU ({cpu_vendor})"


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    parts = (version or "").split("+")[0].split(".")
    try:
        return tuple(int(p) for p in parts[:3]) if version else None
    except ValueError:
        return None


def gdr_c2c(nccl_version: str | None, env: dict[str, str]) -> bool | None:
    """Whether NCCL allows GPUDirect RDMA over a P2C path: NCCL_NET_GDR_C2C when set, else the version's
    default (on from 2.27, off before); None when neither is known."""
    if "NCCL_NET_GDR_C2C" in env:
        return env["NCCL_NET_GDR_C2C"].strip() not in ("", "0")
    found = version_tuple(nccl_version)
    return None if found is None else found >= (2, 27)
