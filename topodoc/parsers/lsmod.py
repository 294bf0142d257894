"""``lsmod`` and ``lsmod | grep X`` output: the modules listed, and what each ``grep`` found (an empty
``lsmod | grep nvidia_peermem`` is itself the answer people post).

Schema (:class:`LsmodText`): ``modules``, one :class:`Module` per line (name, size, use count, the modules
using it, 1-based ``line``); ``whole``: the ``Module Size Used by`` header was pasted (the list is every
loaded module); ``greps``: each ``lsmod | grep PATTERN`` command with the module names printed under it
(empty when grep found nothing); ``unknown``: other lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class LsmodParseError(ValueError):
    """No lsmod line."""


@dataclass(frozen=True, kw_only=True)
class Module:
    name: str
    size: int
    used: int
    by: tuple[str, ...] = ()
    line: int


@dataclass(frozen=True, kw_only=True)
class Grep:
    pattern: str
    found: tuple[str, ...] = ()
    line: int


@dataclass(frozen=True, kw_only=True)
class LsmodText:
    modules: tuple[Module, ...] = ()
    whole: bool = False
    greps: tuple[Grep, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()

    def loaded(self, name: str) -> Module | None:
        return next((m for m in self.modules if m.name == name), None)


_MODULE = re.compile(r"^(?P<name>[a-z][a-z0-9_]{1,60})\s+(?P<size>\d{1,12})\s+(?P<used>-?\d{1,6})"
                     r"(?:\s+(?P<by>[\w,\-\[\]]{1,800}))?\s*$")
_HEADER = re.compile(r"^Module\s+Size\s+Used by\s*$")
_GREP = re.compile(r"\blsmod\s*\|\s*(?:e?grep|rg)\s+(?:-[a-zA-Z]{1,3}\s+)*[\"']?(?P<pat>[^\"'|\s]{1,80})")


def looks_like(lines: list[str]) -> bool:
    if any(_HEADER.match(line) or _GREP.search(line) for line in lines):
        return True
    return sum(1 for line in lines if _MODULE.match(line) and "_" in line.split()[0]) >= 3


def parse(text: str) -> LsmodText:
    modules: list[Module] = []
    greps: list[dict] = []
    unknown: list[tuple[int, str]] = []
    whole = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _HEADER.match(line):
            whole = True
            continue
        g = _GREP.search(line)
        if g:
            greps.append({"pattern": g["pat"], "found": [], "line": number})
            continue
        m = _MODULE.match(line)
        if m:
            by = tuple(b for b in (m["by"] or "").split(",") if b and b != "-")
            modules.append(
                Module(name=m["name"], size=int(m["size"]), used=int(m["used"]), by=by, line=number)
            )
            if greps:
                greps[-1]["found"].append(m["name"])
            continue
        unknown.append((number, line))
    if not modules and not greps:
        raise LsmodParseError("no lsmod line")
    return LsmodText(
        modules=tuple(modules), whole=whole,
        greps=tuple(Grep(pattern=g["pattern"], found=tuple(g["found"]), line=g["line"]) for g in greps),
        unknown=tuple(unknown),
    )
