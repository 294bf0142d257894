"""CPU sets as sorted ranges: the kernel's cpulist (``"0-31,64-95"``) without ever expanding it.

A cpulist names CPUs by range, so a hostile or corrupt one (``"0-50000000"``) is a few bytes that an
eager expansion turns into gigabytes. :class:`CpuSet` keeps the merged inclusive ranges and does every
operation (count, membership, intersection, overlap, formatting) on them, in time linear in the number
of ranges. It is bounded by what a machine can hold: a CPU number at or above :data:`MAX_CPU`
(Linux's ``CONFIG_NR_CPUS`` tops out at 8192 on every architecture; 1 << 20 leaves room) is invalid
input, a :class:`CpuSetError` (a ``ValueError``), which collectors turn into a Gap.

The one place CPU sets are parsed and spelled: the probe (``topodoc.probe``) and the rules
(``topodoc.rules.machine``) both use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_CPU = 1 << 20  # CPU numbers must be below this (the kernel's NR_CPUS is at most 8192)
WORD_BITS = 64
_NUMBER = re.compile(r"[0-9]{1,12}")
_HEX = re.compile(r"[0-9a-fA-F]+")  # ASCII digits only, and short: int() never sees a huge string


class CpuSetError(ValueError):
    """A cpulist or affinity mask that is malformed or names CPUs no machine has."""


@dataclass(frozen=True)
class CpuSet:
    """Merged, sorted, inclusive ``(first, last)`` ranges of CPU numbers."""

    ranges: tuple[tuple[int, int], ...] = ()

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> CpuSet:
        """``"0-3,8,10-11"`` (the kernel's cpulist; blanks around items allowed, empty = no CPU)."""
        if not isinstance(text, str):
            raise CpuSetError(f"a cpulist is text, got {type(text).__name__}")
        ranges = []
        for item in text.strip().split(","):
            item = item.strip()
            if not item:
                continue
            low, sep, high = item.partition("-")
            first, last = _cpu(low, item), _cpu(high, item) if sep else None
            last = first if last is None else last
            if last < first:
                raise CpuSetError(f"descending range {_short(item)!r}")
            ranges.append((first, last))
        return cls._merged(ranges)

    @classmethod
    def from_cpus(cls, cpus: Iterable[int]) -> CpuSet:
        """From CPU numbers (any order, repeats allowed)."""
        ranges = []
        for cpu in cpus:
            if isinstance(cpu, bool) or not isinstance(cpu, int) or not 0 <= cpu < MAX_CPU:
                raise CpuSetError(f"not a CPU number: {_short(repr(cpu))}")
            ranges.append((cpu, cpu))
        return cls._merged(ranges)

    @classmethod
    def from_mask_words(cls, words: Iterable[int]) -> CpuSet:
        """NVML's affinity words: word ``k`` bit ``b`` set means CPU ``64 k + b``."""
        ranges = []
        for k, word in enumerate(words):
            if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word < 1 << WORD_BITS:
                raise CpuSetError(f"affinity word {k} is not a 64-bit mask: {_short(repr(word))}")
            if word and WORD_BITS * k >= MAX_CPU:
                raise CpuSetError(f"affinity word {k} names CPUs beyond {MAX_CPU - 1}")
            ranges.extend((WORD_BITS * k + lo, WORD_BITS * k + hi) for lo, hi in _bit_runs(word))
        return cls._merged(ranges)

    @classmethod
    def from_hex(cls, text: str) -> CpuSet:
        """A hex bitmap, most significant word first, words joined by commas, each maybe ``0x``-led:
        the kernel's ``cpumap`` (``"ffffffff,00000000"``), NCCL's ``affinity``, hwloc's ``cpuset``
        (``"0x0000ffff,0xffffffff"``). The digits are read as one number, as those writers pad every word
        but the first."""
        digits = text.strip().replace("0x", "").replace("0X", "").replace(",", "")
        if not digits or len(digits) > MAX_CPU // 4 or not _HEX.fullmatch(digits):
            raise CpuSetError(f"not a hex CPU mask: {_short(text)!r}")
        value = int(digits, 16)
        words = (value >> (WORD_BITS * k) & ((1 << WORD_BITS) - 1) for k in range(_words(value.bit_length())))
        return cls.from_mask_words(words)

    @classmethod
    def _merged(cls, ranges: list[tuple[int, int]]) -> CpuSet:
        merged: list[tuple[int, int]] = []
        for first, last in sorted(ranges):
            if merged and first <= merged[-1][1] + 1:
                if last > merged[-1][1]:
                    merged[-1] = (merged[-1][0], last)
            else:
                merged.append((first, last))
        return cls(tuple(merged))

    # -- queries ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(last - first + 1 for first, last in self.ranges)

    @property
    def count(self) -> int:
        return len(self)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and any(first <= cpu <= last for first, last in self.ranges)

    def __and__(self, other: CpuSet) -> CpuSet:
        """The CPUs in both sets (a merge walk over the two range lists)."""
        out, i, j = [], 0, 0
        a, b = self.ranges, other.ranges
        while i < len(a) and j < len(b):
            first, last = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if first <= last:
                out.append((first, last))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return CpuSet(tuple(out))

    def overlaps(self, other: CpuSet) -> bool:
        return bool(self & other)

    def issubset(self, other: CpuSet) -> bool:
        """Every CPU of this set is in ``other`` (the empty set is a subset of any)."""
        return (self & other) == self

    def __le__(self, other: CpuSet) -> bool:
        return self.issubset(other)

    def format(self) -> str:
        """The kernel's own spelling: ``"0-3,8"``; empty for no CPU."""
        return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in self.ranges)

    def hex_words(self, bits: int = 32) -> str:
        """The bitmap as ``bits``-bit hex words, most significant first, comma-joined (NCCL's topology
        ``affinity``): ``"00000000"`` for no CPU. Built from the ranges, one shift per range."""
        value = 0
        for first, last in self.ranges:
            value |= ((1 << (last - first + 1)) - 1) << first
        count = max(1, -(-value.bit_length() // bits))
        width, mask = bits // 4, (1 << bits) - 1
        return ",".join(f"{value >> (bits * i) & mask:0{width}x}" for i in reversed(range(count)))

    def __str__(self) -> str:
        return self.format()


def _cpu(text: str, item: str) -> int:
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        raise CpuSetError(f"not a CPU number in {_short(item)!r}")
    value = int(text)
    if value >= MAX_CPU:
        raise CpuSetError(f"CPU {value} is beyond any machine (at most {MAX_CPU - 1})")
    return value


def _words(bit_length: int) -> int:
    return -(-bit_length // WORD_BITS)


def _bit_runs(word: int) -> list[tuple[int, int]]:
    """The runs of set bits in ``word`` as (first, last) bit numbers, one step per run."""
    runs = []
    while word:
        low = (word & -word).bit_length() - 1
        shifted = word >> low
        ones = (shifted ^ (shifted + 1)).bit_length() - 1  # trailing ones of the shifted word
        runs.append((low, low + ones - 1))
        word &= ~(((1 << ones) - 1) << low)
    return runs


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
