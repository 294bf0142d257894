"""The one text reader (topodoc/inputs.py) and the commands that use it: stdin, .gz, UTF-16, CRLF, caps."""

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from conftest import run_cli_process
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.inputs import MAX_BYTES, MAX_LINE, read_text, strip_ansi
from topodoc.report.document import document

ROOT = Path(__file__).resolve().parent.parent
TOPO = ROOT / "fixtures" / "topo" / "dgx-a100-nv12-mlx5.txt"
NCCL_TESTS = ROOT / "fixtures" / "nccl_tests" / "all-reduce-8xh100-nvswitch.txt"


def _topo_json(*args, input=None):
    run = run_cli_process("topo", *args, "--json", input=input, text=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _nccltests_json(*args, input=None):
    run = run_cli_process("nccltests", *args, "--json", input=input, text=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# -- encodings and containers, each through a real CLI run ------------------------------------------

@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_topo_reads_utf16_with_and_without_bom(tmp_path, encoding):
    path = tmp_path / "topo.txt"
    path.write_bytes(TOPO.read_text().replace("\n", "\r\n").encode(encoding))
    golden = json.loads(TOPO.with_suffix(".json").read_text())
    assert _topo_json(str(path)) == document("topodoc.topo", golden)


def test_topo_and_nccltests_read_gz_files_and_gzip_on_stdin(tmp_path):
    golden = document("topodoc.topo", json.loads(TOPO.with_suffix(".json").read_text()))
    path = tmp_path / "topo.txt.gz"
    path.write_bytes(gzip.compress(TOPO.read_bytes()))
    assert _topo_json(str(path)) == golden
    assert _topo_json("-", input=gzip.compress(TOPO.read_bytes())) == golden
    expected = json.loads(NCCL_TESTS.with_suffix(".json").read_text())
    assert _nccltests_json("-", input=gzip.compress(NCCL_TESTS.read_bytes()))["runs"] == expected


def test_nccltests_reads_utf16_stdin_and_names_it_stdin_on_error():
    expected = json.loads(NCCL_TESTS.with_suffix(".json").read_text())
    assert _nccltests_json("-", input=NCCL_TESTS.read_text().encode("utf-16"))["runs"] == expected
    bad = run_cli_process("nccltests", "-", input="nothing here\n")
    assert bad.returncode == 2 and bad.stderr.startswith("topodoc nccltests: stdin: no nccl-tests output")


def test_diagnose_nccl_tests_accepts_stdin_and_gz(tmp_path):
    path = tmp_path / "run.txt.gz"
    path.write_bytes(gzip.compress(NCCL_TESTS.read_bytes()))
    for args, data in (([str(path)], None), (["-"], NCCL_TESTS.read_bytes())):
        run = run_cli_process("diagnose", "--from", "example:hgx-h100-8x400g-ib", "--nccl-tests", *args,
                              "--json", input=data, text=False)
        assert run.returncode in (0, 1), run.stderr
        assert json.loads(run.stdout)["inputs"]["nccl-tests"] == args[0]


def test_a_broken_gz_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(TOPO.read_bytes())[:40])
    for command in ("topo", "nccltests"):
        run = run_cli_process(command, str(path))
        assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert f"cannot read {path}" in run.stderr and "Traceback" not in run.stderr


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    path = tmp_path / "topo.txt"
    path.write_bytes(b"\xff\xc3(garbage)\n" + TOPO.read_bytes())
    assert _topo_json(str(path))["links"]["GPU0"]["GPU1"] == "NV12"


# -- endless and huge inputs ----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["topo", "nccltests"])
def test_dev_zero_stops_at_the_cap_with_a_clear_message(command):
    run = run_cli_process(command, "/dev/zero", timeout=60)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines[0] == f"topodoc {command}: note: /dev/zero: input truncated at {MAX_BYTES} bytes " \
                       "(the rest was not read)"
    assert "line 1 skipped" in lines[1] and "Traceback" not in run.stderr


def _endless_fifo(path: Path, head: bytes) -> threading.Thread:
    """A FIFO whose writer sends ``head`` and then lines forever, until the reader goes away."""
    os.mkfifo(path)

    def write() -> None:
        try:
            with open(path, "wb") as fifo:
                fifo.write(head)
                while True:
                    fifo.write(b"GPU0 more text that never ends\n" * 1024)
        except (BrokenPipeError, OSError):
            return

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_endless_fifo_is_read_up_to_the_cap_and_the_matrix_still_explained(tmp_path):
    fifo = tmp_path / "topo.fifo"
    writer = _endless_fifo(fifo, TOPO.read_bytes())
    run = run_cli_process("topo", str(fifo), "--json", timeout=60)
    writer.join(timeout=10)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["links"]["GPU0"]["GPU1"] == "NV12"
    assert "input truncated after 20000 lines (the rest was not read)" in run.stderr
    assert not writer.is_alive()


def test_endless_fifo_into_nccltests_stops_and_parses_what_it_read(tmp_path):
    fifo = tmp_path / "nt.fifo"
    writer = _endless_fifo(fifo, NCCL_TESTS.read_bytes())
    run = run_cli_process("nccltests", str(fifo), "--json", timeout=120)
    writer.join(timeout=10)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["runs"][0]["collective"] == "all_reduce"
    assert "input truncated after 100000 lines" in run.stderr


def test_an_over_long_line_is_reported_and_the_rest_parsed(tmp_path):
    path = tmp_path / "topo.txt"
    path.write_text("7" * (MAX_LINE + 10) + "\n" + TOPO.read_text())
    run = run_cli_process("topo", str(path), "--json")
    assert run.returncode == 0
    assert f"line 1 skipped: {MAX_LINE + 10} characters" in run.stderr
    assert json.loads(run.stdout)["links"]["GPU0"]["GPU1"] == "NV12"


# -- the reader itself ---------------------------------------------------------------------------

def test_reader_keeps_line_numbers_when_it_blanks_a_long_line(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"a\r\n" + b"b" * 50 + b"\r\nc\rd\n")
    given = read_text(str(path), max_line=10)
    assert given.text == "a\n\nc\nd\n"
    assert given.long_lines == ((2, 50),) and given.truncated is None


def test_reader_byte_cap_applies_after_decompression(tmp_path):
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(b"x\n" * 500_000))
    given = read_text(str(path), max_bytes=1000)
    assert given.truncated == "at 1000 bytes" and len(given.text) <= 1000


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_strip_ansi_removes_every_escape_and_keeps_plain_text(text):
    plain = text.replace("\x1b", "").replace("[", "(")
    assert strip_ansi(plain) == plain
    assert "\x1b" not in strip_ansi(f"\x1b[1;32m{text}\x1b[0m")


def test_strip_ansi_knows_csi_osc_and_lost_escapes():
    assert strip_ansi("\x1b]0;title\x07GPU0\x1b[4m X\x1b[0m [4mNV12[0m") == "GPU0 X NV12"
