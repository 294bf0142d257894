"""The probe's small pure parsers, on real spellings and on arbitrary input (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topodoc.cpuset import CpuSet
from topodoc.probe import pcicfg
from topodoc.probe.hostinfo import parse_cpuinfo
from topodoc.probe.kernel import iommu_mode, parse_nvidia_version
from topodoc.probe.pci import aer_total, upstream
from topodoc.probe.reading import first_float, format_cpulist, parse_cpulist


@given(st.sets(st.integers(0, 1023), max_size=200))
def test_cpulist_round_trip(cpus):
    text = format_cpulist(sorted(cpus))
    assert format_cpulist(parse_cpulist(text)) == text
    assert parse_cpulist(text) == CpuSet.from_cpus(cpus)


@pytest.mark.parametrize("text, cpus", [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("5", [5]), ("", [])])
def test_cpulist_kernel_spellings(text, cpus):
    assert parse_cpulist(text) == CpuSet.from_cpus(cpus)


@given(st.binary(max_size=4096))
def test_config_space_decoding_is_total(data):
    pcicfg.port_type(data), pcicfg.acs_ctrl(data)
    assert len(pcicfg.zero_serial(data)) == len(data)


def test_config_space_port_type_acs_and_serial():
    cfg = bytearray(4096)
    cfg[0x06] = 0x10  # status: capability list present
    cfg[0x34] = 0x40
    cfg[0x40:0x44] = bytes([0x10, 0x00, 0x62, 0x00])  # PCIe cap, flags: downstream port (6)
    cfg[0x100:0x104] = (0x0003 | (1 << 16) | (0x110 << 20)).to_bytes(4, "little")  # DSN -> next 0x110
    cfg[0x104:0x10C] = b"SERIAL!!"
    cfg[0x110:0x114] = (0x000D | (1 << 16)).to_bytes(4, "little")  # ACS, last
    cfg[0x116:0x118] = (0x1D).to_bytes(2, "little")  # SV RR CR UF
    assert pcicfg.port_type(bytes(cfg)) == "downstream"
    assert pcicfg.acs_ctrl(bytes(cfg)) == 0x1D
    assert pcicfg.acs_ctrl(bytes(cfg[:64])) is None  # what a non-root reader sees
    assert b"SERIAL" not in pcicfg.zero_serial(bytes(cfg))


@pytest.mark.parametrize(
    "text, value", [("16.0 GT/s PCIe", 16.0), ("8 GT/s", 8.0), ("2.5 GT/s PCIe", 2.5), ("Unknown", None)]
)
def test_link_speed_spellings_across_kernels(text, value):
    assert first_float(text) == value


def test_aer_counter_file():
    text = "RxErr 0\nBadTLP 3\nBadDLLP 1\nTOTAL_ERR_COR 4\n"
    assert aer_total(text) == 4
    with pytest.raises(ValueError):
        aer_total("RxErr 0\n")


def test_upstream_chain():
    assert upstream("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:1a:00.0") == (
        "0000:17:00.0",
        "pci0000:15",
    )
    assert upstream("/sys/devices/pci0000:00/0000:00:03.0") == (None, "pci0000:00")


@pytest.mark.parametrize(
    "line, version, is_open",
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
            "535.129.03",
            False,
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs@U16)",
            "550.54.15",
            True,
        ),
        (
            "NVRM version: NVIDIA UNIX aarch64 Kernel Module  560.35.03  Fri Aug 16 21:21:48 UTC 2024",
            "560.35.03",
            False,
        ),
    ],
)
def test_nvidia_driver_version_lines(line, version, is_open):
    assert parse_nvidia_version(line + "\nGCC version:  gcc version 12.2.0\n") == (version, is_open)


@pytest.mark.parametrize(
    "cmdline, groups, kind, mode",
    [
        ("ro quiet", 0, None, "off"),
        ("ro iommu=pt intel_iommu=on", 120, None, "passthrough"),
        ("ro", 80, "identity", "passthrough"),
        ("ro", 80, "DMA-FQ", "translated"),
        ("ro", 3, None, "unknown"),
    ],
)
def test_iommu_mode(cmdline, groups, kind, mode):
    assert iommu_mode(cmdline, groups, kind) == mode


def test_cpuinfo_two_sockets_with_hypervisor():
    blocks = [
        f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n"
        f"physical id\t: {i // 2}\nflags\t\t: fpu vme hypervisor\n"
        for i in range(4)
    ]
    info = parse_cpuinfo("\n".join(blocks))
    assert (info["sockets"], info["logical"], info["virtualized"]) == (2, 4, True)
