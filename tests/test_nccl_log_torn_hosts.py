"""Node counts from torn lines (issue 26): a host name that is the end of another one in the same log
(``ode-a`` beside ``node-a``: a line whose start was cut off) is counted as that machine, and the summary
gives the count as a range with the reason, never a false exact number or lower bound."""

from __future__ import annotations

from pathlib import Path

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"


def _analyze(path: Path):
    return analyze([str(path)], catalogue.scan_literals())


def test_a_torn_host_name_is_no_second_node(tmp_path):
    # two hosts of NVIDIA/nccl-tests#29 (node-a, node-b); one of node-b's lines lost its first character
    lines = (REAL / "ib-empty-socket-addresses-virbr0-2-4.log").read_text().splitlines()
    whole = _analyze(REAL / "ib-empty-socket-addresses-virbr0-2-4.log").summary
    torn_at = next(i for i, line in enumerate(lines) if line.startswith("node-b:"))
    lines[torn_at] = lines[torn_at][1:]  # "ode-b:15223:..."
    log = tmp_path / "torn.log"
    log.write_text("\n".join(lines) + "\n")
    summary = _analyze(log).summary
    assert "ode-b" in summary.hosts  # the log printed it; it is not hidden
    assert (summary.nnodes, summary.nnodes_min) == (whole.nnodes, whole.nnodes_min) == (None, 2)
    (note,) = [n for n in summary.notes if "cut off" in n]
    assert f"'ode-b' ({log}:{torn_at + 1}) is the end of 'node-b'" in note and "2 to 3" in note


def test_names_that_only_share_an_ending_stay_two_hosts(tmp_path):
    log = tmp_path / "two.log"
    log.write_text("gpu-a1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                   "gpu-b1:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n")
    summary = _analyze(log).summary
    assert summary.nnodes_min == 2 and not [n for n in summary.notes if "cut off" in n]
