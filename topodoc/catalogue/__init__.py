"""The failure catalogue: NCCL / PyTorch / verbs / libfabric failure signatures kept as data.

Each record of ``signatures.toml`` (next to this module) is one signature: an id, a prefilter
``literal``, a linear-time ``pattern`` (compiled with the :mod:`regex` module), the analyzer category
(one of :data:`topodoc.logmodel.ERROR_CATEGORIES`), the failure ``family`` it belongs to, a title, an
explanation, the usual cause, a concrete fix, the NCCL versions it applies to (``None``: any), whether
the line is benign, and at least one real example line with the public thread it was copied from (host
names and addresses rewritten). Adding a signature is adding one record: :func:`literals` (what the log
scanner's prefilter looks for) and :func:`match` are computed from the records.

Public API: :func:`signatures`, :func:`literals`, :func:`scan_literals`, :func:`prefilter`, :func:`match`,
:func:`fields`, :func:`by_id`, :data:`MAX_LINE`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import regex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_LINE = 4096  # characters of one line that match() reads; NCCL lines are far shorter
_FIELDS = ("id", "family", "category", "benign", "literal", "pattern", "title", "explanation", "cause", "fix")


@dataclass(frozen=True)
class Example:
    """A real line from a public thread (host names, addresses and GUIDs rewritten) and its URL."""

    line: str
    source: str


@dataclass(frozen=True)
class Signature:
    """One failure signature; ``nccl_versions`` is a range such as ``">=2.20"`` or ``None`` (any)."""

    id: str
    family: str
    category: str
    benign: bool
    literal: str
    pattern: str
    title: str
    explanation: str
    cause: str
    fix: str
    nccl_versions: str | None
    examples: tuple[Example, ...]


class CatalogueError(ValueError):
    """``signatures.toml`` holds a record that cannot be used (missing field, bad pattern)."""


def _record(raw: dict) -> Signature:
    missing = [name for name in _FIELDS if name not in raw]
    if missing:
        raise CatalogueError(f"signature {raw.get('id', '?')!r} lacks {', '.join(missing)}")
    examples = tuple(Example(e["line"], e["source"]) for e in raw.get("examples", ()))
    return Signature(
        **{name: raw[name] for name in _FIELDS},
        nccl_versions=raw.get("nccl_versions") or None,
        examples=examples,
    )


@lru_cache(maxsize=1)
def signatures() -> tuple[Signature, ...]:
    """Every record of the catalogue, in file order (the order :func:`match` tries them)."""
    text = resources.files(__package__).joinpath("signatures.toml").read_text(encoding="utf-8")
    return tuple(_record(raw) for raw in tomllib.loads(text)["signature"])


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[Signature, regex.Pattern], ...]:
    out = []
    for sig in signatures():
        try:
            out.append((sig, regex.compile(sig.pattern, regex.V0)))
        except regex.error as exc:
            raise CatalogueError(f"signature {sig.id!r}: pattern does not compile: {exc}") from None
    return tuple(out)


@lru_cache(maxsize=1)
def literals() -> tuple[str, ...]:
    """The distinct prefilter literals (case-sensitive substrings); a line holding none of them matches
    no signature, so the scanner can skip it without running a regex."""
    return tuple(sorted({sig.literal for sig in signatures()}))


@lru_cache(maxsize=1)
def scan_literals() -> tuple[str, ...]:
    """The literals a log scanner must look for on top of NCCL's own keywords: every literal except those
    whose records' example lines are all ``NCCL WARN`` lines (the scanner reads every WARN anyway). Each
    literal costs the scanner one more pass over its input, so fewer is faster for the same findings."""
    warn_only: dict[str, bool] = {}
    for sig in signatures():
        every_warn = all("NCCL WARN" in ex.line for ex in sig.examples)
        warn_only[sig.literal] = warn_only.get(sig.literal, True) and every_warn
    return tuple(sorted(lit for lit, only in warn_only.items() if not only))


@lru_cache(maxsize=1)
def prefilter() -> regex.Pattern:
    """One compiled alternation of every literal (longest first): a line it does not find in can match no
    signature. For scanners that test whole blocks of text before splitting them into lines."""
    alternation = "|".join(regex.escape(lit) for lit in sorted(literals(), key=len, reverse=True))
    return regex.compile(alternation)


def by_id(sig_id: str) -> Signature:
    """The record with this id; ``KeyError`` when there is none."""
    for sig in signatures():
        if sig.id == sig_id:
            return sig
    raise KeyError(sig_id)


def fields(sig: Signature, line: str) -> dict[str, str]:
    """The named groups of ``sig``'s pattern in ``line`` (e.g. ``nccl_version``: the NCCL release a
    framework line states), empty when it does not match."""
    for candidate, pattern in _compiled():
        if candidate.id == sig.id:
            found = pattern.search(line[:MAX_LINE])
            return {k: v for k, v in found.groupdict().items() if v is not None} if found else {}
    return {}


def match(line: str) -> Signature | None:
    """The first signature (file order: specific records come before generic ones) whose literal occurs in
    ``line`` and whose pattern matches it; only the first :data:`MAX_LINE` characters are read."""
    line = line[:MAX_LINE]
    for sig, pattern in _compiled():
        if sig.literal in line and pattern.search(line):
            return sig
    return None
