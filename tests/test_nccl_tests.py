import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topodoc.codec import to_data
from topodoc.parsers.nccl_tests import NcclTestsParseError, infer_collective, parse, parse_runs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl_tests"
CASES = sorted(FIXTURES.glob("*.txt"))


def _run(name):
    return parse((FIXTURES / name).read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_golden(case):
    expected = json.loads(case.with_suffix(".json").read_text())
    assert to_data(list(parse_runs(case.read_text()))) == expected


def test_single_node_nvswitch():
    run = _run("all-reduce-8xh100-nvswitch.txt")
    assert (run.collective, run.nranks, run.nodes, run.complete) == ("all_reduce", 8, 1, True)
    assert run.nccl_tests_version == "2.17.1" and run.devices[3].bus_id == "0000:5d:00"
    assert run.rows[-1].size == 8 * 2**30 and run.rows[-1].out_of_place.busbw > 470


def test_two_node_ib_with_mpi_prefixes_and_info_lines():
    run = _run("all-reduce-2x8xa100-ib.txt")
    assert (run.nranks, run.nodes, run.nccl_version) == (16, 2, "2.18.5")
    assert run.unparsed_lines == () and run.ignored_lines > 5


def test_wrong_results_are_reported():
    run = _run("all-reduce-2gpu-phb-wrong.txt")
    assert run.out_of_bounds == 1030
    assert sum(r.out_of_place.wrong + r.in_place.wrong for r in run.rows) == 1030
    assert run.program == "all_reduce_perf" and run.nranks == 2


def test_truncated_run_keeps_rows_and_says_where_it_stopped():
    run = _run("all-reduce-8xa100-pcie-truncated.txt")
    assert not run.complete and run.avg_bus_bandwidth is None and len(run.rows) == 11
    assert "2147483648 bytes" in run.failures[-1] and "Test NCCL failure" in run.failures[0]


def test_rows_cut_by_nccl_info_lines_are_reassembled():
    run = _run("all-reduce-info-interleaved.txt")
    assert len(run.rows) == 15 and all(r.in_place and r.in_place.busbw is not None for r in run.rows)
    assert run.rows[0].type == "bfloat16" and run.rows[0].root == -1


def test_old_error_column():
    run = _run("all-reduce-old-error-column.txt")
    assert run.wrong_column == "error" and run.rows[0].root is None
    assert run.rows[-1].in_place.wrong == pytest.approx(1e-06) and run.nranks == 16


def test_per_iteration_columns_and_timestamps():
    run = _run("all-reduce-per-iteration-columns.txt")
    last = run.rows[-1]
    assert last.out_of_place.busbw == 360.02 and last.in_place.busbw == 360.69 and last.in_place.wrong == 0


def test_several_collectives_in_one_file():
    runs = parse_runs((FIXTURES / "several-collectives-8xh100.txt").read_text())
    assert [r.collective for r in runs] == ["all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce",
                                            "sendrecv"]
    assert runs[2].rows[-1].in_place.wrong is None and runs[3].rows[0].root == 0


def test_collective_inferred_without_a_program_name():
    runs = parse_runs((FIXTURES / "several-collectives-8xh100.txt").read_text())
    assert [infer_collective(r.rows, 8) for r in runs] == [r.collective for r in runs]


def test_no_output_raises():
    with pytest.raises(NcclTestsParseError):
        parse("hello\nworld\n")


def _fmt(value):
    return f"{value:.2f}"


ROWS = st.tuples(st.integers(1, 2**34), st.floats(0.5, 1e6), st.floats(0.0, 900.0), st.integers(0, 99))


@given(st.lists(ROWS, min_size=1, max_size=20), st.booleans())
def test_any_printed_row_parses_back(rows, with_root):
    header = "#       size         count      type   redop" + ("    root" if with_root else "") + \
        "     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
    lines = ["# Using devices", header]
    for size, time, bw, wrong in rows:
        root = "      -1" if with_root else ""
        half = f"  {_fmt(time)}  {_fmt(bw)}  {_fmt(bw * 1.75)}  {wrong}"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum{root}{half}{half}")
    run = parse("\n".join(lines))
    assert [r.size for r in run.rows] == [r[0] for r in rows]
    for row, (_size, time, _bw, wrong) in zip(run.rows, rows, strict=True):
        assert row.in_place.time_us == float(_fmt(time)) and row.out_of_place.wrong == wrong
        assert row.root == (-1 if with_root else None)


@given(st.text(max_size=200))
def test_parser_is_total(text):
    try:
        runs = parse_runs(text)
    except NcclTestsParseError:
        return
    assert all(isinstance(r.rows, tuple) for r in runs)


def test_cli_json_has_the_documented_keys():
    path = str(FIXTURES / "all-reduce-2x8xa100-ib.txt")
    proc = subprocess.run([sys.executable, "-m", "topodoc", "nccltests", path, "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (data,) = json.loads(proc.stdout)["runs"]
    assert (data["collective"], data["nranks"], data["avg_bus_bandwidth"]) == ("all_reduce", 16, 144.288)
    row = data["rows"][0]
    assert row["size"] == 1048576 and set(row["out_of_place"]) == {"time_us", "algbw", "busbw", "wrong"}


def test_cli_bad_file_is_one_line_exit_2(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing here\n")
    proc = subprocess.run([sys.executable, "-m", "topodoc", "nccltests", str(empty)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_hash_comments_alone_are_not_nccl_tests_output():
    import pytest

    from topodoc.parsers.nccl_tests import NcclTestsParseError

    with pytest.raises(NcclTestsParseError):
        parse("#!/bin/bash\n# a shell script, not a benchmark\n#\n# 12 34\n")


# Real outputs from public threads (fixtures/nccl_tests/README.md), one test per parser bug they exposed.

def test_real_slurm_label_prefix_with_padding():
    run = _run("real-slurm-label-rccl1490.txt")
    assert [r.size for r in run.rows] == [65536, 131072, 262144, 524288, 1048576]
    assert run.rows[-1].in_place.busbw == 0.78 and run.unparsed_lines == ()


def test_real_old_build_without_redop_column():
    row = _run("real-old-no-redop-nccl-tests104.txt").rows[0]
    assert (row.type, row.redop, row.root) == ("uint8", None, None)
    assert row.out_of_place.time_us == 11732 and row.in_place.wrong == 300.0


def test_real_old_broadcast_root_without_redop_and_warn_with_source_location():
    run = _run("real-old-root-no-redop-mpirun-nccl-tests82.txt")
    row = run.rows[0]
    assert (row.redop, row.root, row.out_of_place.time_us, row.out_of_place.wrong) == (None, 0, 45.82, None)
    assert run.unparsed_lines == () and run.nccl_version == "2.9.6" and run.collective == "broadcast"


def test_real_tables_pasted_back_to_back_are_two_runs_and_blank_redop():
    runs = parse_runs((FIXTURES / "real-old-error-two-tables-nccl-tests78.txt").read_text())
    assert [r.avg_bus_bandwidth for r in runs] == [4.32178, 0.507636]
    alltoall = runs[1].rows[0]
    assert (alltoall.redop, alltoall.out_of_place.time_us, alltoall.in_place.wrong) == (None, 520935, 1.0)


def test_rank_count_is_not_guessed_from_rounded_figures():
    runs = parse_runs((FIXTURES / "real-old-error-two-tables-nccl-tests78.txt").read_text(), "all_reduce")
    assert runs[0].nranks is None  # 4.33 / 2.20 fits 52 to 80 ranks (64 in the thread)
    assert _run("all-reduce-old-error-column.txt").nranks == 16


def test_real_header_that_lost_its_hash():
    run = _run("real-lost-hash-old-nccl583.txt")
    assert run.wrong_column == "error" and run.unparsed_lines == () and len(run.devices) == 2
    assert run.rows[1].in_place.time_us == 10.31 and run.rows[1].redop == "sum"


def test_output_names_the_collective_before_the_file_name_does():
    text = (FIXTURES / "real-1rank-new-nccl-tests287.txt").read_text()
    assert parse(text, "all_reduce").collective == "alltoall"


@given(st.lists(ROWS, min_size=1, max_size=10), st.sampled_from(["", "sum", "blank"]), st.booleans(),
       st.sampled_from(["", " 0: ", "[1,0]<stdout>:", "12: "]))
def test_old_layouts_parse_back(rows, redop, with_root, prefix):
    columns = ("   redop" if redop else "") + ("    root" if with_root else "")
    header = f"#       size         count      type{columns}" + "     time   algbw   busbw  error" * 2
    lines = [prefix + header]
    for size, time, bw, _wrong in rows:
        cells = {"": "", "sum": "     sum", "blank": "        "}[redop] + ("       0" if with_root else "")
        half = f"  {_fmt(time)}  {_fmt(bw)}  {_fmt(bw)}  0e+00"
        lines.append(f"{prefix}{size:12d}  {size // 4:12d}     float{cells}{half}{half}")
    run = parse("\n".join(lines))
    assert [(r.size, r.redop, r.root) for r in run.rows] == \
        [(r[0], "sum" if redop == "sum" else None, 0 if with_root else None) for r in rows]
    assert all(r.in_place.time_us == float(_fmt(t)) and r.in_place.wrong == 0.0
               for r, (_s, t, _b, _w) in zip(run.rows, rows, strict=True))


@pytest.mark.parametrize(("name", "expected"), [
    ("all_reduce_perf.log", "all_reduce"), ("all-reduce-2node.txt", "all_reduce"),
    ("reduce_perf.txt", "reduce"),
    ("reduce-scatter-8gpu.txt", "reduce_scatter"), ("myreduce.txt", None), ("run.txt", None),
])
def test_collective_from_a_file_name_takes_whole_words(name, expected):
    """A collective name counts only as whole words of the file name ("all-reduce" is not "reduce")."""
    from topodoc.commands.nccltests import _collective_from_name

    assert _collective_from_name(name) == expected
