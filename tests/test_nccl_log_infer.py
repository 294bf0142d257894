"""Inferences across lines (topodoc/parsers/nccl_log/infer.py, wordings.py) on real log lines.

Every log here is a real paste from a public thread (fixtures/logs/real/*, each with its source in its
.truth.json) or real lines quoted below with their source; the one constructed log is the nic-loopback rule
fixture (fixtures/rules/nccl-nic-loopback/SOURCES.md says which of its lines are real).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_cli_process
from topodoc import catalogue
from topodoc.logmodel import Evidence
from topodoc.parsers.nccl_log import analyze, analyze_text, infer, wordings
from topodoc.parsers.nccl_log.scan import Scanner
from topodoc.parsers.nccl_log.state import LogState
from topodoc.parsers.nccl_log.summary import build

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "logs" / "real"
RULES = ROOT / "fixtures" / "rules"
LITERALS = catalogue.scan_literals()


def _analyze(*paths: Path):
    return analyze([str(p) for p in paths], LITERALS)


def _inputs(**texts: str):
    return analyze([(name, io.BytesIO(text.encode())) for name, text in texts.items()], LITERALS)


def _kinds(analysis) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in analysis.inferences:
        out.setdefault(item.kind, []).append(item)
    return out


# --- one node, NIC loopback ------------------------------------------------------------------------------

def test_one_process_driving_several_gpus_is_one_node_whatever_using_network_says():
    """tinygrad/open-gpu-kernel-modules#29: nccl-tests drives 8 RTX 5090 from one process; 'Using network
    IB' names the plugin NCCL would use, not a second node."""
    found = _analyze(REAL / "rtx5090-maxsharedmem-ib-2-25.log")
    assert (found.summary.nnodes, found.summary.transport) == (1, "none")
    single = _kinds(found)["single_node"][0]
    assert (single.host, single.pid) == ("node-a", 259034)
    assert "0, 2, 5" in single.statement and single.unknown  # the devices, and what would overturn it
    assert any("Bootstrap" in ev.text or "# " in ev.text for ev in single.evidence)
    assert found.summary.evidence["transport"] == found.summary.evidence["nnodes"]


def test_p2p_direct_pointer_rows_of_one_process_are_one_node():
    found = _analyze(REAL / "single-host-ip-like-name-p2p-pxn.log")  # NVIDIA/nccl#1773
    assert (found.summary.nnodes, found.summary.transport) == (1, "none")
    assert "nic_loopback" not in _kinds(found)


# NVIDIA/nccl#1412: one process drives GPUs 4-7 of swat1-04 and sends to ranks 12 and 13 over NET/IB: those
# ranks live in another process (another node), so one process is no proof of one node here
ISSUE_1412 = """\
swat1-04:2017630:2017697 [7] NCCL INFO Channel 00/0 : 7[7] -> 6[6] via P2P/direct pointer/read
swat1-04:2017630:2017699 [5] NCCL INFO Channel 03/0 : 5[5] -> 12[4] [send] via NET/IB/3
swat1-04:2017630:2017700 [4] NCCL INFO Channel 03/0 : 13[5] -> 4[4] [receive] via NET/IB/3
swat1-04:2017630:2017698 [6] NCCL INFO Channel 05/0 : 6[6] -> 3[3] via P2P/direct pointer/read
swat1-04:2017630:2017699 [5] NCCL INFO Channel 00/0 : 5[5] -> 4[4] via P2P/direct pointer/read
"""


def test_one_process_with_network_peers_outside_it_is_not_one_node():
    found = analyze_text(ISSUE_1412, "issue-1412.log")
    assert found.summary.nnodes != 1 and found.summary.transport == "IB"
    assert not _kinds(found)


def test_connection_lines_of_other_processes_forbid_the_one_process_proof():
    """NVIDIA/nccl#290: four Horovod processes print the ring; only one of them prints a WARN (the only
    record the scanner reads with its pid); the ring lines carry the other pids."""
    found = _analyze(REAL / "shm-posix-fallocate-horovod-ring.log")
    assert "single_node" not in _kinds(found)


