"""The shared vocabulary of hardware questions: one place for each list every layer uses.

* ``SMI_LEVELS``: nvidia-smi's PCI path classes, nearest first (``NV#`` sits above them);
* ``NCCL_PATHS``: NCCL's path types, nearest first, as in NCCL 2.27+ (P2C and C2C exist only on Grace);
* ``RDMA_KINDS`` / ``VERBS_KINDS``: the NIC kinds (``model.Nic.kind``) that do RDMA, and those with verbs
  ports under ``/sys/class/infiniband``;
* ``PCIE_GENS``: each PCIe generation's signalling rate, line encoding and NCCL's speed code
  (REFERENCE.md §6.1 for the rates; NCCL's ``kvDictPciGen``, §3.3, for the codes).
"""

from __future__ import annotations

SMI_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
NCCL_PATHS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")

RDMA_KINDS = ("ib", "roce", "efa")
VERBS_KINDS = ("ib", "roce")

# gen -> (GT/s per lane, encoding efficiency, NCCL speed code in units of 100 Mb/s per lane)
PCIE_GENS: dict[int, tuple[float, float, int]] = {
    1: (2.5, 8 / 10, 15),
    2: (5.0, 8 / 10, 30),
    3: (8.0, 128 / 130, 60),
    4: (16.0, 128 / 130, 120),
    5: (32.0, 128 / 130, 240),
    6: (64.0, 242 / 256, 480),  # FLIT mode: 236 payload bytes of 256 is ~7.4 GB/s per lane
}


def level_rank(level: str | None) -> int:
    """Position of an nvidia-smi PCI class in :data:`SMI_LEVELS`; unknown classes sort last."""
    return SMI_LEVELS.index(level) if level in SMI_LEVELS else len(SMI_LEVELS)


def pcie_gen(speed_gts: float | None) -> int | None:
    """8.0 GT/s -> 3; None or an unknown rate -> None."""
    if speed_gts is None:
        return None
    for gen, (rate, _enc, _code) in PCIE_GENS.items():
        if abs(rate - float(speed_gts)) < 0.01:
            return gen
    return None


def pcie_lane_gbps(gen: int) -> float:
    """GB/s per lane, one direction, after line encoding."""
    rate, encoding, _code = PCIE_GENS[gen]
    return rate * encoding / 8
