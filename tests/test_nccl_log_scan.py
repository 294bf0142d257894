"""The block scanner (topodoc.parsers.nccl_log.scan): what its one-pass fast path counts, folds and
drops, and that none of it depends on where blocks end; big --json tables."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze
from topodoc.parsers.nccl_log import scan as nccl_log_scan
from topodoc.parsers.nccl_log.state import LogState
from topodoc.parsers.nccl_log.summary import build
from topodoc.report.logs import BIG_TABLE, to_json

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
FIXTURE_LINES = [line for log in cases() for line in log.read_bytes().split(b"\n") if line]


def _bench_log(nodes: int, steps: int) -> bytes:
    sys.path.insert(0, str(BENCH))
    try:
        import logs_bench
    finally:
        sys.path.remove(str(BENCH))
    rng = random.Random(5)
    lines = []
    for step in range(steps):
        lines += logs_bench.comm_block(nodes, step, rng) + logs_bench.noise(step, 40)
    return ("\n".join(lines) + "\n").encode()


def _scan(data: bytes, chunk: int | None = None) -> tuple[LogState, object]:
    saved = nccl_log_scan.CHUNK_BYTES
    nccl_log_scan.CHUNK_BYTES = chunk or saved
    try:
        state = LogState()
        stats = nccl_log_scan.Scanner(state, "h.log").run(io.BytesIO(data))
    finally:
        nccl_log_scan.CHUNK_BYTES = saved
    return state, stats


def _plain(data: bytes, chunk: int | None = None):
    state, stats = _scan(data, chunk)
    return build(state, (stats,)) if stats.nccl_lines else None


def test_connection_lines_are_counted_under_keys_without_channel_or_pid():
    block = _bench_log(2, 2)
    state, stats = _scan(block)
    channel_lines = block.count(b" NCCL INFO Channel ")
    assert sum(n for n, _ev in state.conn_raw.values()) == channel_lines
    # two communicators (new comm pointers) print the same connections: one key per rank and peer
    assert len(state.conn_raw) == channel_lines // 2 // 32
    (place, rest), (lines, first) = next(iter(state.conn_raw.items()))
    assert place.endswith(b"]") and place.count(b" ") == 1 and b" via " in rest and b"Channel" not in rest
    assert first.text.split(" NCCL INFO ")[1].startswith("Channel") and lines == 64
    assert stats.nccl_lines == block.count(b" NCCL INFO ") and stats.lines == block.count(b"\n")


def test_a_line_holding_two_records_is_read_whole_not_counted_twice():
    line = b"h:1:2 [0] NCCL INFO Channel 0%d/0 : 0[0] -> 1[1] via P2P/IPC"
    glued = line % 0 + b" " + line % 1 + b"\n" + line % 2 + b"\n"
    state, _stats = _scan(glued)
    assert [n for n, _ev in state.conn_raw.values()] == [3]
    assert next(iter(state.conn_raw.values()))[1].line == 1


def test_collective_calls_are_folded_per_process_with_the_last_opcount():
    coll = b"h-0:7:9 [0] NCCL INFO AllReduce: opCount %x sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 " \
           b"root 0 comm 0x55 [nranks=2] stream 0x9\n"
    other = b"h-1:8:9 [1] NCCL INFO AllGather: opCount %x sendbuff 0x1 recvbuff 0x2 count 8 datatype 7\n"
    noise = b"[2026-03-01 12:00:00] iteration 7 | loss 2.4 | lr 3.0e-04\n"
    head = b"h-0:7:9 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    data = head + b"".join(coll % op + noise + (other % op if op < 5 else b"") for op in range(0x20))
    for chunk in (None, 7, 300):
        state, stats = _scan(data, chunk)
        count, first, last = state.colls[("h-0", 7)]
        assert (count, first.line, last) == (0x20, 2, 0x1F)
        count, first, last = state.colls[("h-1", 8)]
        assert (count, first.line, last) == (5, 4, 4)
        assert stats.nccl_lines == 1 + 0x20 + 5
    failed = b"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled "
    failed += b"system error\n"
    data = head + coll % 1 + noise + coll % 2 + failed + coll % 3
    analysis = analyze([("job.log", io.BytesIO(data))])
    assert analysis.inputs[0].nccl_lines >= 4 and [e.line for e in analysis.errors] == [5]


def test_non_nccl_lines_are_read_only_where_a_gate_word_is():
    data = (
        b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        b"[2026-03-01 12:00:00] iteration 7 | loss 2.4 | lr 3.0e-04\n"
        b"libibverbs: Warning: couldn't load driver 'librxe-rdmav25.so': librxe-rdmav25.so: cannot open\n"
        b"RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"
    )
    analysis = analyze([("job.log", io.BytesIO(data))], catalogue.scan_literals())
    assert sorted(e.line for e in analysis.errors) == [3, 4]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=40), st.integers(1, 300))
def test_any_block_size_gives_the_same_analysis(lines, chunk):
    data = b"\n".join(lines) + b"\n"
    assert _plain(data, chunk) == _plain(data)


def test_the_benchmark_log_gives_the_same_analysis_in_any_block_size():
    data = _bench_log(2, 3)
    assert _plain(data, 4096) == _plain(data) == _plain(data, 333)


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


def test_a_line_holding_a_catalogue_literal_but_matching_no_signature_is_no_error():
    """nccl-tests' footer holds the out-of-bounds record's literal whatever the count: `0 OK` is no failure
    (it used to be reported as an unexplained warning), `12 FAILED` is the record's finding."""
    data = (b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            b"# Out of bounds values : 0 OK\n# Out of bounds values : 12 FAILED\n")
    found = analyze([("t.log", io.BytesIO(data))], catalogue.scan_literals())
    assert [(e.line, e.signature) for e in found.errors] == [(3, "nccl-tests-out-of-bounds-failed")]


