"""Where ``topodoc logs --json`` spends its CPU, part by part, as multiples of ``grep -c NCCL``.

    python benchmarks/logs_floor.py [--shape all|own|coll256|init4096|files64|restart] [--scale 1]
                                    [--src DIR] [--file LOG]

``logs_bench.py`` gives the whole command's ratio to grep; this script says which part of it a faster
scanner could remove and which it could not. Each row is measured in a fresh interpreter, one process
(``TOPODOC_JOBS=1``), CPU seconds (``time.process_time``: the machine is shared, wall time is noise), the
least of ``--repeat`` runs:

- ``start``: the interpreter, click and the analyzer's imports (``python -c pass`` costs part of it);
- ``scan``: reading and scanning every block, the C (or Python) core plus the per-record Python;
- ``scan-no-records``: the same, with the per-record Python (``Scanner._info``: the grammar, ``facts``,
  the rank table and the per-host repeat logic of each distinct (process, message) record) replaced by a
  no-op; what is left is the block reader, the core's passes, connection folding and the ordered walk;
- ``scan-no-walk``: the same, with the ordered walk also a no-op (the core's passes and the folding);
- ``build``: the summary, inferences and tables from the scanned state;
- ``to-data`` and ``json``: the document, then its encoding (what ``--json`` prints).

``floor`` is ``start + build + to-data + json``: what the command would cost with a scanner that took no
time at all. A ratio target below ``floor`` cannot be met by any scanner; one below
``floor + scan-no-records`` cannot be met while each distinct record costs Python work. The ``no-*`` rows
patch private methods of the installed analyzer and give wrong analyses: they are measurements, nothing
else.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs_bench  # noqa: E402
from logs_passes import grep_cpu  # noqa: E402

# run in a fresh interpreter: argv[1] the mode, the rest the log paths; prints one JSON object
_CHILD = r"""
import json, sys, time
mode, paths = sys.argv[1], sys.argv[2:]
t0 = time.process_time()
from topodoc import catalogue
from topodoc.codec import to_data
from topodoc.parsers.nccl_log import _read_here, build, parallel, scan
from topodoc.report.document import document
from topodoc.report.logs import to_json
if mode in ("no-records", "no-walk"):
    scan.Scanner._info = lambda self, number, tail, msg, raw: None
if mode == "no-walk":
    scan.Scanner._walk = lambda self, block, events: None
literals = tuple(catalogue.scan_literals())
t1 = time.process_time()
units = parallel.plan(paths)
state, stats = parallel.analyze_units(units, 1, literals, paths, _read_here(units, paths, literals))
t2 = time.process_time()
out = {"start": t1 - t0, "scan": t2 - t1}
if mode == "full":
    analysis = build(state, tuple(stats))
    t3 = time.process_time()
    data = to_data(analysis)
    t4 = time.process_time()
    text = to_json(document("topodoc.logs", data))
    t5 = time.process_time()
    out.update({"build": t3 - t2, "to-data": t4 - t3, "json": t5 - t4, "json_mb": len(text) / 1e6})
print(json.dumps(out))
"""


def child(mode: str, paths: list[str], env: dict) -> dict:
    """One fresh interpreter's parts; ``start`` includes the interpreter itself (children's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", _CHILD, mode, *paths], env=env, capture_output=True,
                          text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    parts = json.loads(done.stdout)
    total = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    inside = sum(v for k, v in parts.items() if k != "json_mb")
    parts["start"] += max(total - inside, 0.0)  # the interpreter before the first line of _CHILD, and exit
    return parts


def least(runs: list[dict]) -> dict:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def measure(name: str, paths: list[str], env: dict, repeat: int, folder: str) -> None:
    grep = grep_cpu(paths, os.path.join(folder, "grep.out"))
    full = least([child("full", paths, env) for _ in range(repeat)])
    bare = least([child("no-records", paths, env) for _ in range(repeat)])
    walkless = least([child("no-walk", paths, env) for _ in range(repeat)])
    floor = full["start"] + full["build"] + full["to-data"] + full["json"]
    rows = {
        "start": full["start"], "scan": full["scan"], "scan-no-records": bare["scan"],
        "scan-no-walk": walkless["scan"], "build": full["build"], "to-data": full["to-data"],
        "json": full["json"], "floor": floor, "total": floor + full["scan"],
        "floor+no-records": floor + bare["scan"],
    }
    mb = sum(os.path.getsize(p) for p in paths) / 1e6
    print(f"{name:9} {mb:7.1f} MB  grep {grep:6.3f} s  JSON {full['json_mb']:.2f} MB", flush=True)
    for key, value in rows.items():
        print(f"    {key:17} {value:7.3f} s  {value / grep:6.1f}x grep", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="all", choices=["all", *logs_bench.SHAPES])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--src", help="the topodoc source tree to measure (PYTHONPATH)")
    parser.add_argument("--file", action="append", help="a log to measure instead of the shapes (repeatable)")
    args = parser.parse_args()
    env = dict(os.environ, TOPODOC_JOBS="1")
    if args.src:
        env["PYTHONPATH"] = os.path.abspath(args.src)
    folder = tempfile.mkdtemp(prefix="logs-floor-")
    env = logs_bench._bytecode(env)  # bytecode cached, as an installed package has it
    print(f"scale {args.scale}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; one process; "
          f"CPU seconds, least of {args.repeat}")
    try:
        if args.file:
            measure(os.path.basename(args.file[0]), args.file, env, args.repeat, folder)
            return
        for name in logs_bench.SHAPES if args.shape == "all" else [args.shape]:
            paths = logs_bench.SHAPES[name](folder, args.scale)
            measure(name, paths, env, args.repeat, folder)
            for p in paths:
                os.unlink(p)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
