"""Fuzz target: the log scanner's C core against the Python scanner (atheris, libFuzzer's engine).

    python tests/fuzz_scan.py [CORPUS_DIR] -max_total_time=40 -max_len=8192

Each input is scanned twice by each core (whole, and in blocks of 61 bytes, so record and line cuts fall
everywhere) and the states and statistics must be equal; a crash, a sanitizer report or a difference stops
the run with the input saved (``crash-*``). Seeds: real logs from ``fixtures/logs/real`` (first 4 KB) are
written to CORPUS_DIR when it is empty. atheris instruments the Python modules it imports for coverage; the
C core is not instrumented (no clang here), so the search is guided by the Python scanner's branches.
CI runs it for a bounded time (``.ci/run``)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["topodoc.parsers.nccl_log"]):
    from topodoc import catalogue
    from topodoc.parsers.nccl_log import scan
    from topodoc.parsers.nccl_log.state import LogState

EXTRA = catalogue.scan_literals()
REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"


def _run(data: bytes, core, chunk: int | None):
    saved = scan.CHUNK_BYTES
    scan.CHUNK_BYTES = chunk or saved
    try:
        state = LogState()
        scanner = scan.Scanner(state, "fuzz.log", EXTRA)
        scanner.core = core
        return state, scanner.run(io.BytesIO(data))
    finally:
        scan.CHUNK_BYTES = saved


def one(data: bytes) -> None:
    for chunk in (None, 61):
        c, python = _run(data, scan._C, chunk), _run(data, None, chunk)
        if c != python:
            raise AssertionError(f"C and Python scanners differ (block size {chunk})")


def main() -> None:
    if scan._C is None:
        raise SystemExit("fuzz_scan: the C core is not built (python setup.py build_ext --inplace)")
    dirs = [a for a in sys.argv[1:] if not a.startswith("-")]
    if dirs and not any(Path(dirs[0]).iterdir()):
        for log in sorted(REAL.glob("*.log"))[::8]:
            (Path(dirs[0]) / log.name).write_bytes(log.read_bytes()[:4096])
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
