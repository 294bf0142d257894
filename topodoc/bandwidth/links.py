"""Per-link bandwidth figures: the line rate and what NCCL's topology model assumes.

Every figure is GB/s (1e9 bytes/s) **per direction**. ``line_gbps`` is the signalling rate after line
encoding; ``nccl_gbps`` is the effective figure NCCL's graph search uses (REFERENCE.md §3.3), which is
what a healthy nccl-tests busbw is measured against. Sources are cited per function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoc.topology import vocab
from topodoc.topology.vocab import PCIE_GENS


@dataclass(frozen=True)
class LinkRate:
    kind: str  # "pcie", "nvlink", "nvswitch", "c2c", "cpu", "nic"
    label: str  # "PCIe Gen4 x16", "12x NVLink3", "AMD Infinity Fabric", "IB 4X NDR 400 Gb/s"
    line_gbps: float | None  # per direction, after encoding; None when no public figure applies
    nccl_gbps: float | None  # NCCL's modelled effective bandwidth per direction
    source: str = ""


# --- PCI Express (REFERENCE.md §6.1; NCCL kvDictPciGen / ncclTopoAddPci, §3.3) -------------------------
# the generation table lives in topology/vocab.py (PCIE_GENS: GT/s, encoding, NCCL speed code)
NCCL_PCI_UNKNOWN_CODE = 60  # NCCL's fallback when the link speed string is not in its table
PCIE_SOURCE = "REFERENCE.md §6.1 (line rate), §3.3 (NCCL: width x speed code / 80)"


def pcie_gen(speed_gts: float | None) -> int | None:
    """8.0 GT/s -> 3. ``None`` for an unknown rate."""
    return vocab.pcie_gen(speed_gts)


def pcie(gen: int | None, width: int | None) -> LinkRate:
    """One PCIe link by generation and lane count, both as trained (current), not as capable."""
    lanes = width if width else 16  # NCCL: width 0 -> 16
    if gen not in PCIE_GENS:
        nccl = lanes * NCCL_PCI_UNKNOWN_CODE / 80
        return LinkRate("pcie", f"PCIe (speed unknown) x{lanes}", None, nccl, PCIE_SOURCE)
    rate, encoding, code = PCIE_GENS[gen]
    line = round(rate * encoding * lanes / 8, 2)
    return LinkRate("pcie", f"PCIe Gen{gen} x{lanes}", line, lanes * code / 80, PCIE_SOURCE)


def pcie_from_speed(speed_gts: float | None, width: int | None) -> LinkRate:
    return pcie(pcie_gen(speed_gts), width)


# --- NVLink (REFERENCE.md §6.2; NCCL ncclTopoNVLinkBw, §3.3) ------------------------------------------
NVLINK_SOURCE = "REFERENCE.md §6.2 (line rate per link), §3.3 (NCCL SMxx_NVLINK_BW)"


def sm_number(compute_capability: str | None) -> int | None:
    """"9.0" -> 90, "8.6" -> 86."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", compute_capability or "")
    return int(match[1]) * 10 + int(match[2]) if match else None


def nvlink_generation(sm: int | None) -> int | None:
    if sm is None:
        return None
    for floor, gen in ((100, 5), (90, 4), (80, 3), (70, 2), (60, 1)):
        if sm >= floor:
            return gen
    return None


def nccl_nvlink_per_link(sm: int | None) -> float:
    """NCCL picks the per-link figure from the SM: >=100 40.1, >=90 20.6, ==86 12, >=60 18/20."""
    if sm is None:
        return 20.0  # SM80_NVLINK_BW is NCCL's default
    if sm >= 100:
        return 40.1
    if sm >= 90:
        return 20.6
    if sm == 86:
        return 12.0
    return 18.0 if sm < 70 else 20.0


def line_nvlink_per_link(sm: int | None) -> float | None:
    """Per link, per direction: NVLink1 20, NVLink2-4 25, GA10x 14.0625, NVLink5 50 GB/s."""
    if sm == 86:
        return 14.0625
    return {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}.get(nvlink_generation(sm) or 0)


def nvlink(sm: int | None, count: int) -> LinkRate:
    """``count`` bonded NVLinks between two endpoints (GPU-GPU bridge or GPU-NVSwitch)."""
    gen = nvlink_generation(sm)
    per_line = line_nvlink_per_link(sm)
    line = round(per_line * count, 2) if per_line is not None else None
    nccl = round(nccl_nvlink_per_link(sm) * count, 2)
    name = f"NVLink{gen}" if gen else "NVLink"
    return LinkRate("nvlink", f"{count}x {name}", line, nccl, NVLINK_SOURCE)


def nvswitch(sm: int | None, links_per_gpu: int) -> LinkRate:
    """A GPU's share of an NVSwitch fabric: all its links, to any peer (REFERENCE.md §6.3)."""
    rate = nvlink(sm, links_per_gpu)
    return LinkRate("nvswitch", f"NVSwitch ({rate.label} per GPU)", rate.line_gbps, rate.nccl_gbps,
                    "REFERENCE.md §6.3 (NVSwitch gives each GPU its full NVLink bandwidth to any peer)")


# --- NVLink-C2C (Grace GH200/GB200; REFERENCE.md §3.3, §4; NCCL ncclTopoAddC2c) ---------------------------
C2C_SOURCE = ("REFERENCE.md §3.3/§4 (NCCL ncclTopoAddC2c: NVML C2C per-link max bandwidth (MB/s) x links up"
              " / 1000 GB/s; e.g. GB10 <c2c bw=43125 count=8> -> C2C[345.0], NVIDIA/nccl#2202)")


