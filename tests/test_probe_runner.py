"""The live runner's deadline holds against real subprocesses: a command that hangs, one that exits
while a descendant keeps its pipes open, one that prints without end. Bounds are generous (the
assertion is "bounded", not a speed): the old runner waited forever or buffered gigabytes."""

from __future__ import annotations

import resource
import sys
import time

from topodoc.probe.host import LiveRunner
from topodoc.probe.smi import collect_smi_topo

PY = sys.executable


def timed(argv, timeout, **kwargs):
    start = time.monotonic()
    result = LiveRunner(**kwargs).run(argv, timeout)
    return result, time.monotonic() - start


def test_background_sleeper_and_endless_output_are_cut():
    # `sh -c 'sleep 100 & yes'`: endless stdout, and a descendant that would hold the pipe after a kill
    result, took = timed(["sh", "-c", "sleep 100 & yes"], 5.0, max_output=1 << 20)
    assert took < 30
    assert result.truncated and not result.timed_out and result.returncode is None
    assert len(result.stdout) == 1 << 20 and result.stdout.startswith("y\ny\n")
    assert "output cut at 1048576 bytes" in result.stderr


def test_a_descendant_outside_the_group_holding_the_pipes_does_not_block_the_timeout():
    # the child leaves our process group (setsid) so killing the group cannot close its pipe ends
    script = "import os, time; os.setsid(); print('started', flush=True); time.sleep(60)"
    argv = ["sh", "-c", f"{PY} -c \"{script}\" & sleep 60"]
    result, took = timed(argv, 1.0)
    assert took < 20
    assert result.timed_out and result.returncode is None and "started" in result.stdout


def test_an_exited_command_whose_descendant_keeps_the_pipes_open_returns_its_exit_code():
    result, took = timed(["sh", "-c", "echo done; sleep 60 & exit 3"], 30.0)
    assert took < 20
    assert result.returncode == 3 and not result.timed_out and result.stdout == "done\n"


def test_endless_output_does_not_grow_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result, took = timed([PY, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], 20.0)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.truncated and len(result.stdout) == 4 << 20
    assert grown_mib < 200 and took < 30


def test_both_streams_are_read_so_a_chatty_stderr_cannot_deadlock():
    script = "import sys\nfor _ in range(64): sys.stderr.write('e' * 65536)\nprint('ok')"
    result, _ = timed([PY, "-c", script], 30.0)
    assert result.returncode == 0 and result.stdout == "ok\n" and len(result.stderr) == 64 * 65536


def test_endless_nvidia_smi_is_one_gap():
    class EndlessSmi(LiveRunner):
        def run(self, argv, timeout):
            return super().run(["yes", "GPU0"], timeout)

    gaps = []
    assert collect_smi_topo(EndlessSmi(max_output=1 << 16), gaps) is None
    assert len(gaps) == 1 and "without end" in gaps[0].detail


def test_a_command_after_the_overall_deadline_is_not_started_and_says_so():
    from topodoc.probe.host import Deadline

    gaps = []
    runner = LiveRunner(deadline=Deadline.after(0.001))
    time.sleep(0.01)
    assert collect_smi_topo(runner, gaps) is None
    assert gaps[0].detail == "[topodoc: not run: the overall deadline of 0.001 s had passed]"