def test_nic_loopback_inside_one_node_is_said_and_tied_to_the_env_echo():
    found = _analyze(RULES / "nccl-nic-loopback" / "fire.log")
    assert (found.summary.nnodes, found.summary.transport) == (1, "none")
    loop = _kinds(found)["nic_loopback"][0]
    assert "NET/Socket" in loop.statement and "NCCL_P2P_DISABLE=1" in loop.statement
    assert "NCCL_SHM_DISABLE=1" in loop.statement and loop.unknown is None
    texts = [ev.text for ev in loop.evidence]
    assert any("via NET/Socket" in t for t in texts) and any("NCCL_SHM_DISABLE set" in t for t in texts)


def test_nic_loopback_without_an_env_echo_says_what_would_tell_why():
    text = (RULES / "nccl-nic-loopback" / "fire.log").read_text()
    kept = "".join(line for line in text.splitlines(keepends=True) if "_DISABLE set by" not in line)
    loop = _kinds(analyze_text(kept, "no-echo.log"))["nic_loopback"][0]
    assert "no NCCL_P2P_DISABLE / NCCL_SHM_DISABLE echo" in loop.statement and "P2P,SHM" in loop.unknown


# --- the first failure in time across ranks --------------------------------------------------------------

def test_first_failure_is_the_cause_not_the_closed_connection_printed_before_it():
    """NVIDIA/nccl#1235: process 3063025's 'Connection closed by remote peer' is printed first; the cause
    is process 3063028's Cuda failure 'out of memory' further down."""
    found = _analyze(REAL / "oom-calloc-narval-cascade.log")
    first = _kinds(found)["first_failure"][0]
    assert (first.host, first.pid) == ("node-a", 3063028)
    assert "out of memory" in first.evidence[0].text and "consequences" in first.statement
    assert "out of order" in first.statement
    marked = [e for e in found.errors if e.consequence_of]
    assert marked and all(e.pid == 3063025 for e in marked)
    assert all(e.consequence_of == f"{first.evidence[0].file}:{first.evidence[0].line}" for e in marked)
    assert all(e.explanation.startswith("A consequence of the first failure") for e in marked)
    assert not [e for e in found.errors if e.pid == 3063028 and e.consequence_of]


def test_a_minus_3_chain_without_a_warn_can_be_the_first_failure():
    """An excerpt of the same thread: process 3063025's '-> 3' chain (its WARN lines and '-> 6' left out of
    the paste) before process 3063028's out-of-memory failure."""
    lines = (REAL / "oom-calloc-narval-cascade.log").read_text().splitlines(keepends=True)
    excerpt = "".join(line for line in lines
                      if ":3063028:" in line or ("NCCL WARN" not in line and "-> 6" not in line))
    first = _kinds(analyze_text(excerpt, "excerpt.log"))["first_failure"][0]
    assert first.pid == 3063025 and re.search(r"-> 3\b", first.evidence[0].text)


IBEXT_SKIPPED = """\
gpu01:351578:351578 [0] NCCL INFO P2P plugin IBext
gpu01:351578:351578 [0] NCCL INFO NCCL_IBEXT_DISABLE set by environment to 1.
gpu01:351578:351578 [0] NCCL INFO net.cc:55 -> 3
"""  # NVIDIA/nccl#676: the plugin loader skips IBext and goes on


def test_the_plugin_loaders_minus_3_is_no_failure():
    state = LogState()
    Scanner(state, "676.log").run(io.BytesIO(IBEXT_SKIPPED.encode()))
    assert infer._candidates((), state) == []


def test_one_process_failing_gets_no_order_statement():
    found = _analyze(REAL / "shm-posix-fallocate-horovod-ring.log")
    assert "first_failure" not in _kinds(found)


def test_order_across_files_needs_timestamps():
    """fixtures/logs/real/cuda-ipc-invalid-argument-no-nccl-word.log split per process into two files: each
    holds a failure and no line carries a time, so which failed first is unknown."""
    lines = (REAL / "cuda-ipc-invalid-argument-no-nccl-word.log").read_text().splitlines(keepends=True)
    a = "".join(line for line in lines if ":95772:" in line)
    b = "".join(line for line in lines if ":95772:" not in line)
    found = _inputs(**{"rank0.log": a, "rank1.log": b})
    first = _kinds(found)["first_failure"][0]
    assert "unknown" in first.statement and "TIMESTAMP" in first.unknown
    assert "rank0.log:" in first.statement and "rank1.log:" in first.statement


