"""Long tokens and huge numbers in the nccl-tests and topo parsers: linear regexes, guarded numbers.

A 30,000-character run (digits, spaces, letters, ``#``, ``|``, ...) is put into every fixture; before the
patterns were made linear one such parse took seconds to minutes (``nccltests`` 18 s on a 100k line,
``topo`` 54 s on a 100k-digit line), so these examples would not finish.
"""

from pathlib import Path

import pytest
from conftest import run_cli_process
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.numbers import to_float, to_int
from topodoc.parsers.nccl_tests import NcclTestsParseError, parse_runs
from topodoc.parsers.smi_topo import SmiTopoParseError
from topodoc.parsers.smi_topo import parse as parse_topo

ROOT = Path(__file__).resolve().parent.parent
NT_CASES = sorted((ROOT / "fixtures" / "nccl_tests").glob("*.txt"))
TOPO_CASES = sorted((ROOT / "fixtures" / "topo").glob("*.txt"))
N = 30_000
RUNS = {
    "digits": "7" * N, "spaces": " " * N, "letters": "a" * N, "hash": "#" * N, "pipe": "|" * N,
    "mixed": "12 ab# |" * (N // 8), "brackets": "[1]" * (N // 3), "host-like": "a:1:2 " * (N // 6),
    "colon-run": "x:" * (N // 2), "cells": "NV1" * (N // 3),
}
KINDS = st.sampled_from(sorted(RUNS))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NT_CASES), KINDS, st.floats(0, 1))
def test_nccl_tests_run_on_its_own_line_changes_no_row(case, kind, where):
    lines = case.read_text().splitlines()
    at = int(where * len(lines))
    before = parse_runs("\n".join(lines))
    after = parse_runs("\n".join([*lines[:at], RUNS[kind], *lines[at:]]))
    assert [[r.size for r in run.rows] for run in after] == [[r.size for r in run.rows] for run in before]
    assert [run.devices for run in after] == [run.devices for run in before]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NT_CASES), KINDS, st.floats(0, 1))
def test_nccl_tests_run_inside_any_line_parses_or_says_none_found(case, kind, where):
    text = case.read_text()
    at = int(where * len(text))
    try:
        runs = parse_runs(text[:at] + RUNS[kind] + text[at:])
    except NcclTestsParseError:
        return
    assert all(row.size >= 0 for run in runs for row in run.rows)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(TOPO_CASES), KINDS, st.floats(0, 1))
def test_topo_run_on_its_own_line_above_the_matrix_changes_nothing(case, kind, where):
    lines = case.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if "GPU0" in line)
    at = int(where * header)
    before = parse_topo("\n".join(lines))
    after = parse_topo("\n".join([*lines[:at], RUNS[kind], *lines[at:]]))
    assert (after.links, after.gpus, after.nics) == (before.links, before.gpus, before.nics)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(TOPO_CASES), KINDS, st.floats(0, 1))
def test_topo_run_inside_any_line_parses_or_says_none_found(case, kind, where):
    text = case.read_text()
    at = int(where * len(text))
    try:
        matrix = parse_topo(text[:at] + RUNS[kind] + text[at:])
    except SmiTopoParseError:
        return
    assert matrix.gpus


HUGE = "9" * 5000  # over Python's 4,300-digit int() limit


def test_huge_numbers_in_every_nccl_tests_field_do_not_crash():
    text = "\n".join([
        f"#  Rank {HUGE} Group  0 Pid  1 on host device  0 [0000:18:00] NVIDIA H100",
        "#  Rank  1 Group  0 Pid  2 on host device  1 [0000:2a:00] NVIDIA H100",
        "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        f"{HUGE} 2 float sum -1 10.0 0.00 0.00 0 10.0 0.00 0.00 0",
        f"1024 256 float sum -1 10.0 {HUGE} 0.10 0 10.0 0.10 0.10 {HUGE}",
        f"# Out of bounds values : {HUGE} OK",
        f"# Avg bus bandwidth    : {HUGE}",
    ])
    run = parse_runs(text)[0]
    assert [d.rank for d in run.devices] == [1]
    assert [r.size for r in run.rows] == [1024]
    assert run.rows[0].out_of_place.algbw is None and run.rows[0].in_place.wrong is None
    assert run.out_of_bounds is None and run.avg_bus_bandwidth is None


def test_huge_numbers_through_the_cli_exit_cleanly(tmp_path):
    path = tmp_path / "huge.txt"
    path.write_text(f"# Avg bus bandwidth    : {HUGE}\n{HUGE} {HUGE} float sum -1 1 1 1 0 1 1 1 0\n")
    run = run_cli_process("nccltests", str(path))
    assert run.returncode == 0 and "Traceback" not in run.stderr
    topo = run_cli_process("topo", "-", input=f"{HUGE}\n" + TOPO_CASES[0].read_text())
    assert topo.returncode == 0 and "Traceback" not in topo.stderr


@pytest.mark.parametrize(("text", "value"), [
    ("42", 42), ("-3", -3), ("+7", 7), (" 5 ", 5), ("1" * 40, int("1" * 40)),
    ("1" * 41, None), (HUGE, None), ("1.5", None), ("", None), ("x", None),
])
def test_to_int_is_guarded(text, value):
    assert to_int(text) == value


@pytest.mark.parametrize(("text", "value"), [("1.5", 1.5), ("1.2e+04", 12000.0), ("nan", None), ("inf", None),
                                             (HUGE, None), ("1e999", None), ("N/A", None)])
def test_to_float_is_guarded(text, value):
    assert to_float(text) == value
