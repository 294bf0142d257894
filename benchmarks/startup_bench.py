"""The fixed cost of a topodoc command (issue 13): small inputs, side by side with ``python -c pass``.

    python benchmarks/startup_bench.py [--repeat 7] [--src OTHER_CHECKOUT]

Each line is its own process (``python -c 'import click'`` is the floor under every command: the CLI's
library alone), run ``--repeat`` times after one uncounted run; median wall and CPU seconds
(CPU from the child's rusage via ``os.wait4``) and the ratio to ``python -c pass`` in the same run:

- ``topodoc --version``;
- ``logs --json`` on a one-line log (the first ``NCCL version`` line of a real log) and on a whole small real
  log (``fixtures/logs/ib-local-protection-acs.log``);
- ``probe``, ``topo``, ``diagnose --from example:dgx-a100-degraded-acs`` (the replay cache warm; see
  ``replay_bench.py`` for cold runs).

Run it with the python of a venv where topodoc was installed by ``pip install .``: an editable install
(``pip install -e``) adds a finder that every interpreter start imports, ``python -c pass`` included, which
lowers every ratio (on this machine ``python -c pass`` took 0.018 s in the editable venv, 0.009-0.011 s in
a regular one: ``diagnose --from`` 5.2x and 8.8-11x for the same 0.095-0.101 s); the script says so when it
sees one.

Bytecode: the children write and read their ``.pyc`` files under a temporary ``PYTHONPYCACHEPREFIX``
(``PYTHONDONTWRITEBYTECODE`` is dropped for them), and the uncounted first run fills it. Without that, a
shell that sets ``PYTHONDONTWRITEBYTECODE=1`` on a tree without ``__pycache__`` compiles every topodoc
module from source on every run (cProfile: 74 compiles, about 0.04 s of CPU for ``logs`` on a one-line log).
The user cache (``XDG_CACHE_HOME``: replay cache, parsed failure catalogue) is a fresh temporary folder,
filled by the uncounted run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL_LOG = "fixtures/logs/ib-local-protection-acs.log"
EXAMPLE = "example:dgx-a100-degraded-acs"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one child (stdout to a pipe, read whole); it must exit 0 or 1 (findings)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out, err = proc.stdout.read(), proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {code}: {err.decode()[-500:]}")
    del out
    return wall, usage.ru_utime + usage.ru_stime


def measure(argv: list[str], repeat: int, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    _run(argv, env, cwd)  # bytecode and user cache filled; not counted
    runs = [_run(argv, env, cwd) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def one_line_log(src: Path, folder: Path) -> Path:
    for line in (src / REAL_LOG).read_text().splitlines():
        if "NCCL INFO NCCL version" in line:
            path = folder / "one-line.log"
            path.write_text(line + "\n")
            return path
    raise SystemExit(f"{REAL_LOG} holds no NCCL version line")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--src", type=Path, default=ROOT,
                        help="the topodoc source tree to run (another checkout, for before/after)")
    args = parser.parse_args()
    src = args.src.resolve()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("TOPODOC_DEBUG", "PYTHONDONTWRITEBYTECODE")}
        env.update({"PYTHONPATH": str(src) + os.pathsep + env.get("PYTHONPATH", ""),
                    "PYTHONPYCACHEPREFIX": str(work / "pycache"), "XDG_CACHE_HOME": str(work / "cache")})
        one = one_line_log(src, work)
        cases = [
            ("python -c pass", [py, "-c", "pass"]),
            ("python -c 'import click'", [py, "-c", "import click"]),  # the floor of any click command
            ("topodoc --version", [py, "-m", "topodoc", "--version"]),
            ("logs --json one-line.log", [py, "-m", "topodoc", "logs", "--json", str(one)]),
            (f"logs --json {Path(REAL_LOG).name}",
             [py, "-m", "topodoc", "logs", "--json", str(src / REAL_LOG)]),
            *((f"{name} --from {EXAMPLE}", [py, "-m", "topodoc", name, "--from", EXAMPLE])
              for name in ("probe", "topo", "diagnose")),
        ]
        rows = [(label, *measure(argv, args.repeat, env, src)) for label, argv in cases]
    base_wall, base_cpu = rows[0][1], rows[0][2]
    print(f"source {src}; median of {args.repeat} runs each (after one uncounted); python "
          f"{sys.version.split()[0]}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<58} {'wall s':>7} {'cpu s':>7} {'x pass wall':>12} {'x pass cpu':>11}")
    for label, wall, cpu in rows:
        ratio_wall, ratio_cpu = wall / base_wall, cpu / max(base_cpu, 1e-3)
        print(f"{label[:58]:<58} {wall:7.3f} {cpu:7.3f} {ratio_wall:12.1f} {ratio_cpu:11.1f}")
    editable = _editable_hooks()
    if editable:
        print(f"note: this interpreter's site runs {', '.join(editable)} at every start (an editable "
              "install): `python -c pass` pays it too, so every ratio above is lower than a regular "
              "install's; run this with the python of a venv where topodoc was installed by `pip install .` "
              "for the figures users get")


def _editable_hooks() -> list[str]:
    """The .pth files of this interpreter's site folders that import an editable install's finder."""
    import site

    found = []
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        with contextlib.suppress(OSError):
            found += sorted(p.name for p in Path(folder).glob("*.pth") if "__editable__" in p.read_text())
    return found


if __name__ == "__main__":
    main()
