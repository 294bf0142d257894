"""Tasks the kernel saw stuck (fixtures/kernel_log/hung-task.log, real lines, sources in its README): the
hung-task detector's and the soft-lockup watchdog's lines are events with pid, process and seconds (the
``Tainted``, ``echo 0 >`` and call-trace lines are not); ``kernel-hung-task`` reports them and
``hung-rank-process`` names the rank of an NCCL log whose pid it was (fixtures/rules/hung-rank-process: a
join of two real excerpts, SOURCES.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from topodoc.parsers.kernel_log import parse

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "kernel_log" / "hung-task.log"
JOIN = ROOT / "fixtures" / "rules" / "hung-rank-process"


def diagnose(*paths: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", *map(str, paths), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_the_detector_lines_are_events_and_the_trace_is_not():
    events = parse(REAL.read_text())
    assert [(e.line, e.code) for e in events] == [(3, "blocked"), (14, "soft_lockup")]
    assert dict(events[0].detail) == {"pid": "5403", "process": "nvc:[driver]", "seconds": "120"}
    assert dict(events[1].detail) == {"pid": "25222", "process": "pytest", "seconds": "23"}
    assert {e.severity for e in events} == {"warning"}


def test_a_stuck_rank_is_named_and_another_pid_is_not():
    fire = diagnose(JOIN / "fire.dmesg", JOIN / "fire.log")["findings"]
    (joined,) = [f for f in fire if f["rule"] == "hung-rank-process"]
    assert joined["subject"] == "rank 1" and "rank 1's process on trn-02" in joined["message"]
    assert [f for f in fire if f["rule"] == "kernel-hung-task"]
    clean = diagnose(JOIN / "clean.dmesg", JOIN / "clean.log")["findings"]
    assert not [f for f in clean if f["rule"] == "hung-rank-process"]
    (alone,) = [f for f in clean if f["rule"] == "kernel-hung-task"]
    assert alone["severity"] == "warning" and "nvidia_uvm" in alone["fix"]