def test_reactions_in_another_file_are_not_labelled_without_timestamps():
    """The narval log split per process: the file with the closed connection holds no cause; the cause is
    the other file's, and nothing across files is called a consequence without times to prove the order."""
    lines = (REAL / "oom-calloc-narval-cascade.log").read_text().splitlines(keepends=True)
    a = "".join(line for line in lines if ":3063025:" in line)
    b = "".join(line for line in lines if ":3063025:" not in line)
    found = _inputs(**{"rank0.log": a, "rank3.log": b})
    assert _kinds(found)["first_failure"][0].pid == 3063028
    assert not [e for e in found.errors if e.consequence_of]


def test_order_across_files_from_comparable_timestamps():
    """pytorch/torchtune CI (fixtures/logs/real/gha-operation-not-supported-torchtune.log): GitHub Actions
    stamps every line; split per process, the stamps order the two files."""
    lines = (REAL / "gha-operation-not-supported-torchtune.log").read_text().splitlines(keepends=True)
    a = "".join(line for line in lines if ":95210:" in line)
    b = "".join(line for line in lines if ":95210:" not in line)
    first = _kinds(_inputs(**{"a.log": a, "b.log": b}))["first_failure"][0]
    assert first.pid == 95209 and first.unknown is None


def test_timestamp_kinds():
    assert infer._stamp("[2025-04-04 16:57:39] node-a:1:2 [0] init.cc:416 NCCL WARN x")[0] == "nccl"
    assert infer._stamp("2024-05-01T10:00:00.4Z worker-0:77:140 [0] NCCL INFO x") == \
        ("iso", "2024-05-01 10:00:00.400000000")
    assert infer._stamp("node-a:1:2 [0] NCCL WARN x") is None


# --- where a hang stopped ------------------------------------------------------------------------------

def test_watchdog_same_collective_is_no_desync():
    found = _analyze(REAL / "watchdog-same-seq-llamafactory.log")  # hiyouga/LlamaFactory#6269
    hang = _kinds(found)["hang"][0]
    assert "rank 0 in collective 7753" in hang.statement and "rank 2 in collective 7753" in hang.statement
    assert "not a desync" in hang.statement
    assert [(p.ranks, p.op_count, p.phase) for p in found.phases] == [((0,), 7753, "collectives"),
                                                                       ((2,), 7753, "collectives")]
    assert all(p.evidence for p in found.phases)


def test_watchdog_first_collective_points_to_connection_setup():
    hang = _kinds(_analyze(REAL / "watchdog-first-collective-never-completed.log"))["hang"][0]
    assert "first collective never completed" in hang.statement and "connection set-up" in hang.statement


# pytorch/pytorch#118369: ranks 0 and 7 time out at different sequence numbers, and the old watchdog lines
# do not name the process group, so a desync is possible but not proven
ISSUE_118369 = """\
[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds before timing out.
"""  # noqa: E501


def test_different_sequence_numbers_without_process_groups_are_hedged():
    hang = _kinds(analyze_text(ISSUE_118369, "118369.log"))["hang"][0]
    assert "rank 0 at 96120" in hang.statement and "rank 7 at 64088" in hang.statement
    assert "do not all name theirs" in hang.statement and "Desync:" not in hang.statement


def test_different_sequence_numbers_in_one_named_process_group_are_a_desync():
    """The decision on what the watchdog lines give per rank (sequence number, last completed, group), with
    the numbers of modelscope/DiffSynth-Studio#458 (group 2) and a second rank at another number."""
    seqs = {"4": ("610", "609", "2"), "6": ("598", "597", "2")}
    assert infer._points_to(None, (), None, set(), seqs).startswith("Desync: ranks of one process group")
    seqs["6"] = ("598", "597", "3")
    assert "not comparable" in infer._points_to(None, (), None, set(), seqs)


