"""Running ``python -m topodoc`` on hostile input under a memory ceiling, and rewriting recordings.

:func:`run_bounded` starts the command in a subprocess with ``RLIMIT_AS`` set (so a bomb fails fast
instead of taking the machine) and returns its exit code, output, peak RSS (``wait4``'s ``ru_maxrss``)
and wall time. :func:`rewrite_recording` copies a recording with some members' bytes edited.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "fixtures" / "hosts"


@dataclass
class Bounded:
    returncode: int
    stdout: str
    stderr: str
    peak_mb: float
    wall_s: float
    timed_out: bool


_LAUNCHER = """
import os, resource, sys
limit, report, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(sys.executable, [sys.executable, "-m", "topodoc", *args])
_pid, status, usage = os.wait4(pid, 0)
with open(report, "w") as handle:
    handle.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_bounded(*args: str, limit_mb: int = 512, timeout: float = 10.0, stdin: bytes | None = None,
                env: dict | None = None) -> Bounded:
    """``python -m topodoc ARGS`` with address space capped at ``limit_mb`` and killed after ``timeout``.

    The peak RSS is the command's own: a small launcher forks and execs it and reports its ``wait4``
    ``ru_maxrss``. (A child forked, or vforked, straight from a big test process carries that process's
    peak into its own ``ru_maxrss`` across the exec; the launcher's child starts from the launcher's.)"""
    full_env = {**os.environ, "TOPODOC_JOBS": "1", "NO_COLOR": "1", **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp, \
            tempfile.TemporaryDirectory() as scratch:
        inp.write(stdin or b"")
        inp.seek(0)
        report = os.path.join(scratch, "maxrss")
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(limit_mb << 20), report, *args],
                                stdin=inp, stdout=out, stderr=err, env=full_env, start_new_session=True)
        killer = threading.Timer(timeout, lambda: _kill_group(proc.pid))
        killer.start()
        try:
            proc.wait()
        finally:
            killer.cancel()
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        peak_kb = int(Path(report).read_text() or 0) if os.path.exists(report) else 0
        return Bounded(proc.returncode, out.read().decode("utf-8", "replace"),
                       err.read().decode("utf-8", "replace"), peak_kb / 1024, wall, wall >= timeout)


def _kill_group(pid: int) -> None:
    import contextlib
    import signal

    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def rewrite_recording(source: Path, target: Path, edits: dict) -> Path:
    """Copy the recording ``source`` to ``target`` with each member named in ``edits`` replaced by
    ``edits[name](old_bytes)``."""
    with tarfile.open(source, "r:gz") as old, tarfile.open(target, "w:gz", format=tarfile.PAX_FORMAT) as new:
        for info in old.getmembers():
            data = old.extractfile(info).read() if info.isfile() else None
            if info.name in edits:
                data = edits[info.name](data)
                info.size = len(data)
            new.addfile(info, io.BytesIO(data) if data is not None else None)
    return target
