"""Kernel facts: release, command line, IOMMU mode, the NVIDIA driver, GPUDirect RDMA modules.

Reads: ``/proc/sys/kernel/osrelease``, ``/proc/cmdline``, ``/sys/kernel/iommu_groups`` (listing) and
``/sys/kernel/iommu_groups/<first group>/type`` (``identity`` = passthrough, ``DMA``/``DMA-FQ`` =
translated; kernel >= 5.11), ``/proc/driver/nvidia/version`` (``NVRM version: NVIDIA UNIX [Open
Kernel Module for ]x86_64 Kernel Module  550.54.15 ...``), ``/sys/module/nvidia_peermem`` (exists),
``/sys/module/nvidia_peermem/version``, ``/sys/kernel/mm/memory_peers/nv_mem/version`` (legacy
``nv_peer_mem``).

DMA-BUF: NCCL uses it with the *open* NVIDIA kernel module on Linux >= 5.12 (NVIDIA GPUDirect RDMA
docs; NCCL troubleshooting guide); ``dmabuf_supported`` states exactly that (None without a driver).
"""

from __future__ import annotations

import re

from topodoc.model import KernelInfo
from topodoc.probe.reading import Reader

NVIDIA_VERSION = "/proc/driver/nvidia/version"
PEERMEM = "/sys/module/nvidia_peermem"
NV_PEER_MEM = "/sys/kernel/mm/memory_peers/nv_mem/version"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
DRIVER_LINE = re.compile(r"Kernel Module(?: for [\w-]+)?\s+(\d+\.\d+(?:\.\d+)?)")


def collect_kernel(reader: Reader) -> KernelInfo:
    release = reader.text("/proc/sys/kernel/osrelease", "kernel release")
    cmdline = reader.text("/proc/cmdline", "kernel command line")
    groups = reader.listdir(IOMMU_GROUPS, "IOMMU groups", optional=True)
    group_type = (
        reader.text(f"{IOMMU_GROUPS}/{groups[0]}/type", "IOMMU domain type", optional=True)
        if groups
        else None
    )
    nvidia = reader.text(NVIDIA_VERSION, "NVIDIA kernel driver version", optional=True)
    driver_version, open_module = parse_nvidia_version(nvidia)
    peermem, peer_version = _peermem(reader)
    return KernelInfo(
        release=release,
        cmdline=cmdline,
        iommu_mode=iommu_mode(cmdline, len(groups), group_type),
        iommu_groups=len(groups),
        nvidia_driver_version=driver_version,
        nvidia_open_kernel_module=open_module,
        peermem_module=peermem,
        peermem_version=peer_version,
        dmabuf_supported=_dmabuf(release, open_module),
    )


def parse_nvidia_version(text: str | None) -> tuple[str | None, bool | None]:
    if not text:
        return None, None
    first = text.splitlines()[0]
    match = DRIVER_LINE.search(first)
    return (match.group(1) if match else None), "Open Kernel Module" in first


def iommu_mode(cmdline: str | None, groups: int, group_type: str | None) -> str:
    """``off``, ``passthrough`` or ``translated`` from the groups and the command line."""
    words = dict(w.partition("=")[::2] for w in (cmdline or "").split())
    if groups == 0:
        return "off"
    if group_type == "identity" or words.get("iommu") == "pt":
        return "passthrough"
    if group_type in ("DMA", "DMA-FQ") or words.get("intel_iommu") == "on" or words.get("amd_iommu") == "on":
        return "translated"
    return "unknown"


def _peermem(reader: Reader) -> tuple[str | None, str | None]:
    if reader.fs.exists(PEERMEM):
        return "nvidia_peermem", reader.text(f"{PEERMEM}/version", "nvidia_peermem version", optional=True)
    legacy = reader.text(NV_PEER_MEM, "nv_peer_mem version", optional=True)
    return ("nv_peer_mem", legacy) if legacy is not None else (None, None)


def _dmabuf(release: str | None, open_module: bool | None) -> bool | None:
    if open_module is None:
        return None
    match = re.match(r"([0-9]{1,6})\.([0-9]{1,6})", release or "")
    return bool(open_module and match and (int(match[1]), int(match[2])) >= (5, 12))
