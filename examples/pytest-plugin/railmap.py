"""railmap: a tiny rank-to-NIC mapper, the kind of code launchers carry.

For each local GPU (found with NVML) pick the RDMA NIC nearest to it in the PCIe tree (read from sysfs
under ``root``, so tests can point it at a recorded tree) and build the environment a rank needs.
"""

from __future__ import annotations

import os
import subprocess


def _pci_path(root: str, address: str) -> list[str]:
    real = os.path.realpath(os.path.join(root, "sys/bus/pci/devices", address.lower()))
    return real.split(os.sep)


def _nics(root: str) -> dict[str, list[str]]:
    base = os.path.join(root, "sys/class/infiniband")
    if not os.path.isdir(base):
        return {}
    return {
        name: os.path.realpath(os.path.join(base, name, "device")).split(os.sep)
        for name in sorted(os.listdir(base))
    }


def _shared(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def gpu_bus_ids() -> list[str]:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        ids = []
        for i in range(count):
            bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).busId
            bus = bus.decode() if isinstance(bus, bytes) else bus
            ids.append(bus[-12:].lower())  # "00000000:07:00.0" -> "0000:07:00.0"
        return ids
    finally:
        pynvml.nvmlShutdown()


def nearest_nics(root: str = "/") -> dict[int, str | None]:
    """GPU index -> the RDMA NIC sharing the longest PCIe path with it (None without RDMA NICs)."""
    nics = _nics(root)
    out: dict[int, str | None] = {}
    for index, bus in enumerate(gpu_bus_ids()):
        path = _pci_path(root, bus)
        out[index] = max(nics, key=lambda n: (_shared(path, nics[n]), -len(nics[n])), default=None)
    return out


def rank_env(local_rank: int, root: str = "/") -> dict[str, str]:
    """The environment for one rank: its GPU, and its NIC when there is one."""
    env = {"CUDA_VISIBLE_DEVICES": str(local_rank)}
    nic = nearest_nics(root).get(local_rank)
    if nic:
        env["NCCL_IB_HCA"] = f"={nic}"
    return env


def topology_text() -> str:
    """What ``nvidia-smi topo -m`` prints (for a log line)."""
    return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=True).stdout
