"""Fleet benchmark: N probe snapshots with planted differences, and N recordings most of them identical.

    python benchmarks/fleet_bench.py [--nodes 10000] [--recordings 10000] [--plants 60] [--jobs N]
                                     [--keep DIR]

Snapshots: ``probe --json`` documents (compact JSON; the command indents) of one bundled machine, each
with its own identity (host name, serials, UUIDs, MACs, GUIDs, boot id), one difference of every kind
planted at random nodes. Recordings: copies of the bundled DGX A100 recording, 1 % of them replaced by
its degraded variants (the operator's "990 of 1,000 byte-identical"), each in its own ``<host>/``
folder as ``recording.tar.gz``. Each set is timed with ``topodoc fleet DIR --json`` in a subprocess
(with a fresh, empty replay cache) beside a bare ``python -c pass``: wall time, CPU time, peak RSS
summed over the process tree, and whether every planted difference was found with no false one.
Not a test: figures only.

Figures (2026-12-03, the shared 2-core development VM, `python benchmarks/fleet_bench.py`):

    topodoc fleet (10,000 snapshots)     7.35 s wall   4.67 s CPU   95 MB   60 of 60 planted found, none false
    topodoc fleet (10,000 recordings)    3.68 s wall   8.39 s CPU  104 MB   100 odd of 100 found (8 distinct)

Before the fold by content (commit 24a6545), 300 such recordings took 24.8 s wall and 13.8 s CPU
(`--jobs 2`, cold replay cache): each archive was unpacked; now 1.4 s wall.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import psutil

from topodoc.codec import to_data
from topodoc.fleet.plant import PLANTERS, vary_identity
from topodoc.probe.source import load_snapshot


def generate(out: str, nodes: int, plants: int, seed: int = 7) -> dict[str, set[str]]:
    base = to_data(load_snapshot("example:hgx-h100-8x400g-ib"))
    rng = random.Random(seed)
    planted: dict[str, set[str]] = {}
    kinds = list(PLANTERS)
    targets = rng.sample(range(nodes), min(plants, nodes))
    plan = {n: kinds[i % len(kinds)] for i, n in enumerate(targets)}
    for n in range(nodes):
        data = vary_identity(base, n)
        if n in plan:
            key = PLANTERS[plan[n]](data, rng)
            planted.setdefault(key, set()).add(f"node-{n:05d}")
        with open(os.path.join(out, f"node-{n:05d}.json"), "w") as fh:
            fh.write(json.dumps(data))
    return planted


def generate_recordings(out: str, count: int) -> tuple[int, int]:
    """``count`` host folders, each with a ``recording.tar.gz``: 99 % the DGX A100, 1 % its degraded
    variants. Returns (odd nodes, distinct archives)."""
    from topodoc.examples_index import example_path, list_examples

    good = example_path("dgx-a100").read_bytes()
    variants = [example_path(n).read_bytes() for n in list_examples() if n.startswith("dgx-a100-degraded")]
    odd = {n for n in range(count) if n % 100 == 99} or {count - 1}
    for n in range(count):
        folder = os.path.join(out, f"gpu{n:05d}")
        os.makedirs(folder)
        with open(os.path.join(folder, "recording.tar.gz"), "wb") as fh:
            fh.write(variants[n // 100 % len(variants)] if n in odd else good)
    return len(odd), 1 + len({n // 100 % len(variants) for n in odd})


def run(argv: list[str]) -> tuple[float, float, int, bytes]:
    """Wall seconds, CPU seconds of the tree, peak RSS summed over the tree (bytes), stdout."""
    start = time.perf_counter()
    out = tempfile.TemporaryFile()  # noqa: SIM115 - read back after the process ends
    proc = psutil.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
    peak, cpu = 0, {}
    while proc.poll() is None:
        rss = 0
        try:
            for p in [proc, *proc.children(recursive=True)]:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
        except psutil.Error:
            pass
        peak = max(peak, rss)
        time.sleep(0.02)
    wall = time.perf_counter() - start
    children = os.times()
    out.seek(0)
    return wall, max(sum(cpu.values()), children.children_user + children.children_system), peak, out.read()


def _row(label: str, figures: tuple[float, float, int, bytes]) -> None:
    wall, cpu, peak, _out = figures
    print(f"{label:<40}{wall:>8.2f}{cpu:>8.2f}{peak / 1e6:>13.0f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000, help="probe snapshots (0: skip)")
    ap.add_argument("--recordings", type=int, default=10_000, help="recordings (0: skip)")
    ap.add_argument("--plants", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="topodoc-fleet-")
    os.makedirs(root, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="topodoc-fleet-cache-")  # a cold replay cache
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    print(f"cores: {os.cpu_count()}")
    print(f"{'command':<40}{'wall s':>8}{'cpu s':>8}{'peak RSS MB':>13}")
    _row("python -c pass", run([sys.executable, "-c", "pass"]))
    ok = True
    if args.nodes:
        ok &= _snapshots(os.path.join(root, "snaps"), args, jobs)
    if args.recordings:
        ok &= _recordings(os.path.join(root, "recs"), args, jobs)
    return 0 if ok else 1


def _recordings(root: str, args, jobs: list[str]) -> bool:
    os.makedirs(root, exist_ok=True)
    t0 = time.perf_counter()
    odd, distinct = generate_recordings(root, args.recordings)
    print(f"  generated {args.recordings:,} recordings ({odd} odd, {distinct} distinct archives) in "
          f"{time.perf_counter() - t0:.1f} s")
    figures = run([sys.executable, "-m", "topodoc", "fleet", root, "--json", *jobs])
    _row(f"topodoc fleet ({args.recordings:,} recordings)", figures)
    report = json.loads(figures[3])
    off = {n for d in report["differences"] for o in d["outliers"] for n in o["nodes"]}
    print(f"  nodes compared: {report['nodes']:,}; groups: {len(report['groups'])}; nodes off the majority: "
          f"{len(off)} (expected {odd}); unreadable: {len(report['errors'])}")
    return report["nodes"] == args.recordings and len(off) == odd and not report["errors"]


def _snapshots(root: str, args, jobs: list[str]) -> bool:
    os.makedirs(root, exist_ok=True)
    t0 = time.perf_counter()
    planted = generate(root, args.nodes, args.plants)
    size = sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root))
    print(
        f"  generated {args.nodes:,} snapshots ({size / 1e6:,.0f} MB) with {sum(map(len, planted.values()))} "
        f"planted differences of {len(planted)} properties in {time.perf_counter() - t0:.1f} s"
    )
    figures = run([sys.executable, "-m", "topodoc", "fleet", root, "--json", *jobs])
    _row(f"topodoc fleet ({args.nodes:,} snapshots)", figures)
    report = json.loads(figures[3])
    found = {d["key"]: {n for o in d["outliers"] for n in o["nodes"]} for d in report["differences"]}
    missed = {k: v - found.get(k, set()) for k, v in planted.items() if v - found.get(k, set())}
    # A planted fault may change more than its own property (a NIC gone takes its ports with it); a
    # false difference is one reported on a node where nothing was planted.
    planted_nodes = set().union(*planted.values()) if planted else set()
    false = {k: v - planted_nodes for k, v in found.items() if v - planted_nodes}
    print(
        f"  nodes compared: {report['nodes']:,}; groups: {len(report['groups'])}; differences reported: "
        f"{len(report['differences'])}"
    )
    print(
        f"  planted differences found: {sum(map(len, planted.values())) - sum(map(len, missed.values()))} of "
        f"{sum(map(len, planted.values()))}; missed: {missed or 'none'}; false differences: {false or 'none'}"
    )
    return not missed and not false


if __name__ == "__main__":
    sys.exit(main())
