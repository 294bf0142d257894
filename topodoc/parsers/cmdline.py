"""The kernel command line as people paste it: ``cat /proc/cmdline`` (``BOOT_IMAGE=... root=... ro ...``),
the ``GRUB_CMDLINE_LINUX[_DEFAULT]="..."`` line of /etc/default/grub, and the kernel's own ``Command line:``
/ ``Kernel command line:`` boot line.

Schema (:class:`KernelCmdline`): ``lines``, one :class:`CmdlineLine` per command line found (where it came
from: ``proc``, ``grub`` or ``boot``; its ``params`` as ``(name, value or None)`` in order; 1-based
``line``); :meth:`KernelCmdline.settings` gives the IOMMU and ACS settings that matter for peer-to-peer
(``intel_iommu``, ``amd_iommu``, ``iommu``, ``iommu.passthrough``, ``pci`` containing ``noacs``) with the
last value of each, as the kernel reads them; ``unknown``: other lines (the first :data:`MAX_UNKNOWN`).
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
    reader = Reader()
    reader.feed(text)
    return reader.result()


MAX_UNKNOWN = 1000  # other lines kept: a whole dmesg holds its boot command line among 500,000 others
# each pattern above needs one of these on the line
_LITERALS = ("GRUB_CMDLINE_LINUX", "ommand line: ", "BOOT_IMAGE=")
_CAT = re.compile(r"(?:^|[$#] )cat /proc/cmdline\s*$")


class Reader:
    """:func:`parse` of a text given a piece at a time (each piece but the last ending with a newline):
    :meth:`feed` each, then :meth:`result` is :func:`parse` of the pieces joined. Once
    :data:`MAX_UNKNOWN` other lines are kept, only the lines holding a literal of a pattern are read."""

    def __init__(self) -> None:
        self.found: list[CmdlineLine] = []
        self.unknown: list[tuple[int, str]] = []
        self.lines = 0  # "\n" read so far

    def feed(self, piece: str) -> None:
        number, pos = self.lines + 1, 0
        self.lines += piece.count("\n")
        while len(self.unknown) < MAX_UNKNOWN and pos <= len(piece):  # line by line, as text.split("\n")
            end = piece.find("\n", pos)
            end = len(piece) if end < 0 else end
            self._line(number, piece[pos:end])
            number, pos = number + 1, end + 1
        if pos <= len(piece):
            for at, raw in _candidates(piece, pos, number):
                self._line(at, raw)

    def _line(self, number: int, raw: str) -> None:
        line = raw.rstrip()
        if not line.strip():
            return
        for source, pattern in (("grub", _GRUB), ("boot", _BOOT), ("proc", _PROC)):
            m = pattern.search(line) if source == "boot" else pattern.match(line)
            if m and ("=" in m["cmd"]):
                self.found.append(CmdlineLine(source=source, params=_params(m["cmd"]), line=number))
                return
        if len(self.unknown) < MAX_UNKNOWN and not _CAT.search(line):
            self.unknown.append((number, line))

    def result(self) -> KernelCmdline:
        if not self.found:
            raise CmdlineParseError("no kernel command line")
        return KernelCmdline(lines=tuple(self.found), unknown=tuple(self.unknown))


def _candidates(text: str, pos: int, number: int):
    """(line number, line) of the lines of ``text`` from ``pos`` (a line start, numbered ``number``) that
    hold one of :data:`_LITERALS`, in order."""
    starts: set[int] = set()
    for literal in _LITERALS:
        at = text.find(literal, pos)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            end = text.find("\n", at)
            if end < 0:
                break
            at = text.find(literal, end + 1)
    for start in sorted(starts):
        number += text.count("\n", pos, start)
        pos = start
        end = text.find("\n", start)
        yield number, text[start:] if end < 0 else text[start:end]


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
