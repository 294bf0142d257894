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


def run_bounded(*args: str, limit_mb: int = 512, timeout: float = 10.0, stdin: bytes | None = None,
                env: dict | None = None) -> Bounded:
    """``python -m topodoc ARGS`` with address space capped at ``limit_mb`` and killed after ``timeout``;
    the peak RSS is this child's own (``os.wait4``), not the maximum over every child so far. The cap is set
    by a small launcher that then execs the command (no ``preexec_fn``): a child forked from a big test
    process would start with the parent's pages in its RSS, and its peak would be the parent's."""
    launcher = (f"import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({limit_mb << 20}, "
                f"{limit_mb << 20})); "
                "os.execv(sys.executable, [sys.executable, '-m', 'topodoc', *sys.argv[1:]])")

    full_env = {**os.environ, "TOPODOC_JOBS": "1", "NO_COLOR": "1", **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write(stdin or b"")
        inp.seek(0)
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", launcher, *args], stdin=inp, stdout=out, stderr=err,
                                env=full_env)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _pid, status, rusage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Bounded(proc.returncode, out.read().decode("utf-8", "replace"),
                       err.read().decode("utf-8", "replace"), rusage.ru_maxrss / 1024, wall,
                       wall >= timeout)


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