# NVIDIA/nccl#676 (NCCL_DEBUG_SUBSYS=COLL): two processes finish init and call AllReduce; the lead's scanner
# fills LogState.colls from such lines, written here by hand from them
ISSUE_676 = """\
gpu02:20868:20914 [0] NCCL INFO comm 0x7fea94008fb0 rank 1 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
gpu01:124172:124452 [0] NCCL INFO comm 0x7fe748008fb0 rank 0 nranks 2 cudaDev 0 busId 7000 - Init COMPLETE
gpu01:124172:124172 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7fe797000000 recvbuff 0x7fe797000000 count 1 datatype 1 op 0 root 0 comm 0x7fe748008fb0 [nranks=2] stream 0x5579fb9b3280
gpu02:20868:20868 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7feacdc00000 recvbuff 0x7feacdc00000 count 1 datatype 1 op 0 root 0 comm 0x7fea94008fb0 [nranks=2] stream 0x556636ffb5b0
gpu01:124172:124172 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7fe797000000 recvbuff 0x7fe797000000 count 1 datatype 1 op 0 root 0 comm 0x7fe748008fb0 [nranks=2] stream 0x5579fb9b3280
"""  # noqa: E501


def _state(text: str, name: str) -> tuple[LogState, tuple]:
    state = LogState()
    stats = (Scanner(state, name, LITERALS).run(io.BytesIO(text.encode())),)
    return state, stats


def _coll(text: str, lineno: int) -> Evidence:
    return Evidence("676.log", lineno, text.splitlines()[lineno - 1])


def test_processes_at_different_collective_counts_are_a_desync():
    state, stats = _state(ISSUE_676, "676.log")
    state.colls[("gpu01", 124172)] = [2, _coll(ISSUE_676, 3), 1]
    state.colls[("gpu02", 20868)] = [1, _coll(ISSUE_676, 4), 0]
    found = build(state, stats)
    hang = _kinds(found)["hang"][0]
    assert "Desync" in hang.statement and "0x0 vs 0x1" in hang.statement
    assert (hang.host, hang.pid) == ("gpu02", 20868)  # the one furthest behind
    assert {(p.host, p.op_count) for p in found.phases} == {("gpu01", 1), ("gpu02", 0)}


def test_equal_collective_counts_and_no_error_are_no_hang():
    state, stats = _state(ISSUE_676, "676.log")
    state.colls[("gpu01", 124172)] = [2, _coll(ISSUE_676, 3), 1]
    state.colls[("gpu02", 20868)] = [2, _coll(ISSUE_676, 4), 1]
    found = build(state, stats)
    assert "hang" not in _kinds(found) and found.phases == ()


def test_a_process_that_never_reached_collectives_while_others_did():
    state, stats = _state(ISSUE_676, "676.log")
    assert state.colls[("gpu01", 124172)][::2] == [2, 1]  # the scanner folds the COLL lines it holds
    state.colls.pop(("gpu02", 20868))  # as if gpu02 had never logged its first collective
    hang = _kinds(build(state, stats))["hang"][0]
    assert (hang.host, hang.pid) == ("gpu02", 20868) and "Points to the application" in hang.statement


def test_the_real_676_log_reached_different_collective_counts():
    state, stats = _state(ISSUE_676, "676.log")
    assert state.colls[("gpu02", 20868)][::2] == [1, 0]
    hang = _kinds(build(state, stats))["hang"][0]
    assert "different collective counts" in hang.statement and "0x0 vs 0x1" in hang.statement


def test_logs_with_failures_get_no_hang_reading():
    assert "hang" not in _kinds(_analyze(REAL / "oom-calloc-narval-cascade.log"))


# --- NCCL releases by message wording ------------------------------------------------------------------

def _printed_versions(truth: dict, text: str) -> set[str]:
    return {m[:m.rfind(".")] for m in re.findall(r"NCCL version (\d+\.\d+\.\d+)", text)} | (
        {truth["nccl_version"].rsplit(".", 1)[0]} if truth.get("nccl_version") else set())


@pytest.mark.parametrize("log", sorted(REAL.glob("*.log")), ids=lambda p: p.stem)
def test_every_wording_fits_the_release_each_real_log_prints(log):
    """The table against the corpus: a wording never claims a range that excludes the release the same
    host prints (NCCL's own version line, or the version the thread established)."""
    truth = json.loads(log.with_name(log.stem + ".truth.json").read_text())
    found = _analyze(log)
    versions = _printed_versions(truth, log.read_text(errors="replace"))
    for host in found.host_versions:
        mine = {v.rsplit(".", 1)[0] for v in host.printed} or versions
        for version in mine:
            for wid in host.wordings:
                assert wordings.fits(wordings.BY_ID[wid], wordings.parse(version)), (host.host, version, wid)


