"""Fleet benchmark: 10,000 node snapshots from the bundled recordings, with planted differences.

    python benchmarks/fleet_bench.py [--nodes 10000] [--plants 60] [--jobs N] [--keep DIR]

Writes ``probe --json`` snapshots (compact JSON; the command indents) of one bundled machine,
each with its own identity (host name, serials, UUIDs, MACs, GUIDs, boot id), plants one difference
of every kind at random nodes, then times ``topodoc fleet DIR --json`` in a subprocess beside a bare
``python -c pass`` and prints wall time, CPU time, peak RSS summed over the process tree, and whether
every planted difference was found with no false one. Not a test: figures only.
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--plants", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="topodoc-fleet-")
    os.makedirs(root, exist_ok=True)
    t0 = time.perf_counter()
    planted = generate(root, args.nodes, args.plants)
    size = sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root))
    print(
        f"generated {args.nodes:,} snapshots ({size / 1e6:,.0f} MB) with {sum(map(len, planted.values()))} "
        f"planted differences of {len(planted)} properties in {time.perf_counter() - t0:.1f} s"
    )
    base = run([sys.executable, "-c", "pass"])
    cmd = [sys.executable, "-m", "topodoc", "fleet", root, "--json"] + (
        ["--jobs", str(args.jobs)] if args.jobs else []
    )
    wall, cpu, peak, out = run(cmd)
    report = json.loads(out)
    found = {d["key"]: {n for o in d["outliers"] for n in o["nodes"]} for d in report["differences"]}
    missed = {k: v - found.get(k, set()) for k, v in planted.items() if v - found.get(k, set())}
    # A planted fault may change more than its own property (a NIC gone takes its ports with it); a
    # false difference is one reported on a node where nothing was planted.
    planted_nodes = set().union(*planted.values()) if planted else set()
    false = {k: v - planted_nodes for k, v in found.items() if v - planted_nodes}
    print(f"{'command':<34}{'wall s':>8}{'cpu s':>8}{'peak RSS MB':>13}")
    print(f"{'python -c pass':<34}{base[0]:>8.2f}{base[1]:>8.2f}{base[2] / 1e6:>13.0f}")
    label = f"topodoc fleet ({args.nodes:,} nodes)"
    print(f"{label:<34}{wall:>8.2f}{cpu:>8.2f}{peak / 1e6:>13.0f}")
    print(
        f"nodes compared: {report['nodes']:,}; groups: {len(report['groups'])}; differences reported: "
        f"{len(report['differences'])}"
    )
    print(
        f"planted differences found: {sum(map(len, planted.values())) - sum(map(len, missed.values()))} of "
        f"{sum(map(len, planted.values()))}; missed: {missed or 'none'}"
    )
    print(f"false differences: {false or 'none'}")
    return 0 if not missed and not false else 1


if __name__ == "__main__":
    sys.exit(main())
