"""Memory and output bounded by the job, not by the log: a job restarted again and again (new pids, new
communicators each time) folds into the same connection rows, a capped rank table and one note; the
catalogue's extra prefilter literals reach the full grammar."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

from topodoc.parsers.nccl_log import analyze, summary

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _restarted(restarts: int, nodes: int = 2) -> bytes:
    sys.path.insert(0, str(BENCH))
    try:
        import logs_bench
    finally:
        sys.path.remove(str(BENCH))
    rng, lines = random.Random(3), []
    for restart in range(restarts):
        lines += logs_bench.comm_block(nodes, restart, rng, pid_base=10000 + 16 * restart)
    return ("\n".join(lines) + "\n").encode()


def _analyze(data: bytes):
    return analyze([("job.log", io.BytesIO(data))])


def test_restarts_fold_connections_and_cap_the_tables(monkeypatch):
    once, many = _analyze(_restarted(1)), None
    monkeypatch.setattr(summary, "RANK_ROWS", 40)
    monkeypatch.setattr(summary, "PIDS_LISTED", 10)
    many = _analyze(_restarted(6))
    assert [(c.rank, c.peer, c.transport) for c in many.connections] == [
        (c.rank, c.peer, c.transport) for c in once.connections]
    assert [c.channels for c in many.connections] == [6 * c.channels for c in once.connections]
    assert len(many.communicators) == 6 and len(many.ranks) == 32  # two whole 16-rank communicators
    assert all(len(h.pids) == 10 for h in many.hosts)
    notes = " ".join(many.summary.notes)
    assert "rank table lists 32 of 96" in notes and "the rows of 4 more communicators" in notes
    assert "2 host(s) ran more than 10 NCCL processes (up to 48" in notes
    assert (many.summary.nranks, many.summary.nnodes) == (16, 2)


def test_a_single_communicator_bigger_than_the_cap_is_cut_at_the_cap(monkeypatch):
    monkeypatch.setattr(summary, "RANK_ROWS", 5)
    analysis = _analyze(_restarted(1))
    assert len(analysis.ranks) == 5 and analysis.summary.nranks == 16


def test_extra_literals_send_their_lines_to_the_full_grammar():
    data = (
        b"node-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        b"node-b:2:2 [0] NCCL INFO transport/net_ib.cc:123 peer said nothing\n"  # a first word not looked at
        b"kernel: mlx5_core 0000:3b:00.0: port module event: cable unplugged\n"  # no NCCL keyword at all
    )
    plain = _analyze(data)
    assert (plain.summary.hosts, plain.errors) == (("node-a", "node-b"), ())  # hosts: every prefixed line
    found = analyze([("job.log", io.BytesIO(data))], extra_literals=["peer said nothing", "cable unplugged"])
    assert found.summary.hosts == ("node-a", "node-b")
    assert [(e.line, e.category) for e in found.errors] == [(3, "other")]


def test_the_report_says_what_was_folded(tmp_path):
    import subprocess

    log = tmp_path / "job.log"
    log.write_bytes(_restarted(70))  # 70 restarts: more than 64 pids per host
    run = subprocess.run([sys.executable, "-m", "topodoc", "logs", str(log)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    notes = run.stdout.split("\nNotes\n", 1)[1]
    assert "2 host(s) ran more than 64 NCCL processes (up to 560" in notes


def test_the_process_table_is_capped_and_says_so(monkeypatch):
    from topodoc.parsers.nccl_log import facts

    monkeypatch.setattr(facts, "PROC_LIMIT", 20)
    analysis = _analyze(_restarted(3))  # 3 x 16 processes
    assert sum(len(h.pids) for h in analysis.hosts) == 20
    notes = analysis.summary.notes
    assert any(note.startswith("process table capped at 20 (host, pid) pairs") for note in notes)
    assert analysis.summary.hosts == ("gpu-node000", "gpu-node001")
    assert len(analysis.communicators) == 3


def test_the_connection_table_is_capped_and_says_so(monkeypatch):
    from topodoc.parsers.nccl_log import state

    monkeypatch.setattr(state, "CONN_LIMIT", 3)
    line = "h:1:1 [0] NCCL INFO Channel 00/0 : {r}[0] -> {p}[1] via P2P/IPC\n"
    analysis = _analyze("".join(line.format(r=r, p=r + 1) for r in range(10)).encode())
    assert len(analysis.connections) == 3
    assert any(note.startswith("connection table capped at 3 distinct lines; 7 connection lines")
               for note in analysis.summary.notes)