def test_every_wording_record_cites_its_reference_section():
    assert len({w.id for w in wordings.WORDINGS}) == len(wordings.WORDINGS)
    for item in wordings.WORDINGS:
        assert re.search(r"REFERENCE\.md §1\.\d+", item.source), item.id
        assert item.first or item.last
        assert not (item.first and item.last) or item.first <= item.last


def test_hosts_whose_wordings_belong_to_different_releases_are_a_mismatch_without_both_versions():
    """Two real logs as two hosts: qh-gpu19/20 of an HPC-X cluster (NCCL 2.18.3 wordings, fixtures/logs/
    ibext-sharp-hpcx.log) and the RTX 5090 box (2.24-2.25 wordings) with its version line left out."""
    old = (ROOT / "fixtures" / "logs" / "ibext-sharp-hpcx.log").read_text()
    new = "".join(line for line in (REAL / "rtx5090-maxsharedmem-ib-2-25.log").read_text().splitlines(True)
                  if "NCCL version" not in line)
    found = _inputs(**{"hpcx.log": old, "rtx.log": new})
    assert found.summary.nccl_versions == ("2.18.3",)
    mismatch = [e for e in found.errors if e.category == "version_mismatch"]
    assert len(mismatch) == 1 and "node-a NCCL 2.24-2.25" in mismatch[0].explanation
    assert "bootstrap-unspaced" in mismatch[0].explanation
    ranges = {h.host: (h.first, h.last) for h in found.host_versions}
    assert ranges["node-a"] == ("2.24", "2.25") and ranges["qh-gpu19"] == ("2.18", "2.20")


def test_a_printed_version_two_wordings_contradict_is_noted():
    """The RTX 5090 box's NCCL lines (2.24-2.25 wordings, its own version line left out) under PyTorch's
    'NCCL version 2.21.5' (fixtures/logs/pytorch-last-error-reset-by-peer.log's DistBackendError line)."""
    lines = (REAL / "rtx5090-maxsharedmem-ib-2-25.log").read_text().splitlines(True)
    wrapper = next(line for line in (ROOT / "fixtures" / "logs" / "pytorch-last-error-reset-by-peer.log")
                   .read_text().splitlines(True) if "NCCL version 2.21.5" in line)
    text = "".join(line for line in lines if "NCCL version" not in line) + wrapper
    notes = _kinds(analyze_text(text, "mixed.log"))["version_range"]
    assert len(notes) == 1 and "prints NCCL 2.21.5" in notes[0].statement and notes[0].unknown


def test_a_net_plugins_own_wording_says_nothing_about_ncclls_release():
    """fixtures/logs/ibext-roce-completion-12-then-5.log: the HPC-X plugin's ib_plugin.c prints 'with
    status=' under NCCL 2.21.5."""
    found = _analyze(ROOT / "fixtures" / "logs" / "ibext-roce-completion-12-then-5.log")
    assert all("cqe-status-number" not in h.wordings for h in found.host_versions)


# --- report and diagnose -------------------------------------------------------------------------------

def test_logs_report_and_json_show_the_inferences():
    out = run_cli("logs", str(REAL / "oom-calloc-narval-cascade.log"))
    assert out.returncode == 0 and "Inferences" in out.stdout and "[first failure]" in out.stdout
    assert "(consequence of " in out.stdout
    data = json.loads(run_cli("logs", "--json", str(REAL / "watchdog-same-seq-llamafactory.log")).stdout)
    assert data["inferences"][0]["kind"] == "hang" and data["phases"][0]["op_count"] == 7753


def _rules(stdout: str) -> set[str]:
    return {f["rule"] for f in json.loads(stdout)["findings"]}


def test_diagnose_reports_each_inference_as_a_finding():
    proc = run_cli_process("diagnose", "--json", "--fail-on", "critical",
                           "--log", str(REAL / "oom-calloc-narval-cascade.log"))
    assert proc.returncode == 0, proc.stderr
    assert "nccl-first-failure" in _rules(proc.stdout)
    loop = run_cli("diagnose", "--json", "--fail-on", "critical", "--log",
                   str(RULES / "nccl-nic-loopback" / "fire.log"))
    assert "nccl-nic-loopback" in _rules(loop.stdout)
    hang = run_cli("diagnose", "--json", "--fail-on", "critical", "--log",
                   str(REAL / "watchdog-same-seq-llamafactory.log"))
    assert "nccl-hang-phase" in _rules(hang.stdout)
