"""What the rule modules share: declarators that hand a check the facts it needs, and evidence builders.

``@snapshot_rule(...)`` declares a rule whose check reads the :class:`~topodoc.model.Snapshot`,
``@log_rule(...)`` one that reads the :class:`~topodoc.logmodel.LogAnalysis`, and ``@joined_rule(...)``
one that reads both (snapshot first); each is :func:`topodoc.rules.engine.rule` with ``needs`` implied.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from topodoc.rules.engine import NEEDS, Evidence, Facts, Hit, Rule, rule
from topodoc.rules.machine import sysfs

Declarator = Callable[[Callable[..., Iterable[Hit]]], Rule]


def declare(needs: tuple[str, ...], id: str, severity: str, tags: tuple[str, ...], title: str, fix: str):
    """A ``rule`` whose check takes facts as arguments named after them (``snapshot``, ``topology``,
    ``logs``, ``nccl_tests``); ``needs`` is what the check's parameter names ask for."""

    def wrap(check: Callable[..., Iterable[Hit]]) -> Rule:
        params = inspect.signature(check).parameters.values()
        needs = tuple(p.name for p in params if p.default is p.empty)
        names = tuple(p.name for p in params if p.name in NEEDS)  # with the optional ones (``logs=None``)

        @functools.wraps(check)
        def read(facts: Facts) -> Iterable[Hit]:
            return check(**{name: getattr(facts, name) for name in names})

        return rule(id, title, severity, tags, needs, fix)(read)

    return wrap


def snapshot_rule(id: str, severity: str, tags: tuple[str, ...], title: str, fix: str) -> Declarator:
    return declare(("snapshot",), id, severity, tags, title, fix)


def log_rule(id: str, severity: str, tags: tuple[str, ...], title: str, fix: str) -> Declarator:
    return declare(("logs",), id, severity, tags, title, fix)


def joined_rule(id: str, severity: str, tags: tuple[str, ...], title: str, fix: str) -> Declarator:
    return declare(("snapshot", "logs"), id, severity, tags, title, fix)


def sysfs_evidence(address: str, attr: str, value: str) -> Evidence:
    """A PCI function's sysfs attribute and what it read."""
    return Evidence("sysfs", sysfs(address, attr), value)


def path_evidence(a: str | None, b: str | None, path: str) -> Evidence:
    """The nvidia-smi class derived from the PCI tree between two functions."""
    return Evidence("derived", f"PCI path {a} -> {b}", path)


def log_line(item: Any) -> Evidence:
    """A log line the analyzer kept (anything with ``file``, ``line`` and ``text``) as evidence."""
    return Evidence("log", f"{item.file}:{item.line}", item.text.strip())


def kept_lines(lines: Iterable[Any], most: int) -> tuple[Evidence, ...]:
    """The first ``most`` kept log lines as evidence."""
    return tuple(log_line(item) for item in list(lines)[:most])


def shortlist(names: list[str], most: int, tail: str = "") -> str:
    """``names`` joined by commas, cut to ``most`` with ``tail`` appended when cut."""
    return ", ".join(names[:most]) + (tail if len(names) > most else "")
