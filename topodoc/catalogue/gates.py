"""The words that make a line outside NCCL's own records worth reading: the log scanner's gates.

A big log is mostly NCCL INFO records and application output. The scanner finds NCCL's records with one
pass over each block; a line without ``NCCL`` is read only when it holds a *gate*. Each gate costs one pass
in C over the whole log, so there are few: the generic words of failure lines (:data:`GENERIC`: error,
fail, warn in the cases people print them, ``nccl`` for vLLM's and NCCL's own lowercase names, nccl-tests'
`` Pid `` rows, ``] via `` of a connection line quoted without its prefix), plus the literal of every
catalogue signature that has a real example line holding neither ``NCCL`` nor a generic gate
(:func:`scan_gates`), so every example of the catalogue is read by construction (``tests/test_catalogue``
runs them all through the analyzer). A line that matches a signature's literal but holds no gate and no
``NCCL`` is not read: the price of reading a 200 MB log at a few times the speed of ``grep``.
"""

from __future__ import annotations

from functools import lru_cache

GENERIC = (b"NCCL", b"rror", b"ail", b"arn", b"WARN", b"nccl", b" Pid ", b"] via ")


def covered(line: str) -> bool:
    """True when the scanner reads ``line`` because of a generic gate (or NCCL's own name)."""
    data = line.encode("utf-8", "replace")
    return any(gate in data for gate in GENERIC)


@lru_cache(maxsize=1)
def scan_gates() -> tuple[bytes, ...]:
    """The gates the scanner searches for outside NCCL records: :data:`GENERIC` (less ``NCCL``, which its
    record pass finds) and the literals of signatures with an example that no generic gate covers."""
    from topodoc.catalogue import signatures

    extra = {
        sig.literal.encode("utf-8")
        for sig in signatures()
        if any(not covered(ex.line) for ex in sig.examples)
    }
    return tuple(g for g in GENERIC if g != b"NCCL") + tuple(sorted(extra))


@lru_cache(maxsize=1)
def catalogue_literals() -> frozenset[bytes]:
    """Every signature's literal, encoded: literals a caller passes that are the catalogue's own need no
    gate of their own (:func:`scan_gates` covers their examples)."""
    from topodoc.catalogue import literals

    return frozenset(lit.encode("utf-8") for lit in literals())
