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


# --- NFS (fixtures/kernel_log/nfs-not-responding.log: nfs-ganesha#1295, scored blind before: silent) --------

NFS = ROOT / "fixtures" / "kernel_log" / "nfs-not-responding.log"
STALL = "[{t}.000000] nfs: server {server} not responding, still trying"
OK = "[{t}.000000] nfs: server {server} OK"


def _nfs_hits(text: str) -> list:
    from topodoc.rules import registry
    from topodoc.rules.engine import Facts, evaluate

    events = tuple(("dmesg.txt", e) for e in parse(text))
    return list(evaluate(Facts(kernel=events), [registry.get("kernel-nfs-stall")]).findings)


def test_a_stalled_nfs_server_without_ok_after_may_still_not_answer():
    events = parse(NFS.read_text())
    assert [(e.line, e.code, e.severity) for e in events] == [
        (1, "ok", "info"), (2, "ok", "info"), (5, "not_responding", "warning"),
        (6, "not_responding", "warning"), (7, "not_responding", "warning")]
    (hit,) = _nfs_hits(NFS.read_text())
    assert hit.subject == "nfs 10.20.30.40" and "(3 line(s))" in hit.message
    assert "follows its last line (dmesg.txt:7)" in hit.message and "checkpoint" in hit.fix


def test_servers_are_apart_and_an_ok_after_the_stall_says_it_answered_again():
    from topodoc.parsers import kernel_log

    lines = [STALL.format(t=100 + i, server="10.0.0.5") for i in range(3 * kernel_log.PER_GROUP)]
    lines += [STALL.format(t=200, server="10.0.0.6"), OK.format(t=300, server="10.0.0.5")]
    lines += [OK.format(t=400 + i, server="10.0.0.6") for i in range(2)]
    lines += [STALL.format(t=500, server="10.0.0.6")]
    hits = {h.subject: h for h in _nfs_hits("\n".join(lines))}
    first, second = hits["nfs 10.0.0.5"], hits["nfs 10.0.0.6"]
    many = 3 * kernel_log.PER_GROUP
    assert f"({many} line(s)); it answered again (dmesg.txt:{many + 2})" in first.message
    assert "(2 line(s)); no 'nfs: server 10.0.0.6 OK' follows" in second.message


def test_a_soft_mount_that_gave_up_is_an_error():
    (hit,) = _nfs_hits("[ 9.0] nfs: server storage-1 not responding, timed out")
    assert hit.severity.value == "error" and "the I/O failed" in hit.message
