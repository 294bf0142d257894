"""Small read primitives shared by the collectors: read, parse, and turn every failure into a Gap.

Collectors never raise on bad input: a file that is missing, unreadable or holds garbage yields
``None`` and (unless the file is optional) a :class:`~topodoc.model.Gap` naming what and why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from topodoc.cpuset import CpuSet
from topodoc.model import Gap, GapReason
from topodoc.probe.host import FsError, RootFs

T = TypeVar("T")


class Reader:
    """Reads through ``fs`` and appends a Gap to ``gaps`` for each value it could not get."""

    def __init__(self, fs: RootFs, gaps: list[Gap]) -> None:
        self.fs = fs
        self.gaps = gaps

    def gap(self, what: str, reason: GapReason, source: str = "", detail: str = "") -> None:
        self.gaps.append(Gap(what=what, reason=reason, source=source, detail=detail))

    def text(self, path: str, what: str, *, optional: bool = False) -> str | None:
        """The file's text, stripped; ``optional`` files that are absent give None without a Gap."""
        try:
            return self.fs.read_text(path).strip()
        except FsError as err:
            if not (optional and err.reason is GapReason.MISSING):
                self.gap(what, err.reason, path, err.detail)
            return None

    def parsed(self, path: str, what: str, parse: Callable[[str], T], *, optional: bool = False) -> T | None:
        """The file's text through ``parse``; garbage (ValueError) gives None and an ERROR gap."""
        raw = self.text(path, what, optional=optional)
        if raw is None:
            return None
        try:
            return parse(raw)
        except (ValueError, IndexError) as err:
            self.gap(what, GapReason.ERROR, path, f"cannot parse {raw[:60]!r}: {err}")
            return None

    def listdir(self, path: str, what: str, *, optional: bool = False) -> list[str]:
        try:
            return self.fs.listdir(path)
        except FsError as err:
            if not (optional and err.reason is GapReason.MISSING):
                self.gap(what, err.reason, path, err.detail)
            return []

    def realpath(self, path: str, what: str) -> str | None:
        """Where ``path`` leads with every symlink resolved; None and a Gap when it cannot be (a link
        loop, a missing link target)."""
        try:
            return self.fs.realpath(path)
        except FsError as err:
            self.gap(what, err.reason, path, err.detail)
            return None

    def link_name(self, path: str) -> str | None:
        """The last component of a symlink's target (``driver`` -> ``nvidia``), None when absent."""
        try:
            return self.fs.readlink(path).rstrip("/").rsplit("/", 1)[-1]
        except FsError:
            return None


MAX_DIGITS = 40  # no sysfs, procfs or NVML number is longer; int() never sees a 4,300-digit string
_INT = {
    10: re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}"),
    16: re.compile(rf"(?:0[xX])?[0-9a-fA-F]{{1,{MAX_DIGITS}}}"),
}


def parse_int(text: str, base: int = 10) -> int:
    """The one way the probe turns machine text into an int: ASCII digits only (``str.isdigit`` also
    accepts ``"\u00b2"``, which ``int`` refuses), at most :data:`MAX_DIGITS` of them; ValueError
    otherwise, which :meth:`Reader.parsed` turns into a Gap."""
    if not isinstance(text, str):
        raise ValueError(f"expected a number, got {type(text).__name__}")
    word = text.strip()
    if not _INT[base].fullmatch(word):
        raise ValueError(f"not a base-{base} number of at most {MAX_DIGITS} digits: {word[:40]!r}")
    return int(word, base)


def int_or_none(text: str | None, base: int = 10) -> int | None:
    """:func:`parse_int`, or None for absent or bad text."""
    try:
        return parse_int(text, base) if text is not None else None
    except ValueError:
        return None


def hex_int(text: str) -> int:
    return parse_int(text, 16)


def dec_int(text: str) -> int:
    return parse_int(text, 10)


def first_float(text: str) -> float | None:
    """``"16.0 GT/s PCIe"`` / ``"8 GT/s"`` -> 16.0 / 8.0; ``"Unknown"`` -> None."""
    word = text.split()[0] if text.split() else ""
    if word.lower() == "unknown":
        return None
    value = float(word) if len(word) <= MAX_DIGITS else math.inf
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {word[:40]!r}")
    return value


def parse_cpulist(text: str) -> CpuSet:
    """``"0-3,8,10-11"`` as a :class:`~topodoc.cpuset.CpuSet` (ranges, never expanded); ValueError
    (:class:`~topodoc.cpuset.CpuSetError`) on anything else, including CPUs no machine has."""
    return CpuSet.parse(text)


def format_cpulist(cpus: CpuSet | Iterable[int]) -> str:
    """A CpuSet or CPU numbers -> ``"0-3,8"`` (the kernel's own spelling)."""
    return (cpus if isinstance(cpus, CpuSet) else CpuSet.from_cpus(cpus)).format()
