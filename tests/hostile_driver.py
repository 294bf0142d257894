"""Run many ``topodoc`` command lines, each in its own forked child of this one warmed-up process
(``python tests/hostile_driver.py CASES.json [LIMIT_S]``): the property test starts it under
``RLIMIT_AS`` and reads one JSON line per case from stdout: argv, exit code, wall seconds, the child's
peak RSS (``wait4``, MB), whether it ran past the limit (then it is killed), and whether its output held
a traceback or an internal error. Forking keeps each case's memory its own at a few ms per case."""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _child(argv: list[str], write_fd: int) -> None:
    from click.testing import CliRunner

    from topodoc.cli import main as cli

    result = CliRunner().invoke(cli, argv, catch_exceptions=True, prog_name="topodoc")
    text = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += f"\nTraceback: {type(result.exception).__name__}: {result.exception}"
    bad = "Traceback" in text or "internal error" in text
    os.write(write_fd, json.dumps({"code": result.exit_code, "bad": bad,
                                   "tail": text[-300:] if bad else ""}).encode())


def run_case(argv: list[str], limit_s: float) -> dict:
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: run, report, leave without running the parent's cleanup
        os.close(read_fd)
        try:
            _child(argv, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    late = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > limit_s and not late:
            late = True
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    with os.fdopen(read_fd, "rb") as pipe:
        raw = pipe.read()
    report = json.loads(raw) if raw else {"code": None, "bad": True,
                                         "tail": f"child died: status {status}"}
    return {"argv": argv, **report, "wall": round(time.monotonic() - start, 3),
            "peak_mb": round(usage.ru_maxrss / 1024, 1), "late": late}


def main(path: str, limit_s: float) -> None:
    import click.testing  # noqa: F401  (warm the imports once, in the parent)

    import topodoc.cli  # noqa: F401

    with open(path) as handle:
        cases = json.load(handle)
    for argv in cases:
        sys.stdout.write(json.dumps(run_case(argv, limit_s)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10.0)
