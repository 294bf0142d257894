"""The scanner's C core (``_scan.c``) against its oracle, the Python loops of ``scan.py``: the same
``LogState`` and statistics on the whole real corpus, every golden, generated logs (torn, fused,
endless, binary, huge and UTF-16 lines) and with the input cut into blocks at every size that moves a cut.

Skipped where the extension is not built (``pip install .`` without a compiler, or ``TOPODOC_PURE=1``),
unless ``TOPODOC_REQUIRE_C=1`` (CI) makes its absence a failure."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc import catalogue
from topodoc.parsers.nccl_log import scan
from topodoc.parsers.nccl_log.state import LogState

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log")) + cases()
LINES = [line for log in LOGS for line in log.read_bytes().split(b"\n") if line]
EXTRA = catalogue.scan_literals()

if scan._C is None and os.environ.get("TOPODOC_REQUIRE_C") != "1":
    pytest.skip("the C core is not built here (the Python scanner runs)", allow_module_level=True)


@pytest.fixture(autouse=True, params=["wide", "narrow"])
def _paths(request):
    """Every test twice: with the AVX2 paths (Teddy, the newline count; where the CPU has AVX2) and with
    the baseline ones (SSE2 or scalar), which CPUs without AVX2 and other architectures run."""
    old = scan._C.wide(request.param == "wide")
    yield
    scan._C.wide(old)


def _run(data: bytes, core, chunk: int | None = None, extra=EXTRA) -> tuple[LogState, object]:
    saved = scan.CHUNK_BYTES
    scan.CHUNK_BYTES = chunk or saved
    try:
        state = LogState()
        scanner = scan.Scanner(state, "x.log", extra)
        scanner.core = core
        stats = scanner.run(io.BytesIO(data))
    finally:
        scan.CHUNK_BYTES = saved
    return state, stats


def _same(data: bytes, chunk: int | None = None, extra=EXTRA) -> tuple[LogState, object]:
    c = _run(data, scan._C, chunk, extra)
    python = _run(data, None, chunk, extra)
    assert c[1] == python[1]
    assert c[0] == python[0]
    return c


def test_the_core_is_what_runs():
    assert scan._C is not None and scan.engine() == "C"
    assert scan._C.LINE_LIMIT == scan.LINE_LIMIT


def test_a_line_of_many_records_costs_its_length_not_its_length_squared():
    import time

    for core in (scan._C, None):
        times = []
        for n in (20000, 160000):
            data = b"h:1:1 [0] NCCL INFO x\n" + b"NCCL" * n + b" NCCL INFO AllReduce: opCount 1" * n + b"\n"
            start = time.process_time()
            _run(data, core, 1 << 22)
            times.append(time.process_time() - start)
        assert times[1] < 40 * max(times[0], 0.005), times  # 8x the input: 8x the time, not 64x


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_real_log_and_golden_gives_the_python_state(log):
    _same(log.read_bytes())


def test_the_whole_corpus_as_one_log_at_several_block_sizes():
    data = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in LOGS)
    for chunk in (None, 1 << 16, 4099, 777):
        _same(data, chunk)


def test_every_cut_of_a_log_gives_the_python_state():
    """Block sizes 1 to the log's size: each line boundary is a block boundary in some run."""
    logs = sorted((p for p in LOGS if 2000 < p.stat().st_size < 6000), key=lambda p: p.stat().st_size)
    data = logs[0].read_bytes()
    for chunk in range(1, len(data) + 2, 7):
        _same(data, chunk)


def test_a_line_of_one_nul_after_a_channel_marker_is_one_key():
    data = b"h:1:1 [0] NCCL INFO Channel 00/0 : \0\nh:1:1 [0] NCCL INFO Channel 00/0 : x\n" * 3
    _same(data)


def test_opcounts_of_every_form():
    words = [b"3f", b"0x1f", b"-1", b"", b"1_0", b"ffffffffffffffffff", b"FfFf", b"12\r", b"zz",
             b"7fffffffffffffff", b"8000000000000000", b"\t5"]
    data = b"".join(b"h:1:%d [0] NCCL INFO AllReduce: opCount %s sendbuff 0x1\n" % (i % 3, w)
                    for i, w in enumerate(words * 3))
    state, _ = _same(data)
    assert state.colls


def test_collective_calls_over_many_blocks_known_processes_new_threads_and_odd_opcounts():
    lines = []
    for op in range(400):
        for rank in range(4):
            tid = 7 if op < 200 or rank else 8  # rank 0's thread changes: a new prefix, a known process
            word = f"{op:x}" if op % 50 else "0x1z"
            who = f"h{rank // 2}:{100 + rank}:{tid} [{rank}]"
            lines.append(f"{who} NCCL INFO AllReduce: opCount {word} sendbuff 0x1")
        if op % 97 == 0:
            lines.append(f"h9:9:9 [0] NCCL INFO Broadcast: opCount {op:x} root 0")
    data = ("\n".join(lines) + "\n").encode()
    for chunk in (None, 300, 4096):
        state, _ = _same(data, chunk)
        assert sum(entry[0] for entry in state.colls.values()) == len(lines)


