"""Planted differences for fleet tests and the fleet benchmark (not used by the comparison itself).

Each planter changes one property of a snapshot in JSON form the way a real faulty node would, and
returns the fingerprint key that must then differ. ``vary_identity`` gives a copy the identity of
another node (host name, serials, UUIDs, MACs, GUIDs, boot id), which must never show as a difference.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable


def vary_identity(data: dict, n: int) -> dict:
    out = json.loads(json.dumps(data))  # a deep copy, several times faster than copy.deepcopy
    out.setdefault("host", {})["hostname"] = f"node-{n:05d}"
    out["host"]["boot_id"] = f"{n:08x}-0000-4000-8000-{n:012x}"
    out["recorded_at"] = f"2026-12-01T00:{n % 60:02d}:00Z"
    for gpu in out.get("gpus") or ():
        gpu["serial"] = f"{1650000000000 + n * 16 + gpu.get('index', 0)}"
        gpu["uuid"] = f"GPU-{n:08x}-0000-4000-8000-{gpu.get('index', 0):012x}"
    for i, nic in enumerate(out.get("nics") or ()):
        nic["node_guid"] = f"{n:04x}:{i:04x}:0000:0001"
    for i, net in enumerate(out.get("net") or ()):
        net["mac"] = f"02:{n >> 16 & 255:02x}:{n >> 8 & 255:02x}:{n & 255:02x}:00:{i:02x}"
    return out


def _gpu(data: dict, rng: random.Random) -> dict:
    return rng.choice(data["gpus"])


def _pci_of(data: dict, address: str | None) -> dict:
    return data["pci"][address]


def width(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    _pci_of(data, gpu["pci_address"])["link"]["width"] = 8
    gpu["pcie_width"] = 8
    return f"GPU{gpu['index']}.pcie.width"


def max_gen(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    link = _pci_of(data, gpu["pci_address"])["link"]
    link["max_speed_gts"] = 8.0
    link["speed_gts"] = 8.0
    return f"GPU{gpu['index']}.pcie.max"


def nvlink_down(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    rng.choice(gpu["nvlinks"])["active"] = False
    return f"GPU{gpu['index']}.nvlink"


def port_down(data: dict, rng: random.Random) -> str:
    nic = rng.choice([n for n in data["nics"] if n.get("ports")])
    nic["ports"][0]["state"] = "DOWN"
    return f"{nic['name']}:{nic['ports'][0]['port']}.state"


def port_rate(data: dict, rng: random.Random) -> str:
    nic = rng.choice([n for n in data["nics"] if n.get("ports")])
    nic["ports"][0]["rate_gbps"] = nic["ports"][0]["rate_gbps"] / 2
    return f"{nic['name']}:{nic['ports'][0]['port']}.rate"


def firmware(data: dict, rng: random.Random) -> str:
    nic = rng.choice(data["nics"])
    nic["fw_version"] = "28.39.9999"
    return f"{nic['name']}.fw"


def nic_missing(data: dict, rng: random.Random) -> str:
    nic = rng.choice(data["nics"])
    data["nics"] = [n for n in data["nics"] if n is not nic]
    return f"{nic['name']}.present"


def peermem(data: dict, rng: random.Random) -> str:
    data["kernel"]["peermem_module"] = None
    return "peermem"


def iommu(data: dict, rng: random.Random) -> str:
    data["kernel"]["iommu_mode"] = "translated"
    return "iommu"


def acs(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    parent = _pci_of(data, gpu["pci_address"])["parent"]
    data["pci"][parent]["acs_ctrl"] = 0x1D
    return "acs"


def driver(data: dict, rng: random.Random) -> str:
    data["driver"]["driver_version"] = "535.54.03"
    return "driver"


def kernel(data: dict, rng: random.Random) -> str:
    data["kernel"]["release"] = "5.15.0-999-generic"
    return "kernel"


def gpu_model(data: dict, rng: random.Random) -> str:
    _gpu(data, rng)["name"] = "NVIDIA H100 PCIe"
    return "gpus"


def gpu_numa(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    gpu["numa_node"] = 1 - (gpu.get("numa_node") or 0)
    return f"GPU{gpu['index']}.numa"


def gpu_lost(data: dict, rng: random.Random) -> str:
    gpu = _gpu(data, rng)
    gpu["lost"] = True
    return f"GPU{gpu['index']}.lost"


PLANTERS: dict[str, Callable[[dict, random.Random], str]] = {
    f.__name__: f
    for f in (
        width,
        max_gen,
        nvlink_down,
        port_down,
        port_rate,
        firmware,
        nic_missing,
        peermem,
        iommu,
        acs,
        driver,
        kernel,
        gpu_model,
        gpu_numa,
        gpu_lost,
    )
}
