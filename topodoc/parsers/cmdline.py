"""The kernel command line as people paste it: ``cat /proc/cmdline`` (``BOOT_IMAGE=... root=... ro ...``),
the ``GRUB_CMDLINE_LINUX[_DEFAULT]="..."`` line of /etc/default/grub, and the kernel's own ``Command line:``
/ ``Kernel command line:`` boot line.

Schema (:class:`KernelCmdline`): ``lines``, one :class:`CmdlineLine` per command line found (where it came
from: ``proc``, ``grub`` or ``boot``; its ``params`` as ``(name, value or None)`` in order; 1-based
``line``); :meth:`KernelCmdline.settings` gives the IOMMU and ACS settings that matter for peer-to-peer
(``intel_iommu``, ``amd_iommu``, ``iommu``, ``iommu.passthrough``, ``pci`` containing ``noacs``) with the
last value of each, as the kernel reads them; ``unknown``: other lines.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass


class CmdlineParseError(ValueError):
    """No kernel command line."""


@dataclass(frozen=True, kw_only=True)
class CmdlineLine:
    source: str  # "proc", "grub", "boot"
    params: tuple[tuple[str, str | None], ...]
    line: int


@dataclass(frozen=True, kw_only=True)
class KernelCmdline:
    lines: tuple[CmdlineLine, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()

    def settings(self) -> dict[str, tuple[str, int]]:
        """IOMMU / ACS parameter -> (value as written, line), the last occurrence winning."""
        out: dict[str, tuple[str, int]] = {}
        for item in self.lines:
            for name, value in item.params:
                if name in IOMMU_PARAMS or (name == "pci" and value and "noacs" in value.split(",")):
                    out[name] = (value or "", item.line)
        return out


IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")
_PROC = re.compile(r"^(?:\S{0,80}[#$] )?(?P<cmd>BOOT_IMAGE=\S{1,400}.{0,4000})$")
_GRUB = re.compile(
    r"^\s*(?:#\s*)?GRUB_CMDLINE_LINUX(?:_DEFAULT)?=(?P<cmd>\".{0,4000}\"|'.{0,4000}'|\S{0,4000})\s*$"
)
_BOOT = re.compile(r"\b(?:Kernel command line|Command line): (?P<cmd>.{1,4000})$")


def looks_like(lines: list[str]) -> bool:
    starts = ("BOOT_IMAGE=", "$ cat /proc/cmdline")
    return any(_GRUB.match(line) or _BOOT.search(line) or line.lstrip().startswith(starts) for line in lines)


def parse(text: str) -> KernelCmdline:
    found: list[CmdlineLine] = []
    unknown: list[tuple[int, str]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        for source, pattern in (("grub", _GRUB), ("boot", _BOOT), ("proc", _PROC)):
            m = pattern.search(line) if source == "boot" else pattern.match(line)
            if m and ("=" in m["cmd"]):
                found.append(CmdlineLine(source=source, params=_params(m["cmd"]), line=number))
                break
        else:
            if not re.search(r"(?:^|[$#] )cat /proc/cmdline\s*$", line):
                unknown.append((number, line))
    if not found:
        raise CmdlineParseError("no kernel command line")
    return KernelCmdline(lines=tuple(found), unknown=tuple(unknown))


def _params(cmd: str) -> tuple[tuple[str, str | None], ...]:
    cmd = cmd.strip()
    if len(cmd) >= 2 and cmd[0] == cmd[-1] and cmd[0] in "\"'":
        cmd = cmd[1:-1]
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    out = []
    for word in words:
        name, eq, value = word.partition("=")
        out.append((name, value if eq else None))
    return tuple(out)
