"""The kernel's OOM killer in a kernel log (fixtures/kernel_log/oom-killer.log, real lines, sources in its
README): every form of the ``Killed process`` line is an event with its pid, process, memory and scope;
``kernel-oom-kill`` says what was killed and which fix applies; ``oom-killed-rank`` names the rank of an NCCL
log whose pid was killed (fixtures/rules/oom-killed-rank: a join of two real excerpts, SOURCES.md). A kernel
log that holds no event is read and named, and the kernel rules run on it instead of being skipped for want
of a kernel log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from topodoc.parsers.kernel_log import parse, parse_line
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "kernel_log" / "oom-killer.log"
JOIN = ROOT / "fixtures" / "rules" / "oom-killed-rank"


def diagnose(*paths: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", *map(str, paths), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def findings(text: str) -> list:
    events = tuple(("dmesg.txt", e) for e in parse(text))
    return list(evaluate(Facts(kernel=events), [registry.get("kernel-oom-kill")]).findings)


def test_every_real_form_of_the_kill_line_is_an_event_and_nothing_else_is():
    lines = REAL.read_text().splitlines()
    events = parse(REAL.read_text())
    killed = [e for e in events if e.code == "killed"]
    assert [dict(e.detail)["pid"] for e in killed] == ["1440763", "63214", "7899", "28438"]
    assert [dict(e.detail).get("scope") for e in killed] == ["node", "cgroup", "node", None]
    assert dict(killed[2].detail)["anon_rss_kb"] == "15370088"  # "153,700,88kB": digits grouped by commas
    assert {e.severity for e in killed} == {"error"}
    context = [e for e in events if e.code == "constraint"]
    assert [dict(e.detail).get("memcg") for e in context] == [
        "/user.slice/user-21417.slice/user@21417.service", "/init.scope", None]
    # the older "Kill process ... or sacrifice child" line: the process chosen, and the scope
    assert dict(context[2].detail) == {"pid": "24572", "task": "java", "scope": "cgroup"}
    read = {e.line for e in events}
    for number, line in enumerate(lines, 1):  # invoked oom-killer, the stack, oom_reaper: no event
        if "invoked oom-killer" in line or "oom_reaper" in line or "oom_kill_process" in line:
            assert number not in read


def test_the_finding_names_the_first_kill_its_cgroup_and_counts_the_others():
    data = diagnose(REAL)
    (finding,) = [f for f in data["findings"] if f["rule"] == "kernel-oom-kill"]
    assert finding["severity"] == "error" and finding["subject"] == "pid 1440763"
    assert "killed pid 1440763 (perl), which held 57.6 GiB" in finding["message"]
    assert "its cgroup: /user.slice/user-21417.slice/user@21417.service" in finding["message"]
    assert "4 processes killed in all, the second pid 63214 (uwsgi)" in finding["message"]
    # kills of a cgroup's limit and of the node's memory in one log: both fixes
    assert "--mem" in finding["fix"] and "ps aux" in finding["fix"]
    assert "follow from this kill" in finding["fix"]


def test_a_cgroup_kill_asks_for_the_limit_and_a_node_kill_for_the_memory_per_rank():
    lines = REAL.read_text().splitlines()
    (cgroup,) = findings(lines[5])
    assert "its memory cgroup reached its limit" in cgroup.message
    assert cgroup.fix.startswith("raise the memory limit of the job's cgroup")
    (node,) = findings("\n".join(lines[:5]))
    assert node.fix.startswith("lower the host memory each rank uses") and "--mem " not in node.fix
    (unsaid,) = findings(lines[10])  # the older form says neither
    assert "does not say which ran out" in unsaid.fix


def test_a_killed_rank_is_named_and_a_kill_of_another_pid_is_not():
    fire = diagnose(JOIN / "fire.dmesg", JOIN / "fire.log")["findings"]
    (joined,) = [f for f in fire if f["rule"] == "oom-killed-rank"]
    assert joined["subject"] == "rank 1" and "rank 1's process on trn-02" in joined["message"]
    assert [e["where"].rsplit(":", 1)[-1] for e in joined["evidence"]] == ["1", "11"]
    clean = diagnose(JOIN / "clean.dmesg", JOIN / "clean.log")["findings"]
    assert not [f for f in clean if f["rule"] == "oom-killed-rank"]
    assert [f for f in clean if f["rule"] == "kernel-oom-kill"]


def test_a_kernel_log_without_events_is_read_and_its_rules_run(tmp_path):
    calm = tmp_path / "dmesg.txt"
    calm.write_text("[    1.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
                    "[    2.000000] mlx5_core 0000:41:00.0: firmware version: 28.39.1002\n")
    data = diagnose(calm)
    assert data["findings"] == []
    assert str(calm) in (data["inputs"].get("kernel-log") or "")
    skipped = {s["rule"]: s["reason"] for s in data["skipped"]}
    for rule in ("kernel-oom-kill", "kernel-hca-events", "kernel-xid"):
        assert rule not in skipped, skipped.get(rule)


def test_the_agent_reads_a_kill_line_as_an_error_event():
    event = parse_line(REAL.read_text().splitlines()[3])
    assert event is not None and (event.kind, event.code, event.severity) == ("oom", "killed", "error")


def test_odd_kill_lines_do_not_break_the_reader():
    for line in ["Killed process", "Killed process 12 (", "Killed process 1 (" + "x" * 5000,
                 "Out of memory: Killed process 99999999999 (a) anon-rss:" + "9," * 40 + "kB",
                 "oom-kill:constraint=" + "A" * 3000 + ",task=" + "," * 2000]:
        parse(line)


# scored blind once before the cut-line and "Kill process" forms were read (2 of 3 right, this one silent):
# https://github.com/bluek8s/kubedirector/issues/356, the kill line cut in the thread after "("
KUBEDIRECTOR = ("[5193605.506956] Memory cgroup out of memory: Kill process 62685 (bash) score 0 or "
                "sacrifice child\n[5193605.508964] Killed process 62769 (")
# https://github.com/kubernetes-sigs/aws-efs-csi-driver/issues/1218 (one of its lines)
EFS = ("[18026.221140] Memory cgroup out of memory: Killed process 140339 (python3) total-vm:120832kB, "
       "anon-rss:15596kB, file-rss:8924kB, shmem-rss:0kB, UID:0 pgtables:276kB oom_score_adj:-997")


def test_a_kill_line_cut_after_its_pid_is_a_kill_and_the_line_before_gives_its_scope():
    (hit,) = findings(KUBEDIRECTOR)
    assert hit.subject == "pid 62769" and "(?)" in hit.message
    assert "its memory cgroup reached its limit (the line before it)" in hit.message
    assert hit.fix.startswith("raise the memory limit of the job's cgroup")


def test_a_small_cgroup_kill_is_said_in_mib():
    (hit,) = findings(EFS)
    assert "which held 15 MiB of anonymous memory (its memory cgroup reached its limit)" in hit.message


# https://github.com/bluek8s/kubedirector/issues/356: the thread wraps the first line (joined here, the pod
# ids cut) and cuts the kill line after "("
TASK_IN = ("[5193605.506728] Task in /kubepods/pod951f6bc5/024952d6 killed as a result of limit of "
           "/kubepods/pod951f6bc5/024952d6\n"
           "[5193605.506956] Memory cgroup out of memory: Kill process 62685 (bash) score 0 or sacrifice "
           "child\n[5193605.508964] Killed process 62769 (")


def test_the_older_cgroup_lines_before_a_kill_give_its_cgroup_and_scope():
    (hit,) = findings(TASK_IN)
    assert "killed pid 62769 (?)" in hit.message
    assert "its cgroup: /kubepods/pod951f6bc5/024952d6" in hit.message
    assert hit.fix.startswith("raise the memory limit of the job's cgroup")


def test_a_small_kill_is_said_in_kb():
    (hit,) = findings("[ 9.0] Memory cgroup out of memory: Killed process 7 (sh) total-vm:900kB, "
                      "anon-rss:160kB")
    assert "which held 160 kB of anonymous memory" in hit.message


def test_the_uid_form_of_the_kill_line_names_the_process():
    # the form cadvisor's oomparser (and gpud's copy of it) documents: "Killed process 123, UID 48, (httpd)."
    (event,) = parse("Out of memory: Killed process 123, UID 48, (httpd).")
    assert dict(event.detail) == {"pid": "123", "process": "httpd", "scope": "node"}