def c2c(links: int | None, gbps: float | None) -> LinkRate:
    """A Grace GPU's NVLink-C2C link to its CPU, as NVML reports it and NCCL prices it: the driver's
    figure is both the line rate and NCCL's model (NCCL applies no efficiency factor to it)."""
    label = f"NVLink-C2C ({links} links)" if links else "NVLink-C2C"
    return LinkRate("c2c", label, gbps, gbps, C2C_SOURCE)


# --- CPU interconnect (REFERENCE.md §6.6; NCCL topo.h, §3.3) ------------------------------------------
CPU_SOURCE = "REFERENCE.md §6.6 / §3.3 (NCCL's modelled inter-socket bandwidth, not a vendor peak)"
# Xeon Scalable digit after the tier digit: 1 Skylake, 2 Cascade Lake, 3 Ice Lake, 4 Sapphire Rapids,
# 5 Emerald Rapids (NCCL buckets by CPUID model: >=0xCF ERP, >=0x8F SRP, >=0x55 SKL, else BDW).
_XEON_SCALABLE = re.compile(r"(?:Platinum|Gold|Silver|Bronze)\s+(\d)(\d)\d\d")
_XEON_6 = re.compile(r"Xeon\(?R?\)?\s+6\d\d\d")  # Xeon 6 (Granite/Sierra Forest): model 0xAD/0xAF -> SRP
_XEON_E5_V = re.compile(r"E[57]-\d{4}\w*\s+v(\d)")
_INTEL_FIGURES = {"bdw": ("Intel QPI (Broadwell or older)", 6.0), "skl": ("Intel UPI (Skylake-class)", 10.0),
                  "srp": ("Intel UPI (Sapphire Rapids-class)", 22.0),
                  "erp": ("Intel UPI (Emerald Rapids or newer)", 40.0)}


def intel_class(model_name: str | None, model_id: int | None = None) -> str:
    """NCCL's Intel bucket from the CPUID model when known, else from the marketing name."""
    if model_id is not None:
        thresholds = ((0xCF, "erp"), (0x8F, "srp"), (0x55, "skl"))
        return next((name for floor, name in thresholds if model_id >= floor), "bdw")
    name = model_name or ""
    scalable = _XEON_SCALABLE.search(name)
    if scalable:
        gen = int(scalable[2])
        return "erp" if gen >= 5 else "srp" if gen == 4 else "skl"
    if _XEON_6.search(name) or "CPU Max" in name:
        return "srp"
    e5 = _XEON_E5_V.search(name)
    if e5 or re.search(r"E[57]-\d{4}", name):
        return "bdw"
    return "skl"


def cpu_interconnect(
    vendor: str | None, model_name: str | None = None, model_id: int | None = None
) -> LinkRate:
    """The inter-socket link as NCCL models it, by CPUID vendor string (``GenuineIntel``, ...)."""
    vendor = vendor or ""
    name = model_name or ""
    if vendor == "AuthenticAMD" or "AMD" in name:
        return LinkRate("cpu", "AMD Infinity Fabric", None, 16.0, CPU_SOURCE)
    if vendor == "GenuineIntel" or "Intel" in name:
        label, bw = _INTEL_FIGURES[intel_class(name, model_id)]
        return LinkRate("cpu", label, None, bw, CPU_SOURCE)
    if vendor.strip() in ("CentaurHauls", "Shanghai") or "Zhaoxin" in name:
        return LinkRate("cpu", "Zhaoxin ZPI", None, 6.0, CPU_SOURCE)
    if "POWER9" in name.upper():
        return LinkRate("cpu", "POWER9 X-bus", None, 32.0, CPU_SOURCE)
    # Arm's /proc/cpuinfo has no vendor_id line: "CPU implementer : 0x41" (Arm Ltd.) is what stands for it
    if vendor.startswith("ARM") or vendor.lower() == "0x41" or "Neoverse" in name or "Grace" in name:
        return LinkRate("cpu", "ARM inter-socket", None, 6.0, CPU_SOURCE)
    return LinkRate("cpu", "inter-socket link (CPU unknown)", None, 10.0, CPU_SOURCE + "; SKL figure assumed")


# --- NICs (REFERENCE.md §6.4, §6.5; NCCL: speed Mb/s / 8000) ------------------------------------------
IB_LANE_GBPS = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0625, "EDR": 25.0,
                "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}
NIC_SOURCE = "REFERENCE.md §6.4/§6.5 (port rate / 8); NCCL uses the reported speed / 8000 per Mb/s"
_IB_RATE = re.compile(r"(\d+)X\s+(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)", re.IGNORECASE)


def nic(rate_gbps: float | None, kind: str = "ib", rate_text: str | None = None) -> LinkRate:
    """One NIC port by its reported rate (``400``, "400 Gb/sec (4X NDR)"), as NCCL sees it."""
    match = _IB_RATE.search(rate_text or "")
    if rate_gbps is None and match:
        rate_gbps = int(match[1]) * IB_LANE_GBPS[match[2].upper()]
    if rate_gbps is None:
        return LinkRate("nic", f"{kind} port (rate unknown)", None, 1.25, NIC_SOURCE + " (<=0 -> 10 Gb/s)")
    gbps = round(rate_gbps / 8, 3)
    return LinkRate("nic", _nic_label(rate_gbps, kind, match), gbps, gbps, NIC_SOURCE)


def _nic_label(rate_gbps: float, kind: str, match: re.Match | None) -> str:
    rate = f"{rate_gbps:g} Gb/s"
    if match:
        return f"IB {match[1]}X {match[2].upper()} {rate}"
    names = {"ib": "IB", "roce": "RoCE", "efa": "EFA", "gvnic": "gVNIC", "ethernet": "Ethernet"}
    return f"{names.get(kind, kind)} {rate}"
