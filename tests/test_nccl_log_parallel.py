"""Inputs read by several processes (topodoc.parsers.nccl_log.parallel) give the one-process analysis:
many files, and one file cut in parts, on the real-log corpus and on generated lines."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc import catalogue
from topodoc.parsers.nccl_log import NoNcclLinesError, analyze, parallel

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"
LOGS = sorted(REAL.glob("*.log")) + cases()
FIXTURE_LINES = [line for log in cases() for line in log.read_bytes().split(b"\n") if line]


def _both(monkeypatch, paths: list[str]):
    monkeypatch.setenv("TOPODOC_JOBS", "1")
    one = analyze(paths, catalogue.scan_literals())
    monkeypatch.setenv("TOPODOC_JOBS", "2")
    two = analyze(paths, catalogue.scan_literals())
    return one, two


def test_many_real_files_read_by_two_processes_give_the_same_analysis(monkeypatch):
    one, two = _both(monkeypatch, [str(p) for p in LOGS])
    assert one == two and len(one.inputs) == len(LOGS)


def test_one_file_cut_in_parts_gives_the_same_analysis(monkeypatch, tmp_path):
    big = tmp_path / "job.log"
    big.write_bytes(b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in LOGS))
    monkeypatch.setattr(parallel, "SPLIT_BYTES", 1)
    monkeypatch.setattr(parallel, "SPLIT_BYTES", big.stat().st_size // 3 + 1)
    assert len(parallel.plan([str(big)])) == 3
    monkeypatch.setenv("TOPODOC_JOBS", "3")
    three = analyze([str(big)], catalogue.scan_literals())
    one, two = _both(monkeypatch, [str(big)])
    assert one == two == three
    assert three.inputs[0].lines == big.read_bytes().count(b"\n")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FIXTURE_LINES), min_size=2, max_size=60))
def test_any_cut_gives_the_same_analysis(monkeypatch, tmp_path, lines):
    path = tmp_path / "cut.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(parallel, "SPLIT_BYTES", 1)
    monkeypatch.setenv("TOPODOC_JOBS", "1")
    one = _outcome(path)
    monkeypatch.setenv("TOPODOC_JOBS", "2")
    assert _outcome(path) == one


def _outcome(path: Path):
    """The analysis, or the error it ends in (no NCCL line at all) as its message."""
    try:
        return analyze([str(path)], catalogue.scan_literals())
    except NoNcclLinesError as err:
        return str(err)


def test_inputs_that_cannot_be_cut_are_read_here(tmp_path):
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(b"\x1f\x8b")
    utf16 = tmp_path / "b.log"
    utf16.write_bytes("h:1:1 [0] NCCL INFO x\n".encode("utf-16"))
    plain = tmp_path / "c.log"
    plain.write_bytes(b"h:1:1 [0] NCCL INFO x\n")
    units = parallel.plan([str(gz), str(utf16), "-", str(plain)])
    assert units == [parallel.Unit(0, None), parallel.Unit(1, None), parallel.Unit(2, None),
                     parallel.Unit(3, str(plain))]
    assert parallel.pool_size(units) == 1  # a stream among them: all read here


def test_small_inputs_stay_in_one_process(monkeypatch):
    monkeypatch.delenv("TOPODOC_JOBS", raising=False)
    assert parallel.workers(parallel.PARALLEL_BYTES - 1) == 1
    monkeypatch.setenv("TOPODOC_JOBS", "4")
    assert parallel.workers(10) == 4


def test_a_process_running_threads_reads_here(tmp_path):
    import threading

    plain = tmp_path / "c.log"
    plain.write_bytes(b"h:1:1 [0] NCCL INFO x\n")
    units = parallel.plan([str(plain), str(plain)])
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert parallel.pool_size(units) == 1  # fork beside another thread could copy a held lock
    finally:
        stop.set()
        worker.join()


def _record_start_by_lines(data: bytes):
    """The line walk ``parallel._record_start_in`` replaced (its oracle)."""
    at = data.find(b"\n")
    while at >= 0:
        end = data.find(b"\n", at + 1)
        if end < 0:
            return None
        line = data[at + 1 : end]
        before = data[data.rfind(b"\n", 0, at) + 1 : at]
        if b" NCCL INFO " in line and b" -> " not in line and b"WARN" not in before:
            return at + 1
        at = end
    return None


@given(st.lists(st.sampled_from([b"noise", b"", b"h:1:1 [0] NCCL INFO x", b"h:1:1 [0] NCCL INFO a -> b",
                                 b"h:1:1 [0] NCCL WARN y", b"NCCL INFO", b" NCCL INFO  NCCL INFO "]),
                max_size=12), st.booleans())
def test_a_part_starts_where_the_line_walk_would_start_it(lines, newline_at_end):
    from topodoc.parsers.nccl_log import parallel

    data = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    assert parallel._record_start_in(data) == _record_start_by_lines(data)
