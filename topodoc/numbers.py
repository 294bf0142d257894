"""The one guarded way text becomes a number in the parsers.

Python refuses ``int()`` of a string over 4,300 digits (ValueError) and ``float()`` turns a long run of
digits into ``inf``; a number no real capture prints is not a number here: these return ``None``.
"""

from __future__ import annotations

import math

MAX_DIGITS = 40  # far above any count, size or bus number a tool prints; far below int()'s limit
_INT_PATTERN = rf"[+-]?+[0-9]{{1,{MAX_DIGITS}}}+"
_int = None  # compiled on first use: importing this module (derive does) loads no ``regex``
_MAX_FLOAT_TEXT = 64


class LimitError(ValueError):
    """An input describes more of something than any machine has (GPUs, NICs, devices in a matrix): work
    quadratic or worse in it would take minutes and gigabytes. The CLI prints the message as one line,
    exit 2 (an input error, not a bug)."""


def check_count(what: str, count: int, maximum: int) -> None:
    """``count`` of ``what`` at most ``maximum``, else :class:`LimitError`."""
    if count > maximum:
        raise LimitError(f"{count} {what}: more than any machine has (at most {maximum} are read)")


def to_int(text: str) -> int | None:
    """``"42"``, ``"-3"`` -> int; anything else (words, floats, over MAX_DIGITS digits) -> None."""
    global _int
    if _int is None:
        import regex

        _int = regex.compile(_INT_PATTERN)
    text = text.strip()
    return int(text) if _int.fullmatch(text) else None


def to_count(text: str | None, maximum: int) -> int | None:
    """A count or size something will loop over or allocate: ``0..maximum``, else None. Every count
    read from input text that sizes a loop goes through here (or :mod:`topodoc.cpuset` for CPUs), so a
    few bytes of input never ask for a billion iterations."""
    value = to_int(text) if isinstance(text, str) else None
    return value if value is not None and 0 <= value <= maximum else None


def to_float(text: str) -> float | None:
    """``"1.5"``, ``"1.2e+04"``, ``"42"`` -> float; words, ``nan``, ``inf`` and over-long text -> None."""
    if len(text) > _MAX_FLOAT_TEXT:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
