"""Theoretical link rates, per direction, in GB/s (REFERENCE.md §6).

PCIe: per-lane payload rate after line encoding (8b/10b for Gen1-2, 128b/130b for Gen3-5, FLIT for
Gen6). NVLink: per link, keyed by NVML's version enum, with the GPU's compute capability as a
fallback. These are line rates, not NCCL's effective model; the bandwidth model builds on them.
"""

from __future__ import annotations

from topodoc.topology.vocab import PCIE_GENS, pcie_gen, pcie_lane_gbps

# NVML nvmlNvlinkVersion_t -> GB/s per link per direction (1.0: 20, 2.x-4.0: 25, 5.0: 50)
NVLINK_VERSION_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}
# compute capability major.minor -> GB/s per link, when NVML gave no version
NVLINK_SM_GBPS = {"6": 20.0, "7": 25.0, "8": 25.0, "8.6": 14.0625, "9": 25.0, "10": 50.0}
# NVML enum -> marketing version, for labels
NVLINK_VERSION_NAME = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}


def gen_of(speed_gts: float | None) -> int | None:
    """8.0 -> 3; None or an unknown rate -> None."""
    return pcie_gen(speed_gts)


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    if gen is None or width is None or gen not in PCIE_GENS or width <= 0:
        return None
    return round(pcie_lane_gbps(gen) * width, 2)


def nvlink_gbps(count: int, version: int | None, compute_capability: str | None) -> float | None:
    """Bandwidth of a bond of ``count`` NVLinks."""
    per_link = NVLINK_VERSION_GBPS.get(version) if version is not None else None
    if per_link is None and compute_capability:
        major = compute_capability.split(".")[0]
        per_link = NVLINK_SM_GBPS.get(compute_capability, NVLINK_SM_GBPS.get(major))
    return round(per_link * count, 2) if per_link is not None else None


def nccl_pcie_gbps(gen: int | None, width: int | None) -> float:
    """NCCL's own PCIe model: width x speedcode / 80 (Gen3 x16 = 12); unknown gen -> Gen3, width 0 -> 16."""
    speedcode = PCIE_GENS[gen][2] if gen in PCIE_GENS else PCIE_GENS[3][2]
    return (width or 16) * speedcode / 80
