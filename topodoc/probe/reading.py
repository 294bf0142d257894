"""Small read primitives shared by the collectors: read, parse, and turn every failure into a Gap.

Collectors never raise on bad input: a file that is missing, unreadable or holds garbage yields
``None`` and (unless the file is optional) a :class:`~topodoc.model.Gap` naming what and why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from topodoc.model import Gap, GapReason
from topodoc.probe.host import FsError, RootFs

T = TypeVar("T")


class Reader:
    """Reads through ``fs`` and appends a Gap to ``gaps`` for each value it could not get."""

    def __init__(self, fs: RootFs, gaps: list[Gap]) -> None:
        self.fs = fs
        self.gaps = gaps

    def gap(self, what: str, reason: GapReason, source: str = "", detail: str = "") -> None:
        self.gaps.append(Gap(what, reason, source, detail))

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

    def link_name(self, path: str) -> str | None:
        """The last component of a symlink's target (``driver`` -> ``nvidia``), None when absent."""
        try:
            return self.fs.readlink(path).rstrip("/").rsplit("/", 1)[-1]
        except FsError:
            return None


def hex_int(text: str) -> int:
    return int(text, 16)


def dec_int(text: str) -> int:
    return int(text, 10)


def first_float(text: str) -> float | None:
    """``"16.0 GT/s PCIe"`` / ``"8 GT/s"`` -> 16.0 / 8.0; ``"Unknown"`` -> None."""
    word = text.split()[0] if text.split() else ""
    if word.lower() == "unknown":
        return None
    return float(word)


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> [0, 1, 2, 3, 8, 10, 11]; raises ValueError on anything else."""
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"descending range {part!r}")
        cpus.extend(range(first, last + 1))
    return cpus


def format_cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> ``"0-3,8"`` (the kernel's own spelling)."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = prev = None
    for cpu in ordered + [None]:
        if start is not None and (cpu is None or cpu != prev + 1):
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(ranges)
