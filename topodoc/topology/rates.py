"""Theoretical link rates, per direction, in GB/s (REFERENCE.md §6).

PCIe: per-lane payload rate after line encoding (8b/10b for Gen1-2, 128b/130b for Gen3-5, FLIT for
Gen6). NVLink: per link, keyed by NVML's version enum, with the GPU's compute capability as a
fallback. These are line rates, not NCCL's effective model; the bandwidth model builds on them.
"""

from __future__ import annotations

# GB/s per lane, one direction.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8,
                  6: 64 * 242 / 256 / 8}
# sysfs/NVML GT/s -> generation
GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# NVML nvmlNvlinkVersion_t -> GB/s per link per direction (1.0: 20, 2.x-4.0: 25, 5.0: 50)
NVLINK_VERSION_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}
# compute capability major.minor -> GB/s per link, when NVML gave no version
NVLINK_SM_GBPS = {"6": 20.0, "7": 25.0, "8": 25.0, "8.6": 14.0625, "9": 25.0, "10": 50.0}
# NVML enum -> marketing version, for labels
NVLINK_VERSION_NAME = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}


def gen_of(speed_gts: float | None) -> int | None:
    """8.0 -> 3; None or an unknown rate -> None."""
    if speed_gts is None:
        return None
    return GTS_TO_GEN.get(round(float(speed_gts), 1))


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    if gen is None or width is None or gen not in PCIE_LANE_GBPS or width <= 0:
        return None
    return round(PCIE_LANE_GBPS[gen] * width, 2)


def nvlink_gbps(count: int, version: int | None, compute_capability: str | None) -> float | None:
    """Bandwidth of a bond of ``count`` NVLinks."""
    per_link = NVLINK_VERSION_GBPS.get(version) if version is not None else None
    if per_link is None and compute_capability:
        major = compute_capability.split(".")[0]
        per_link = NVLINK_SM_GBPS.get(compute_capability, NVLINK_SM_GBPS.get(major))
    return round(per_link * count, 2) if per_link is not None else None


def nccl_pcie_gbps(gen: int | None, width: int | None) -> float:
    """NCCL's own PCIe model: width x speedcode / 80 (Gen3 x16 = 12); unknown gen -> Gen3, width 0 -> 16."""
    speedcode = {1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}.get(gen or 0, 60)
    return (width or 16) * speedcode / 80
