"""``ulimit -a`` (bash's and dash's layouts) and ``ulimit -l``: each limit as printed.

Schema (:class:`UlimitText`): ``limits``, one :class:`Limit` per line (name as printed, the flag letter,
the unit, the value: ``unlimited`` or a number, 1-based ``line``); ``memlock_kb``: ``max locked memory``
(``-l``) in kbytes, ``None`` when unlimited or not printed, with ``memlock_line``; ``unknown``: other lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class UlimitParseError(ValueError):
    """No ulimit line."""


@dataclass(frozen=True, kw_only=True)
class Limit:
    name: str
    flag: str
    unit: str | None = None
    value: str
    line: int


@dataclass(frozen=True, kw_only=True)
class UlimitText:
    limits: tuple[Limit, ...] = ()
    memlock: str | None = None  # "unlimited" or kbytes as printed
    memlock_line: int = 0
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()

    @property
    def memlock_kb(self) -> int | None:
        return int(self.memlock) if self.memlock and self.memlock.isdigit() else None


# bash: "max locked memory       (kbytes, -l) 64"; dash/busybox: "-l: locked-in-memory size (kb)   64"
_BASH = re.compile(
    r"^(?P<name>[a-zA-Z][\w ./-]{1,40}?)\s+\((?:(?P<unit>[\w ]{1,20}), )?-(?P<flag>[a-zA-Z])\)\s+"
    r"(?P<value>unlimited|\d{1,20})\s*$"
)
_DASH = re.compile(r"^-(?P<flag>[a-zA-Z]): (?P<name>[\w -]{1,40}?)(?:\s+\((?P<unit>[\w ]{1,20})\))?\s+"
                   r"(?P<value>unlimited|\d{1,20})\s*$")
_PROMPT = re.compile(r"(?:^|[$#] )ulimit(?: -[a-zA-Z]{1,3})?\s*$")
_BARE = re.compile(r"^\s*(?P<value>unlimited|\d{1,20})\s*$")


def looks_like(lines: list[str]) -> bool:
    found = sum(1 for line in lines if _BASH.match(line) or _DASH.match(line))
    return found >= 3 or any(_BASH.match(line) and "-l)" in line for line in lines)


def parse(text: str) -> UlimitText:
    limits: list[Limit] = []
    unknown: list[tuple[int, str]] = []
    after_l = False  # "ulimit -l" prints the bare value on the next line
    memlock: tuple[str, int] | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _BASH.match(line) or _DASH.match(line)
        if m:
            limits.append(Limit(name=m["name"].strip(), flag=m["flag"], unit=m["unit"], value=m["value"],
                                line=number))
            if m["flag"] == "l":
                memlock = (m["value"], number)
            continue
        if _PROMPT.search(line):
            after_l = line.rstrip().endswith("-l")
            continue
        bare = _BARE.match(line)
        if bare and after_l:
            memlock = (bare["value"], number)
            limits.append(Limit(name="max locked memory", flag="l", unit="kbytes", value=bare["value"],
                                line=number))
            after_l = False
            continue
        unknown.append((number, line))
    if not limits:
        raise UlimitParseError("no ulimit line")
    return UlimitText(limits=tuple(limits), memlock=memlock[0] if memlock else None,
                      memlock_line=memlock[1] if memlock else 0, unknown=tuple(unknown))
