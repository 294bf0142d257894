"""Error-free real logs pass `diagnose --fail-on error` (issue 26): a log of the real corpus whose truth
says nothing failed (`error_categories: []`) or does not show a failure (`null`) gets no finding at error
or above, so `topodoc diagnose --log F --fail-on error` exits 0 on it. Lines that are harmful only in some
jobs (an interface peers on other nodes cannot reach, GPUDirect RDMA on some connections only) are then
warnings or information, never errors without the proof."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topodoc.diagnosis import Request, run
from topodoc.rules.engine import Severity, at_or_above

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"


def _error_free() -> list[Path]:
    out = []
    for log in sorted(REAL.glob("*.log")):
        truth = json.loads(log.with_suffix(".truth.json").read_text())
        if not truth.get("error_categories"):  # [] or null
            out.append(log)
    return out


ERROR_FREE = _error_free()


def test_the_corpus_holds_error_free_logs():
    assert len(ERROR_FREE) >= 50  # 28 with [] and 22 with null when this gate was added


@pytest.mark.parametrize("log", ERROR_FREE, ids=lambda p: p.stem)
def test_error_free_log_has_no_error_finding(log):
    report = run(Request(logs=(str(log),), live_default=False)).report
    errors = [(f.rule, f.message[:120]) for f in at_or_above(report, Severity.ERROR)]
    assert not errors, errors


def test_the_cli_exits_0_on_an_error_free_multi_line_log_and_1_on_a_cross_node_lo():
    quiet = REAL / "veth-linklocal-socket-list.log"  # a veth in the socket list, node count unknown
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", "--log", str(quiet), "--fail-on",
                           "error"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "nccl-socket-interface" in done.stdout and "ip -br addr" in done.stdout
    crossing = REAL / "socket-lo-linklocal-2-3-horovod.log"  # lo on a job that spans two hosts
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", "--log", str(crossing), "--fail-on",
                           "error"], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "nccl-socket-interface" in done.stdout
