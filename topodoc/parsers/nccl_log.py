"""NCCL log analyzer: ``NCCL_DEBUG=INFO`` output (any NCCL 2.1-2.30, any launcher) -> :class:`LogAnalysis`.

Public API:

- ``analyze(inputs) -> LogAnalysis``: ``inputs`` is a list of paths (``.gz`` is read through gzip, ``-``
  is stdin) or ``(name, binary stream)`` pairs; each keeps its own name for ``file:line`` evidence.
- ``analyze_text(text, name="<text>") -> LogAnalysis`` for tests.
- :class:`NoNcclLinesError` when no input holds a single NCCL line.

The reader (:mod:`nccl_log_scan`) streams binary blocks and does the per-line work in C; lines are
decoded as UTF-8 with ``errors="replace"``. For a large regular file a second process sorts each block's
records (:mod:`nccl_log_plan`) while this one reads them; the result is the same as in one process.
The grammar is :mod:`nccl_log_prefix` (prefixes and launcher decorations), :mod:`nccl_log_facts`
(messages), :mod:`nccl_log_errors` (the error catalogue); the result is frozen by :mod:`nccl_log_summary`
and :mod:`nccl_log_derive`. Output schema: :mod:`topodoc.logmodel`.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Iterable
from typing import BinaryIO

from topodoc.logmodel import InputStats, LogAnalysis
from topodoc.parsers import nccl_log_scan
from topodoc.parsers.nccl_log_plan import worker_plans
from topodoc.parsers.nccl_log_scan import Scanner
from topodoc.parsers.nccl_log_state import LogState
from topodoc.parsers.nccl_log_summary import build

Input = str | tuple[str, BinaryIO]


class LogInputError(ValueError):
    """An input could not be read (missing, unreadable, a broken .gz)."""


class NoNcclLinesError(LogInputError):
    """None of the inputs contains an NCCL line."""


def analyze(inputs: Iterable[Input]) -> LogAnalysis:
    """Stream every input through one :class:`LogState` and freeze the result."""
    state = LogState()
    stats = [_scan_input(state, item) for item in inputs]
    if not any(s.nccl_lines for s in stats):
        names = ", ".join(s.name for s in stats) or "no input"
        raise NoNcclLinesError(f"no NCCL lines found in {names}")
    return build(state, tuple(stats))


def analyze_text(text: str, name: str = "<text>") -> LogAnalysis:
    return analyze([(name, io.BytesIO(text.encode("utf-8", "surrogateescape")))])


def _scan_input(state: LogState, item: Input) -> InputStats:
    if isinstance(item, tuple):
        return Scanner(state, item[0]).run(item[1])
    if item == "-":
        return Scanner(state, "<stdin>").run(sys.stdin.buffer)
    opener = gzip.open if item.endswith(".gz") else open
    try:
        with opener(item, "rb") as stream:
            plans = None if item.endswith(".gz") else worker_plans(item, nccl_log_scan.CHUNK_BYTES)
            try:
                return Scanner(state, item).run(stream, plans)
            finally:
                if plans is not None:
                    plans.close()  # stops the planning process if reading ended early
    except (OSError, EOFError, zlib.error) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise LogInputError(f"{item}: {reason}") from err
