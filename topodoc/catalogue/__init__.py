"""The failure catalogue: NCCL / PyTorch / verbs / libfabric failure signatures kept as data.

Each record of ``signatures.toml`` (next to this module) is one signature: an id, a prefilter
``literal``, a linear-time ``pattern`` (compiled with the :mod:`regex` module), the analyzer category
(one of :data:`topodoc.logmodel.ERROR_CATEGORIES`), the failure ``family`` it belongs to, a title, an
explanation, the usual cause, a concrete fix, the NCCL versions it applies to (``None``: any), whether
the line is benign, and at least one real example line with the public thread it was copied from (host
names and addresses rewritten). Adding a signature is adding one record: :func:`literals` (what the log
scanner's prefilter looks for) and :func:`match` are computed from the records.

Public API: :func:`signatures`, :func:`literals`, :func:`scan_literals`, :func:`prefilter`,
:func:`holds_literal`, :func:`match`,
:func:`fields`, :func:`by_id`, :data:`MAX_LINE`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from topodoc import __version__, usercache

if TYPE_CHECKING:
    import regex

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
    try:
        return tuple(_record(raw) for raw in _raw_records(cache=True))
    except (CatalogueError, TypeError, KeyError):  # a cache entry that is not what it claims: the file
        return tuple(_record(raw) for raw in _raw_records(cache=False))


# The parsed catalogue is kept as JSON in the user's cache (topodoc.usercache): parsing the TOML costs
# every command that reads logs ~30 ms of CPU (tomllib is pure Python), loading the JSON under 1 ms. The
# entry is used only when it names the exact bytes of signatures.toml (length and CRC-32: a change
# detector, not a security boundary: whoever can write this user's cache can write their files) and this
# topodoc version; anything else is ignored and rewritten.
CACHE_NAME = "catalogue.json"
_CACHE_FORMAT = 1
_CACHE_CAP = 16 * 2**20


def _raw_records(cache: bool) -> list[dict]:
    raw = _source()
    key = f"{_CACHE_FORMAT}:{__version__}:{len(raw)}:{zlib.crc32(raw):08x}"
    cached = _cached(key) if cache else None
    if cached is not None:
        return cached
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    records = tomllib.loads(raw.decode("utf-8"))["signature"]
    with suppress(TypeError, ValueError):  # a TOML value JSON cannot hold (a date): no cache
        usercache.write(CACHE_NAME, json.dumps({"key": key, "signature": records}).encode("utf-8"))
    return records


def _cached(key: str) -> list[dict] | None:
    data = usercache.read(CACHE_NAME, _CACHE_CAP)
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("key") != key:
        return None
    records = doc.get("signature")
    if not isinstance(records, list) or not all(_well_formed(r) for r in records):
        return None
    return records


def _well_formed(raw: object) -> bool:
    """A cached record holds what a record of the file holds (strings, ``benign`` a bool, examples)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("benign"), bool):
        return False
    if not all(isinstance(raw.get(name), str) for name in _FIELDS if name != "benign"):
        return False
    if not isinstance(raw.get("nccl_versions", ""), (str, type(None))):
        return False
    examples = raw.get("examples", [])
    return isinstance(examples, list) and all(
        isinstance(e, dict) and isinstance(e.get("line"), str) and isinstance(e.get("source"), str)
        for e in examples
    )


def _source() -> bytes:
    """The bytes of ``signatures.toml``: read next to this module (importlib.resources, whose imports cost
    more than the read, only for a package that is not plain files)."""
    try:
        with open(os.path.join(os.path.dirname(__file__), "signatures.toml"), "rb") as fh:
            return fh.read()
    except OSError:  # pragma: no cover - a zipped install
        from importlib import resources

        return resources.files(__package__).joinpath("signatures.toml").read_bytes()


_PATTERNS: dict[str, regex.Pattern] = {}  # pattern text -> the compiled pattern, compiled on first use


def _pattern(sig: Signature) -> regex.Pattern:
    """``sig``'s compiled pattern. Patterns are compiled one by one, the first time a line holds the
    record's literal: the ``regex`` module's compiler is pure Python, and a log rarely needs more than a
    few of the records."""
    found = _PATTERNS.get(sig.pattern)
    if found is None:
        import regex

        try:
            found = _PATTERNS[sig.pattern] = regex.compile(sig.pattern, regex.V0)
        except regex.error as exc:
            raise CatalogueError(f"signature {sig.id!r}: pattern does not compile: {exc}") from None
    return found


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
def prefilter() -> re.Pattern:
    """One compiled alternation of every literal (longest first): a line it does not find in can match no
    signature. For scanners that test whole blocks of text before splitting them into lines. Plain literals
    only, so the standard ``re`` compiles it (4x faster than ``regex``, whose import it also spares a log
    that no signature matches) and searches it (2x)."""
    alternation = "|".join(re.escape(lit) for lit in sorted(literals(), key=len, reverse=True))
    return re.compile(alternation)


_HELD_CALLS = [0]
_HELD_COMPILE_AFTER = 256  # lines asked before the alternation is worth its compile (13 ms, 165 literals)


def holds_literal(line: str) -> bool:
    """Does ``line`` hold one of :func:`literals`? Plain ``in`` tests for the first lines asked (most logs
    ask about a few dozen distinct lines, and compiling :func:`prefilter` costs as much as 1,000 of
    them), :func:`prefilter`'s one pass after that; the same answer either way."""
    if _HELD_CALLS[0] < _HELD_COMPILE_AFTER:
        _HELD_CALLS[0] += 1
        return any(lit in line for lit in literals())
    return prefilter().search(line) is not None


def by_id(sig_id: str) -> Signature:
    """The record with this id; ``KeyError`` when there is none."""
    for sig in signatures():
        if sig.id == sig_id:
            return sig
    raise KeyError(sig_id)


def fields(sig: Signature, line: str) -> dict[str, str]:
    """The named groups of ``sig``'s pattern in ``line`` (e.g. ``nccl_version``: the NCCL release a
    framework line states), empty when it does not match."""
    for candidate in signatures():
        if candidate.id == sig.id:
            found = _pattern(candidate).search(line[:MAX_LINE])
            return {k: v for k, v in found.groupdict().items() if v is not None} if found else {}
    return {}


def match(line: str) -> Signature | None:
    """The first signature (file order: specific records come before generic ones) whose literal occurs in
    ``line`` and whose pattern matches it; only the first :data:`MAX_LINE` characters are read."""
    line = line[:MAX_LINE]
    for sig in signatures():
        if sig.literal in line and _pattern(sig).search(line):
            return sig
    return None
