"""The block plan and the planning process: a log read with plans made by a second process, or made block
by block in this one, gives exactly the analysis of the one-loop reader it replaced; big --json tables."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc.parsers.nccl_log import analyze
from topodoc.parsers.nccl_log import scan as nccl_log_scan
from topodoc.parsers.nccl_log.plan import INFO, plan
from topodoc.report.logs import BIG_TABLE, to_json

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
FIXTURE_LINES = [line for log in cases() for line in log.read_bytes().split(b"\n") if line]


def _bench_log(nodes: int, steps: int) -> bytes:
    sys.path.insert(0, str(BENCH))
    try:
        import logs_bench
    finally:
        sys.path.remove(str(BENCH))
    import random

    rng = random.Random(5)
    lines = []
    for step in range(steps):
        lines += logs_bench.comm_block(nodes, step, rng) + logs_bench.noise(step, 40)
    return ("\n".join(lines) + "\n").encode()


def test_plan_sorts_every_record_once():
    block = _bench_log(2, 2)
    pieces = block.split(INFO)
    made = plan(pieces, old=True)
    counted = sum(n for n, _first in made.counted.values())
    rings = sum(1 for p in pieces[1:] if p.startswith(b"Ring") and p.count(b" -> ") == 2)
    skipped = [p[:4] for p in pieces[1:]].count(b"Tree") + rings
    assert counted == sum(1 for p in pieces[1:] if p.startswith(b"Channel"))
    assert len(made.read) + counted + skipped == len(pieces) - 1
    assert made.records == (len(block), len(pieces))
    # the keys are the two last words in front of the marker and the text after "Channel NN/N : "
    key, (lines, first) = next(iter(made.counted.items()))
    assert key[0].endswith(b"]") and key[0].count(b" ") == 1 and b" via " in key[1]
    assert pieces[first].startswith(b"Channel") and lines >= 1


def test_a_line_holding_two_records_is_read_not_counted():
    line = b"h:1:2 [0] NCCL INFO Channel 0%d/0 : 0[0] -> 1[1] via P2P/IPC"
    glued = line % 0 + b" " + line % 1 + b"\n" + line % 2 + b"\n"
    made = plan(glued.split(INFO), old=False)
    assert made.read == [1, 2] and [n for n, _i in made.counted.values()] == [1]


def test_collective_calls_are_dropped_and_counted_and_prove_nothing():
    coll = b"h-0:7:9 [0] NCCL INFO AllReduce: opCount 3f sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0\n"
    noise = b"[2026-03-01 12:00:00] iteration 7 | loss 2.4 | lr 3.0e-04\n"
    head = b"h-0:7:9 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    made = plan((head + coll * 3 + (coll + noise) * 2).split(INFO), old=True)
    assert made.read == [1] and not made.counted  # alone on their lines or followed by noise: dropped
    failed = b"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled "
    failed += b"system error\n"
    data = head + coll + noise + coll + failed + coll
    made = plan(data.split(INFO), old=True)
    assert made.read == [1, 3] and made.hits == {3: True}  # the line after it must still be read
    analysis = analyze([("job.log", io.BytesIO(data))])
    assert analysis.inputs[0].nccl_lines >= 4 and [e.line for e in analysis.errors] == [5]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=40), st.integers(1, 300))
def test_any_block_size_gives_the_same_analysis(lines, chunk):
    data = b"\n".join(lines) + b"\n"
    assert _plain(data, chunk) == _plain(data)


def _plain(data: bytes, chunk: int | None = None):
    from topodoc.parsers.nccl_log.state import LogState
    from topodoc.parsers.nccl_log.summary import build

    saved = nccl_log_scan.CHUNK_BYTES
    nccl_log_scan.CHUNK_BYTES = chunk or saved
    try:
        state = LogState()
        stats = nccl_log_scan.Scanner(state, "h.log").run(io.BytesIO(data))
    finally:
        nccl_log_scan.CHUNK_BYTES = saved
    return build(state, (stats,)) if stats.nccl_lines else None


def test_big_tables_are_written_one_row_a_line():
    rows = [{"rank": i, "host": f"n{i // 8}", "evidence": {"line": i}} for i in range(BIG_TABLE + 1)]
    data = {"summary": {"transport": "IB", "hosts": ["n0"]}, "ranks": rows, "env": []}
    text = to_json(data)
    assert json.loads(text) == data
    lines = text.splitlines()
    assert lines[:3] == ["{", '  "summary": {', '    "transport": "IB",']
    assert '    {"rank": 0, "host": "n0", "evidence": {"line": 0}},' in lines
    small = {"summary": {"transport": "IB"}, "ranks": rows[:3]}
    assert to_json(small) == json.dumps(small, indent=2)


def test_cli_json_of_a_big_job(tmp_path):
    path = tmp_path / "big.log"
    path.write_bytes(_bench_log(64, 1))  # 512 ranks: more rows than BIG_TABLE
    run = subprocess.run([sys.executable, "-m", "topodoc", "logs", "--json", str(path)], capture_output=True)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert (data["summary"]["nranks"], data["summary"]["nnodes"], len(data["ranks"])) == (512, 64, 512)
    rows = [line for line in run.stdout.decode().splitlines() if line.startswith('    {"rank": ')]
    ranks = [row for row in rows if '"cuda_dev": ' in row]  # one line a rank (and one a connection)
    assert len(ranks) == 512 and len(rows) == 512 + len(data["connections"])