# libfabric#4283 (https://github.com/ofiwg/libfabric/issues/4283) and ucx#1569
# (https://github.com/openucx/ucx/issues/1569): libmlx5's error CQE dump, hosts rewritten; in the second the
# fourth row runs into UCX's next line, as posted
CQE_LIBFABRIC = (
    b"mlx5: node-a: got completion with error:\n"
    b"00000000 00000000 00000000 00000000\n"
    b"00000000 00000000 00000000 00000000\n"
    b"00000002 00000000 00000000 00000000\n"
    b"00000000 00008813 10012abe 0dd0c1d3\n"
    b"libfabric:ofi_rxm:cq:rxm_cq_read_write_error():819<warn> fi_cq_readerr: err: 5, prov_err: remote "
    b"access error (10)\n"
)
CQE_UCX = (
    b"mlx5: node-b: got completion with error:\n"
    b"00000000 00000000 00000000 00000000\n"
    b"00000000 00000000 00000000 00000000\n"
    b"00000000 00000000 00000000 00000000\n"
    b"00000000 00008813 08006214 0000f6d2[1496344648.549828] [node-b:14872:0]       dc_verbs.c:614  UCX  "
    b"ERROR Send completion with error on qp 0x6183: remote access error syndrome 0x88\n"
)


def _cqe(data: bytes, chunk: int | None = None):
    saved = nccl_log_scan.CHUNK_BYTES
    nccl_log_scan.CHUNK_BYTES = chunk or saved
    try:
        found = analyze([("t.log", io.BytesIO(data))], catalogue.scan_literals())
    finally:
        nccl_log_scan.CHUNK_BYTES = saved
    return [e for e in found.errors if e.signature == "mlx5-cqe-completion-error"]


def test_an_mlx5_error_cqe_dump_is_decoded_from_its_fourth_row():
    head = b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    for dump in (CQE_LIBFABRIC, CQE_UCX):
        for chunk in (None, 64):
            (cqe,) = _cqe(head + dump, chunk)
            assert cqe.line == 2 and "lines 2-6): syndrome 0x13 = remote access error" in cqe.explanation
            assert "vendor syndrome 0x88" in cqe.explanation


def test_a_cqe_header_without_its_rows_gets_no_syndrome():
    data = b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nmlx5: node-a: got completion with error:\nok\n"
    (cqe,) = _cqe(data)
    assert "This dump" not in cqe.explanation


@given(st.lists(st.text(alphabet="abn-de", min_size=1, max_size=7), max_size=12, unique=True))
def test_torn_hosts_is_the_pairwise_suffix_test_without_its_square(names):
    """``summary.torn_hosts`` looks each name's suffixes up (names x length) and answers as the pairwise
    test it replaced (names squared: 0.16 s for a 512-node log, seconds for thousands of nodes)."""
    from types import SimpleNamespace

    from topodoc.parsers.nccl_log import summary

    hosts = [SimpleNamespace(name=n) for n in names]
    pairwise = {short: long for short in names for long in names
                if short != long and len(short) >= 2 and long.endswith(short)}
    assert summary.torn_hosts(hosts) == pairwise
    assert list(summary.torn_hosts(hosts)) == list(pairwise)
