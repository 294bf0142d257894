"""Benchmark the replay commands (``--from example:NAME`` / a recording path) against ``python -c pass``.

    python benchmarks/replay_bench.py [--example dgx-a100] [--repeat 5] [--commands probe,topo,...]

Each command runs as its own ``python -m topodoc CMD --from SOURCE`` process (stdout to a pipe, read
whole), side by side in the same run with a bare ``python -c pass`` and ``python -m topodoc --version``:

- *cold*: a fresh, empty cache folder (``XDG_CACHE_HOME``) for every run, so the recording is checked,
  extracted and collected from nothing;
- *warm*: one cache folder, filled by a first run that is not counted.

Each command first runs once uncounted with its own cache folder, so that both kinds find the bytecode
compiled (under a temporary ``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` is dropped for the
children).

Prints the median wall and CPU seconds (CPU from each child's own rusage via ``os.wait4``, so other
load on the machine matters less) and the ratio to ``python -c pass``. Source ``--path`` replays a copy
of the example's archive by path instead of ``example:``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("probe", "topo", "diagnose", "bandwidth")


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process; it must exit 0 or 1 (1: findings)."""
    start = time.perf_counter()
    where = env["PYTHONPATH"].split(os.pathsep)[0]  # the source tree under test
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=where)
    out, err = proc.stdout.read(), proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.decode()[-500:]}")
    del out
    return wall, usage.ru_utime + usage.ru_stime


def measure(argv: list[str], repeat: int, env: dict[str, str], cold: bool, work: Path) -> tuple[float, float]:
    walls, cpus = [], []
    run_once(argv, {**env, "XDG_CACHE_HOME": str(work / "bytecode-run")})  # compiles bytecode; not counted
    cache = work / "warm-cache"
    if not cold:
        shutil.rmtree(cache, ignore_errors=True)
        run_once(argv, {**env, "XDG_CACHE_HOME": str(cache)})  # fills the cache; not counted
    for n in range(repeat):
        if cold:
            cache = work / f"cold-{n}"
            shutil.rmtree(cache, ignore_errors=True)
        wall, cpu = run_once(argv, {**env, "XDG_CACHE_HOME": str(cache)})
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="dgx-a100")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--path", action="store_true", help="replay a copy of the archive by path")
    parser.add_argument("--src", type=Path, default=ROOT,
                        help="the topodoc source tree to run (another checkout, for before/after)")
    args = parser.parse_args()
    src = args.src.resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("TOPODOC_DEBUG",)}
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        work = Path(tmp)
        # bytecode under a folder of this run, written even where the shell sets PYTHONDONTWRITEBYTECODE
        # (else every run compiles every topodoc module it loads from source: tens of ms of CPU per run)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        source = f"example:{args.example}"
        if args.path:
            copy = work / f"{args.example}.tar.gz"
            shutil.copyfile(src / "fixtures" / "hosts" / args.example / "recording.tar.gz", copy)
            source = str(copy)
        base_wall, base_cpu = measure([py, "-c", "pass"], args.repeat, env, True, work)
        rows = [("python -c pass", "", base_wall, base_cpu)]
        rows.append(("topodoc --version", "", *measure([py, "-m", "topodoc", "--version"], args.repeat, env,
                                                         True, work)))
        for name in args.commands.split(","):
            argv = [py, "-m", "topodoc", name, "--from", source]
            for cold in (True, False):
                rows.append((f"{name} --from {source}", "cold" if cold else "warm",
                             *measure(argv, args.repeat, env, cold, work)))
    print(f"source {src}; median of {args.repeat} runs each; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<44} {'cache':<5} {'wall s':>7} {'cpu s':>7} {'x pass wall':>12} {'x pass cpu':>11}")
    for label, cache, wall, cpu in rows:
        print(f"{label[:44]:<44} {cache:<5} {wall:7.3f} {cpu:7.3f} {wall / base_wall:12.1f} "
              f"{cpu / max(base_cpu, 1e-3):11.1f}")


if __name__ == "__main__":
    main()
