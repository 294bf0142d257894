"""Hostile input for the NCCL log analyzer (issue 10): long tokens, HCA names that look like huge ranges,
huge numbers. Each case once hung, exhausted memory or crashed; here it must finish with the same
analysis a sane input gives. (Time is measured once in the report, not asserted here.)"""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc.codec import to_data
from topodoc.parsers.nccl_log import analyze, analyze_text
from topodoc.parsers.nccl_log.scan import LINE_LIMIT

RUNS = ("a", "1:", " ", "[", "x ", "0", "|", "1:1 [0] ", ":")  # runs that walked the old regexes per position
LOGS = cases()


def _view(data: bytes):
    analysis = analyze([("h.log", io.BytesIO(data))])
    return _unlined(to_data(analysis.summary)), _unlined(to_data(analysis.connections)), analysis.inputs[0]


def _between_records(lines: list[bytes], i: int) -> bool:
    """Line ``i`` starts a whole INFO record and line ``i - 1`` (if any) is one: a place where a line can
    go without parting two lines that belong together (``Last error:`` and its text, a torn line)."""
    def whole(line: bytes) -> bool:
        return b" NCCL INFO " in line and b" via " in line if b"->" in line else b" NCCL INFO " in line
    return whole(lines[i]) and (i == 0 or whole(lines[i - 1]))


def _unlined(data):
    """``data`` without line numbers (an inserted line moves every line after it)."""
    if isinstance(data, dict):
        return {k: _unlined(v) for k, v in data.items() if k != "line"}
    if isinstance(data, list):
        return [_unlined(v) for v in data]
    return re.sub(r"h\.log:\d+", "h.log:N", data) if isinstance(data, str) else data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.sampled_from(RUNS), st.integers(0, 10**6))
