"""The host itself: name, kernel, OS, CPU model and counts, hypervisor flag, boot id.

Reads: ``/proc/sys/kernel/hostname``, ``/proc/sys/kernel/osrelease``, ``/etc/os-release``
(``PRETTY_NAME``), ``/proc/cpuinfo`` (``vendor_id``, ``model name``, ``physical id``, ``processor``,
the ``hypervisor`` flag), ``/proc/sys/kernel/random/boot_id``.
"""

from __future__ import annotations

from topodoc.model import HostInfo
from topodoc.probe.reading import Reader


def collect_host(reader: Reader) -> HostInfo:
    cpu = reader.parsed("/proc/cpuinfo", "CPU information", parse_cpuinfo) or {}
    return HostInfo(
        hostname=reader.text("/proc/sys/kernel/hostname", "hostname"),
        kernel=reader.text("/proc/sys/kernel/osrelease", "kernel release"),
        os_name=reader.parsed("/etc/os-release", "OS name", pretty_name, optional=True),
        cpu_model=cpu.get("model"),
        cpu_vendor=cpu.get("vendor"),
        sockets=cpu.get("sockets"),
        logical_cpus=cpu.get("logical"),
        virtualized=cpu.get("virtualized"),
        boot_id=reader.text("/proc/sys/kernel/random/boot_id", "boot id", optional=True),
    )


def parse_cpuinfo(text: str) -> dict:
    """x86 and Arm ``/proc/cpuinfo`` -> model, vendor, sockets, logical CPU count, hypervisor flag."""
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), []).append(value.strip())
    flags = (fields.get("flags") or fields.get("Features") or [""])[0].split()
    sockets = len(set(fields.get("physical id", []))) or None
    return {
        "model": (fields.get("model name") or [None])[0],
        "vendor": (fields.get("vendor_id") or fields.get("CPU implementer") or [None])[0],
        "sockets": sockets,
        "logical": len(fields.get("processor", [])) or None,
        "virtualized": "hypervisor" in flags if flags else None,
    }


def pretty_name(text: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    raise ValueError("no PRETTY_NAME")
