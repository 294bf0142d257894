"""What the rule modules share: evidence builders. Rules are declared with
:func:`topodoc.rules.engine.rule` (the facts a check reads are its parameter names)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topodoc.rules.engine import Evidence
from topodoc.rules.machine import sysfs


def sysfs_evidence(address: str, attr: str, value: str) -> Evidence:
    """A PCI function's sysfs attribute and what it read."""
    return Evidence("sysfs", sysfs(address, attr), value, key=address)


def path_evidence(a: str | None, b: str | None, path: str) -> Evidence:
    """The nvidia-smi class derived from the PCI tree between two functions."""
    return Evidence("derived", f"PCI path {a} -> {b}", path, key=f"{a}->{b}")


def log_line(item: Any) -> Evidence:
    """A log line the analyzer kept (anything with ``file``, ``line`` and ``text``) as evidence."""
    return Evidence("log", f"{item.file}:{item.line}", item.text.strip())


def kept_lines(lines: Iterable[Any], most: int) -> tuple[Evidence, ...]:
    """The first ``most`` kept log lines as evidence."""
    return tuple(log_line(item) for item in list(lines)[:most])


def shortlist(names: list[str], most: int, tail: str = "") -> str:
    """``names`` joined by commas, cut to ``most`` with ``tail`` appended when cut."""
    return ", ".join(names[:most]) + (tail if len(names) > most else "")


def texts_of(texts, kind: str) -> list[tuple[str, Any]]:
    """``(path, parsed)`` of the pasted texts of one kind in the ``texts`` fact (``((path, kind, parsed),
    ...)``; None when no text was given)."""
    return [(path, parsed) for path, k, parsed in texts or () if k == kind]
