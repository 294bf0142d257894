"""Grace-coupled GPUs (GH200, GB200) through NVML: NVLink-C2C links to the CPU and the GPU NUMA ID.

NVML calls (``i`` a GPU index), made for every GPU after its PCIe and affinity calls:

- ``nvmlDeviceGetNumaNodeId(i)`` -> int: the NUMA node the GPU's memory *is*, on platforms where GPUs
  are NUMA nodes (Grace: 2/10/18/26 on a GB200 tray); a PCIe GPU answers NotSupported (seen on 8x L4,
  driver 580: kubernetes-sigs/dra-driver-nvidia-gpu#1165; NVIDIA/cuCascade#119 states the meaning).
- ``nvmlDeviceGetFieldValues(i, [170])`` (``NVML_FI_DEV_C2C_LINK_COUNT``) -> ``[{"fieldId": 170,
  "nvmlReturn": 0, "value": n}]``; when ``n > 0``, one more call
  ``nvmlDeviceGetFieldValues(i, [[171, 0], [172, 0], [171, 1], [172, 1], ...])``: (field id, scope id =
  link) pairs for ``NVML_FI_DEV_C2C_LINK_GET_STATUS`` (1 = up) and ``..._C2C_LINK_GET_MAX_BW`` (MB/s).

NCCL reads the same fields (``src/graph/xml.cc``: links whose status is 1 are counted, ``bw`` is the
last such link's max bandwidth) and prices the GPU-CPU link as ``bw x count / 1000`` GB/s
(``src/graph/topo.cc``, ``ncclTopoAddC2c``; REFERENCE.md §3.3, §4); :func:`c2c` does the same.

NotSupported is an answer, not a gap: the GPU is no NUMA node, or has no C2C link. Anything else that
keeps a value unknown (FunctionNotFound on an older driver, a tape recorded before topodoc asked) is
returned as a :class:`Miss`; the caller folds those into one gap per value and machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from topodoc.probe.host import NvmlError

C2C_LINK_COUNT, C2C_LINK_STATUS, C2C_LINK_MAX_BW = 170, 171, 172
MAX_C2C_LINKS = 64  # sanity bound on the count field (GB10 reports 8, GB300 5)
NOT_SUPPORTED = 3

Call = Callable[..., object]


@dataclass(frozen=True)
class Miss:
    """A Grace value left unknown on one GPU, and the error that left it so."""

    what: str  # "GPU NUMA ID", "C2C links"
    source: str  # "nvml:nvmlDeviceGetNumaNodeId"
    error: NvmlError
    gpu: int = -1


def gpu_numa_id(call: Call, i: int, misses: list[Miss]) -> int | None:
    try:
        value = call("nvmlDeviceGetNumaNodeId", i)
    except NvmlError as err:
        if err.code != NOT_SUPPORTED:
            misses.append(Miss("GPU NUMA ID", "nvml:nvmlDeviceGetNumaNodeId", err, i))
        return None
    return value if isinstance(value, int) and value >= 0 else None


def c2c(call: Call, i: int, misses: list[Miss]) -> tuple[int | None, float | None]:
    """(links up, GB/s per direction as NCCL computes it); ``(0, None)`` on a GPU without C2C."""
    count = _link_count(call, i, misses)
    if not count:
        return count, None
    pairs = [[field, link] for link in range(count) for field in (C2C_LINK_STATUS, C2C_LINK_MAX_BW)]
    entries = _fields(call, i, pairs, misses)
    if entries is None:
        return None, None
    up = [bw for status, bw in zip(entries[::2], entries[1::2], strict=False)
          if _ok(status) and status.get("value") == 1 and _ok(bw) and isinstance(bw.get("value"), int)]
    if not up:
        return 0, None
    return len(up), round(up[-1]["value"] * len(up) / 1000, 3)


def _link_count(call: Call, i: int, misses: list[Miss]) -> int | None:
    entries = _fields(call, i, [C2C_LINK_COUNT], misses)
    if entries is None:
        return None
    entry = entries[0]
    code = entry.get("nvmlReturn")
    if code == NOT_SUPPORTED:
        return 0
    value = entry.get("value")
    if code != 0 or not isinstance(value, int) or not 0 <= value <= MAX_C2C_LINKS:
        error = NvmlError(code or 999, f"link count {value!r}")
        misses.append(Miss("C2C links", "nvml:nvmlDeviceGetFieldValues", error, i))
        return None
    return value


def _fields(call: Call, i: int, ids: list, misses: list[Miss]) -> list[dict] | None:
    """The per-field answers, or None (with a Miss) when the call or its shape fails."""
    try:
        answer = call("nvmlDeviceGetFieldValues", i, ids)
    except NvmlError as err:
        if err.code == NOT_SUPPORTED:  # the whole call: as if each field had said so
            return [{"nvmlReturn": NOT_SUPPORTED} for _ in ids]
        misses.append(Miss("C2C links", "nvml:nvmlDeviceGetFieldValues", err, i))
        return None
    shaped = isinstance(answer, list) and len(answer) == len(ids)
    if not shaped or not all(isinstance(e, dict) for e in answer):
        error = NvmlError(999, "unexpected answer")
        misses.append(Miss("C2C links", "nvml:nvmlDeviceGetFieldValues", error, i))
        return None
    return answer


def _ok(entry: dict) -> bool:
    return entry.get("nvmlReturn") == 0