def test_a_long_run_on_a_line_of_its_own_changes_nothing(log, run, where):
    lines = log.read_bytes().split(b"\n")
    places = [i for i in range(len(lines)) if _between_records(lines, i)] or [0]
    at = places[where % len(places)]
    noisy = b"\n".join(lines[:at] + [(run * (30000 // len(run))).encode()] + lines[at:])
    summary, conns, _stats = _view(log.read_bytes())
    summary2, conns2, stats2 = _view(noisy)
    assert (summary2, conns2) == (summary, conns)
    assert stats2.long_lines == 0  # a line holding nothing NCCL is never handed to the grammar


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.sampled_from(RUNS), st.integers(0, 10**6), st.integers(0, 200))
def test_a_long_run_inside_a_line_is_read_by_its_ends_and_reported(log, run, where, column):
    lines = log.read_bytes().split(b"\n")
    at = where % len(lines)
    line = lines[at]
    cut = min(column, len(line))
    lines[at] = line[:cut] + (run * (30000 // len(run))).encode() + line[cut:]
    analysis = analyze([("h.log", io.BytesIO(b"\n".join(lines)))])
    texts = [c.evidence.text for c in analysis.connections] + [e.text for e in analysis.errors]
    assert all(len(text) <= LINE_LIMIT + 8 for text in texts)  # no evidence carries the 30k run whole
    assert analysis.inputs[0].long_lines <= 1


def test_a_200k_line_ending_in_a_warn_is_one_error_and_one_long_line():
    analysis = analyze_text("a" * 200_000 + " NCCL WARN Cuda failure 'out of memory'\n")
    assert analysis.inputs[0].long_lines == 1
    (error,) = analysis.errors
    assert error.category == "cuda_error"
    assert error.text.endswith("NCCL WARN Cuda failure 'out of memory'")
    assert len(error.text) < LINE_LIMIT + 8


def test_an_over_long_line_is_reported_in_the_inputs_section(tmp_path):
    log = tmp_path / "long.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + "x" * 9000 + " NCCL WARN x\n")
    run = subprocess.run([sys.executable, "-m", "topodoc", "logs", str(log)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"1 line over {LINE_LIMIT} bytes read by their two ends only" in run.stdout


HCA_LOG = (
    "h:1:1 [0] NCCL INFO Using network IB\n"
    "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]{name}:1/IB ; OOB eth0:10.0.0.1<0>\n"
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
)


def _logs_cli(tmp_path, text: str) -> subprocess.CompletedProcess:
    log = tmp_path / "hca.log"
    log.write_text(text)
    return subprocess.run([sys.executable, "-m", "topodoc", "logs", str(log)], capture_output=True, text=True)


def test_hca_names_far_apart_are_listed_not_expanded_into_a_range(tmp_path):
    run = _logs_cli(tmp_path, HCA_LOG.format(name="mlx5_100000000"))
    assert run.returncode == 0, run.stderr
    assert "on mlx5_0, mlx5_1, mlx5_100000000;" in run.stdout.splitlines()[0]


def test_an_hca_number_too_big_for_a_machine_int_is_a_name(tmp_path):
    run = _logs_cli(tmp_path, HCA_LOG.format(name="mlx5_99999999999999999999999"))
    assert run.returncode == 0, run.stderr
    assert "mlx5_99999999999999999999999" in run.stdout.splitlines()[0]


def test_a_run_of_hcas_is_still_shown_as_a_range(tmp_path):
    run = _logs_cli(tmp_path, HCA_LOG.format(name="mlx5_2"))
    assert "on mlx5_0..2;" in run.stdout.splitlines()[0]


def test_huge_numbers_in_every_numeric_slot_do_not_crash():
    big = "9" * 5000
    text = (
        f"h:{big}:1 [0] NCCL INFO cudaDriverVersion 12040\n"
        f"h:1:1 [0] NCCL INFO cudaDriverVersion {'9' * 4000}\n"
        f"h:1:1 [{big}] NCCL INFO comm 0x1 rank {big} nranks {big} cudaDev 0 busId 1000 - Init START\n"
        f"h:1:1 [0] NCCL INFO Channel 00/0 : {big}[0] -> 1[1] via NET/IB/{big}/GDRDMA\n"
        f"h:1:1 [0] NCCL INFO comm 0x2 rank {'9' * 40} nranks {'9' * 40} cudaDev 0 busId 1000 - Init START\n"
        f"h:1:1 [0] NCCL INFO NET/IB : Using [{big}]mlx5_0:{big}/IB\n"
    )
    analysis = analyze_text(text)
    assert analysis.inputs[0].long_lines == 3  # the channel line is only counted, under a capped key
    assert analysis.connections == ()  # no rank NCCL could print has 5000 digits
    assert analysis.summary.cuda_driver_version == int("9" * 4000)


def test_text_after_the_transport_token_is_cut():
    analysis = analyze_text(
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/3/GDRDMA then other text\n"
        "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/AWS Libfabric/2/GDRDMA\n"
    )
    rows = {(c.transport, c.nic, c.gdr) for c in analysis.connections}
    assert rows == {("NET/IB", 3, True), ("NET/AWS Libfabric", 2, True)}


def test_restarts_with_new_pids_fold_into_the_same_connection_rows():
    line = "node-{n}:{pid}:{pid} [0] NCCL INFO Channel {ch:02d}/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
    once = analyze_text("".join(line.format(n=1, pid=100, ch=ch) for ch in range(4)))
    many = analyze_text("".join(line.format(n=1, pid=100 + r, ch=ch) for r in range(50) for ch in range(4)))
    assert len(many.connections) == len(once.connections) == 1
    assert many.connections[0].channels == 200


# Line shapes users paste (issue 12 §1). The lines are real ones from NVIDIA/nccl#707
# (https://github.com/NVIDIA/nccl/issues/707) and NVIDIA/nccl#1814, with the "host:pid:tid [dev]" prefix
# trimmed the way users quote them.
TRIMMED = (
    "NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA\n"
    "NCCL INFO Channel 01 : 3[ca000] -> 2[c7000] [send] via NET/IB/2/GDRDMA\n"
    "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55921> with status=12 opcode=1 len=0 "
    "vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2\n"
)
BARE = (
    "2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA\n"
    "3[ca000] -> 2[c7000] [send] via NET/IB/2/GDRDMA\n"
)


def test_lines_with_the_prefix_trimmed_are_read():
    analysis = analyze_text(TRIMMED)
    rows = {(c.host, c.rank, c.peer, c.direction, c.nic, c.gdr) for c in analysis.connections}
    assert rows == {(None, 0, 2, "receive", 5, True), (None, 3, 2, "send", 2, True)}
    assert [e.category for e in analysis.errors] == ["ib_completion_error"]
    assert analysis.inputs[0].nccl_lines == 3 and analysis.summary.hosts == ()


def test_bare_connection_lines_are_read():
    analysis = analyze_text(BARE)
    rows = {(c.rank, c.peer, c.transport, c.nic, c.gdr) for c in analysis.connections}
    assert rows == {(0, 2, "NET/IB", 5, True), (3, 2, "NET/IB", 2, True)}
    assert analysis.inputs[0].nccl_lines == 2


def test_an_nccl_prefix_inside_another_line_starts_a_record_and_names_no_host():
    # an nccl-tests header row with an NCCL record fused onto its end (a shared stdout)
    analysis = analyze_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong "
        "node-a:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA\n"
    )
    assert analysis.summary.hosts == ("node-a",)
    assert [(c.host, c.rank, c.peer) for c in analysis.connections] == [("node-a", 0, 2)]


def test_one_endless_line_is_read_in_bounded_memory():
    """256 MB without a newline, then a WARN, piped to `topodoc logs -`: the line is kept by its two ends
    (all the grammar reads of an over-long line), so memory stays bounded; it used to be copied whole on
    every block read (memory as big as the line, time quadratic in it). The peak RSS is read in a fresh
    parent process, so no other test's children count."""
    head = b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    writer = (
        f"import sys; out = sys.stdout.buffer; out.write({head!r}); chunk = b'x' * (1 << 20)\n"
        "for _ in range(256): out.write(chunk)\n"
        "out.write(b' h:1:1 [0] misc/socket.cc:50 NCCL WARN the end\\n')"
    )
    parent = (
        "import resource, subprocess, sys\n"
        f"w = subprocess.Popen([sys.executable, '-c', {writer!r}], stdout=subprocess.PIPE)\n"
        "r = subprocess.run([sys.executable, '-m', 'topodoc', 'logs', '--json', '-'], stdin=w.stdout,"
        " capture_output=True)\n"
        "w.wait()\n"
        "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.stdout.buffer.write(r.stdout); sys.exit(r.returncode)"
    )
    run = subprocess.run([sys.executable, "-c", parent], capture_output=True)
    assert run.returncode == 0, run.stderr[-400:]
    data = json.loads(run.stdout)
    assert data["inputs"][0]["long_lines"] == 1 and data["inputs"][0]["bytes"] > 256 << 20
    assert [e["text"][-12:] for e in data["errors"]] == ["WARN the end"]
    assert all(len(e["text"]) < LINE_LIMIT * 3 for e in data["errors"])
    assert int(run.stderr.decode().strip().splitlines()[-1]) < 200 * 1024  # KiB: not the line's size


def test_endless_or_binary_inputs_are_refused_in_one_line(tmp_path):
    """/dev/zero and /dev/urandom never end, and NUL bytes are no log: exit 2 with one line at once (they
    used to be read forever); /dev/null is an empty input like any other."""
    zeros = tmp_path / "zeros.log.gz"
    with gzip.open(zeros, "wb") as out:
        out.write(bytes(8 << 20))
    cases = [(["/dev/zero"], None, "a device"), (["/dev/urandom"], None, "a device"),
             ([str(zeros)], None, "binary data"), (["-"], bytes(1 << 20), "binary data"),
             (["/dev/null"], None, "no NCCL lines")]
    for args, stdin, said in cases:
        run = subprocess.run([sys.executable, "-m", "topodoc", "logs", *args], input=stdin,
                             capture_output=True, timeout=60)
        assert run.returncode == 2, (args, run.stderr)
        assert said in run.stderr.decode() and run.stderr.decode().count("\n") == 1, (args, run.stderr)
