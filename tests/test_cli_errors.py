"""An internal error is one line and exit 2 (never 1, the findings code); the traceback only on request."""

import os
import subprocess
import sys

# A real ``topodoc`` process whose ``rules`` command hits a bug: the command's callback raises, as a code
# path that meets an unforeseen value would. Everything else (the group, click, exit) is the real CLI.
CRASHING = """
import sys
import topodoc.commands.rules as rules
from topodoc.cli import main

def bug(*args, **kwargs):
    raise KeyError("a value\\nno test foresaw")

rules.command.callback = bug
sys.argv = ["topodoc", "rules"]
main()
"""


def _crash(**env):
    return subprocess.run([sys.executable, "-c", CRASHING], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_internal_error_is_one_line_and_exit_2():
    run = _crash(TOPODOC_DEBUG="")
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith("topodoc: internal error: KeyError: 'a value\\nno test foresaw'")
    assert "please report it" in run.stderr and "TOPODOC_DEBUG=1" in run.stderr


def test_topodoc_debug_shows_the_traceback():
    run = _crash(TOPODOC_DEBUG="1")
    assert run.returncode == 2
    assert "Traceback (most recent call last)" in run.stderr and "in bug" in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("topodoc: internal error: KeyError")


def test_input_and_usage_errors_are_one_line_and_exit_2():
    for args in (["topo", "/nonexistent/topo.txt"], ["nccltests", "/nonexistent/run.txt"],
                 ["diagnose", "--from", "example:dgx-a100", "--nccl-tests", "/nonexistent/run.txt"]):
        run = subprocess.run([sys.executable, "-m", "topodoc", *args], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1 and "No such file or directory" in run.stderr
    usage = subprocess.run([sys.executable, "-m", "topodoc", "topo", "--no-such-option"], capture_output=True,
                           text=True, timeout=120)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