def test_gates_of_one_byte_or_with_a_newline_take_the_slow_path():
    data = b"".join(LINES[:400]) + b"\nq line\nab\ncd\n"
    _same(data, extra=("q", "b\nc"))


def test_a_slow_gate_after_others_and_more_gates_than_the_core_takes():
    data = b"".join(LINES[:300]) + b"\nq line\nlit7 x\nlit299 y\n"
    _same(data, extra=("Reducing", "cuMem", "q"))
    _same(data, extra=tuple(f"lit{i}" for i in range(300)))


def test_an_endless_line_and_huge_lines():
    data = (b"h:1:1 [0] NCCL INFO NCCL version 2.21.5\n" + b"x" * (3 << 20) + b" NCCL WARN x\n"
            + b"h:1:1 [0] NCCL INFO " + b"Channel 00/0 : " * 50000 + b"\n" + b"NCCL" * 100000 + b"\n")
    _same(data, 1 << 18)


_PIECE = st.one_of(
    st.sampled_from(LINES),
    st.sampled_from(LINES).map(lambda line: line[: len(line) // 2]),  # torn
    st.tuples(st.sampled_from(LINES), st.sampled_from(LINES)).map(lambda p: p[0] + p[1]),  # fused
    st.sampled_from(LINES).map(lambda line: line.decode("utf-8", "replace").encode("utf-16")),
    st.binary(max_size=64),
    st.sampled_from([b"\r", b"\0" * 9, b" NCCL INFO ", b" NCCL INFO Channel ", b"NCCL", b" : ", b"\xff\xfe",
                     b" NCCL INFO Ring 1 : 2 -> 3 -> ", b"AllReduce: opCount 3f", b"rror", b"] via "]),
    st.integers(1000, 20000).map(lambda n: b"h:1:1 [0] NCCL INFO " + b"a" * n),  # long lines
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECE, max_size=40), st.lists(st.sampled_from([b"\n", b"", b" "]), max_size=40),
       st.sampled_from([None, 1, 64, 500, 4096]))
def test_generated_logs_give_the_python_state(pieces, seps, chunk):
    data = b"".join(p + (seps[i] if i < len(seps) else b"\n") for i, p in enumerate(pieces))
    _same(data, chunk)


def test_version_verbose_names_the_scanner_core():
    out = subprocess.run([sys.executable, "-m", "topodoc", "-v", "--version"], capture_output=True, text=True,
                         check=True)
    assert "log scanner: C (" in out.stdout and "_scan" in out.stdout
    env = dict(os.environ, TOPODOC_PURE="1")
    out = subprocess.run([sys.executable, "-m", "topodoc", "--version", "-v"], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.splitlines()[-1] == "log scanner: Python (TOPODOC_PURE=1)"


def test_engine_is_python_with_topodoc_pure():
    code = "from topodoc.parsers.nccl_log import scan; print(scan.engine())"
    env = dict(os.environ, TOPODOC_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Python (TOPODOC_PURE=1)"


def _blocks(data: bytes, core, chunk: int, opener) -> list:
    with opener(data) as stream:
        return list(scan._read_blocks(stream, chunk, core))


def _gzipped(data: bytes):
    import gzip

    return gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(data)))


def _buffered(data: bytes):
    return io.BufferedReader(io.BytesIO(data), buffer_size=64)


@pytest.mark.parametrize("opener", [io.BytesIO, _buffered, _gzipped], ids=["bytesio", "buffered", "gzip"])
@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 4096, 1 << 20])
def test_the_block_reader_reads_in_place_the_blocks_of_the_python_loop(opener, chunk):
    """``_scan.block`` (the block read in place, never copied) against the Python loop: the same blocks
    and byte counts, carries of no line, of several blocks, over CARRY_LIMIT, and no final newline."""
    data = b"".join(p.read_bytes() for p in LOGS[:6])[: 40000 if chunk < 64 else None]
    endless = b"x" * (scan.CARRY_LIMIT + 3 * 4096 + 5)
    samples = [data, data.rstrip(b"\n"), b"", b"\n", b"one line", b"\n\n\nb\n" * 100]
    if chunk >= 4096:  # (the Python loop joins its carry to every chunk: small chunks on endless lines
        samples += [endless, endless + b"\nafter\n", b"a\n" + endless]  # would take minutes)
    for sample in samples:
        python = _blocks(sample, None, chunk, opener)
        assert _blocks(sample, scan._C, chunk, opener) == python
        assert b"".join(block for block, _ in python).count(b"\n") >= sample.count(b"\n")


def test_the_block_reader_takes_only_streams_it_knows():
    class Odd(io.RawIOBase):  # a readinto that keeps the buffer it was given
        def readable(self):
            return True

        def readinto(self, buffer):
            self.kept = buffer
            buffer[:2] = b"a\n"
            return 2

    assert not scan._fills_in_place(Odd())
    with pytest.raises(OSError, match="kept its buffer"):
        scan._C.block(Odd().readinto, b"", 16)
    with pytest.raises(OSError, match="bad count"):
        scan._C.block(lambda buffer: 99, b"", 16)
