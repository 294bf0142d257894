"""Benchmark ``topodoc logs --json`` side by side with ``grep -c NCCL`` on generated log shapes.

    python benchmarks/logs_bench.py [--shape all|own|coll256|init4096|files64|restart] [--scale 1.0]
                                    [--src DIR] [--keep DIR]

Shapes (sizes at ``--scale 1``; ``--scale 0.05`` gives a quick run on a shared machine):

- ``own`` (200 MB): a Slurm job at NCCL_DEBUG=INFO, SUBSYS=INIT,NET,GRAPH, 16 nodes × 8 ranks (fixed pids),
  interleaved in blocks; each communicator creation prints bootstrap, plugin and NET lines, Init START and
  COMPLETE, ring/tree lines and channel lines (P2P in a node, NET/IB with GDRDMA across), with 60 %
  training-loop noise; communicators are created again and again (new comm pointers and commIds);
- ``coll256`` (200 MB): 256 ranks writing to one srun stdout, interleaved line by line, SUBSYS including
  COLL: one ``AllReduce: opCount ...`` line per collective per rank, ~25 % of the lines;
- ``init4096`` (4096 ranks): one communicator init of 512 nodes × 8 ranks, ~110 lines per rank;
- ``files64`` (200 MB): 64 per-rank files, all given on one command line;
- ``restart`` (1000 MB): a 256-rank job restarted again and again, new pids each time.

Each shape runs ``topodoc logs --json`` with each scanner core (``--engines C,Python``: the compiled core,
and the Python scanner with ``TOPODOC_PURE=1``), in one process and with worker processes as chosen
(``--jobs 1,auto``), and ``grep -c NCCL`` (stdout to a file: grep
stops early on /dev/null) in the same run and prints MB/s, the ratio (wall and CPU) and the peak RSS
summed over every process of the run (sampled from /proc; the analyzer reads inputs over 48 MB in worker
processes when cores are free, ``TOPODOC_JOBS=1`` keeps it to one), plus the size of the JSON; grep's wall
and CPU are the least of three runs (at a small ``--scale`` its CPU is a few clock ticks). ``--src DIR`` runs
the topodoc found in DIR (e.g. ``/work/main`` for a before/after comparison).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

GPUS = 8


def comm_block(nodes: int, step: int, rng: random.Random, pid_base: int = 40000) -> list[str]:
    """All lines one communicator creation prints, ranks interleaved the way a shared stdout mixes them."""
    nranks, comm_id = nodes * GPUS, f"0x{rng.getrandbits(60):x}"
    per_rank = [rank_lines(rank, nranks, nodes, step, comm_id, pid_base) for rank in range(nranks)]
    return _interleave(per_rank, rng)


def rank_lines(rank: int, nranks: int, nodes: int, step: int, comm_id: str,
               pid_base: int = 40000) -> list[str]:
    node, gpu = divmod(rank, GPUS)
    host, pid, ip = f"gpu-node{node:03d}", pid_base + gpu, f"10.8.{node // 250}.{node % 250 + 1}"
    main, p = f"{host}:{pid}:{pid} [{gpu}] NCCL INFO ", f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO "
    ptr, bus = f"0x7f{step:04x}{rank:05x}", f"{0x18 + gpu * 0x10:x}000"
    init = f"comm {ptr} rank {rank} nranks {nranks} cudaDev {gpu} nvmlDev {gpu} busId {bus} commId {comm_id}"
    lines = [
        main + f"Bootstrap : Using ibp12s0:{ip}<0>",
        main + "cudaDriverVersion 12040",
        p + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        p + "NET/IB : Using " + " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(GPUS))
        + f" [RO]; OOB ibp12s0:{ip}<0>",
        p + "Using network IB",
        p + f"ncclCommInitRank {init} - Init START",
        p + f"comm {ptr} rank {rank} nRanks {nranks} nNodes {nodes} localRanks {GPUS} localRank {gpu} "
        "MNNVL 0",
    ]
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    for ch in range(32):
        lines.append(p + f"Ring {ch:02d} : {prv} -> {rank} -> {nxt}")
        lines.append(p + f"Tree {ch:02d} : {prv} -> {rank} -> {nxt}/-1/-1")
        head = p + f"Channel {ch:02d}/0 : "
        if gpu == GPUS - 1:
            lines.append(head + f"{rank}[{gpu}] -> {nxt}[0] [send] via NET/IB/{gpu}/GDRDMA")
        if gpu == 0:
            lines.append(head + f"{prv}[7] -> {rank}[0] [receive] via NET/IB/0/GDRDMA")
        if gpu != GPUS - 1:
            lines.append(head + f"{rank}[{gpu}] -> {nxt}[{gpu + 1}] via P2P/CUMEM/read")
    lines.append(p + "Connected all rings, use ring PXN 0 GDR 1")
    lines.append(p + f"ncclCommInitRank {init} - Init COMPLETE")
    return lines


def _interleave(per_rank: list[list[str]], rng: random.Random) -> list[str]:
    out, cursors = [], [0] * len(per_rank)
    live = list(range(len(per_rank)))
    while live:
        r = rng.choice(live)
        take = rng.randint(1, 12)
        out += per_rank[r][cursors[r] : cursors[r] + take]
        cursors[r] += take
        if cursors[r] >= len(per_rank[r]):
            live.remove(r)
    return out


def noise(step: int, count: int) -> list[str]:
    return [
        f"[2026-03-0{1 + step % 9} 12:{i % 60:02d}:{i % 59:02d}] iteration {step * count + i} | "
        f"loss {2.5 - i * 1e-4:.4f} | lr 3.0e-04 | grad_norm {0.9 + (i % 7) * 0.01:.3f} "
        f"| tokens/s {180000 + i % 977}"
        for i in range(count)
    ]


def generate(path: str, size_mb: float, nodes: int, seed: int = 7) -> list[str]:
    """The ``own`` shape (the benchmark's original log)."""
    rng = random.Random(seed)
    target, step = size_mb * 1_000_000, 0
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write("NCCL version 2.21.5+cuda12.4\n")
        while out.tell() < target:
            block = comm_block(nodes, step, rng) + noise(step, 20000)
            out.write("\n".join(block) + "\n")
            step += 1
    return [path]


def coll_line(rank: int, op: int) -> str:
    node, gpu = divmod(rank, GPUS)
    pid = 40000 + gpu
    return (f"gpu-node{node:03d}:{pid}:{pid + 61} [{gpu}] NCCL INFO AllReduce: opCount {op:x} sendbuff "
            f"0x7f{rank:04x}a0000000 recvbuff 0x7f{rank:04x}a0000000 count 262144 datatype 7 op 0 root 0 "
            f"comm 0x55{rank:06x}c0 [nranks=256] stream 0x55{rank:06x}f0")


def generate_coll(path: str, size_mb: float) -> list[str]:
    """256 ranks on one stdout, line by line: init once, then COLL lines (~25 %) among training noise."""
    rng, nodes = random.Random(11), 32
    target = size_mb * 1_000_000
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write("\n".join(comm_block(nodes, 0, rng)) + "\n")
        op = 0
        while out.tell() < target:
            ranks = list(range(nodes * GPUS))
            rng.shuffle(ranks)
            lines = []
            for i, rank in enumerate(ranks):
                lines.append(coll_line(rank, op))
                lines += noise(op + i, 3)
            out.write("\n".join(lines) + "\n")
            op += 1
    return [path]


def generate_init(path: str, scale: float) -> list[str]:
    """One communicator init of 4096 ranks (fewer at a smaller scale), interleaved as a shared stdout."""
    nodes = max(2, round(512 * scale))
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write("\n".join(comm_block(nodes, 0, random.Random(13))) + "\n")
    return [path]


def generate_files(folder: str, size_mb: float) -> list[str]:
    """64 per-rank files (8 nodes x 8): each rank's own lines for communicator after communicator."""
    nodes, paths = 8, []
    per_file = size_mb * 1_000_000 / (nodes * GPUS)
    for rank in range(nodes * GPUS):
        path = os.path.join(folder, f"rank-{rank:02d}.log")
        with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
            step = 0
            while out.tell() < per_file:
                lines = rank_lines(rank, nodes * GPUS, nodes, step, f"0x{step + 1:x}") + noise(step, 300)
                out.write("\n".join(lines) + "\n")
                step += 1
        paths.append(path)
    return paths


def generate_restart(path: str, size_mb: float) -> list[str]:
    """A 256-rank job restarted again and again: each restart has new pids, then a little training."""
    rng, nodes = random.Random(17), 32
    target, restart = size_mb * 1_000_000, 0
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        while out.tell() < target:
            out.write("NCCL version 2.21.5+cuda12.4\n")
            block = comm_block(nodes, restart, rng, pid_base=10000 + restart * 16) + noise(restart, 5000)
            out.write("\n".join(block) + "\n")
            restart += 1
    return [path]


SHAPES: dict[str, Callable[[str, float], list[str]]] = {
    "own": lambda folder, scale: generate(os.path.join(folder, "own.log"), 200 * scale, 16),
    "coll256": lambda folder, scale: generate_coll(os.path.join(folder, "coll256.log"), 200 * scale),
    "init4096": lambda folder, scale: generate_init(os.path.join(folder, "init4096.log"), scale),
    "files64": lambda folder, scale: generate_files(folder, 200 * scale),
    "restart": lambda folder, scale: generate_restart(os.path.join(folder, "restart.log"), 1000 * scale),
}


class TreeRss:
    """Peak of the summed RSS of a process and all its descendants, sampled from /proc every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(_rss(p) for p in _tree(self.pid)))
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# the children write and read their bytecode under one temporary folder, as an installed package has its
# .pyc files: a shell with PYTHONDONTWRITEBYTECODE=1 on a tree without __pycache__ would otherwise compile
# every module from source in every run (about 0.04 s of CPU, counted as startup), which no user pays
PYCACHE = tempfile.mkdtemp(prefix="logs-bench-pyc-")


def _bytecode(env: dict | None) -> dict:
    env = dict(os.environ if env is None else env, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: list[str], out_path: str, env: dict | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the children's rusage: other load matters less) and peak tree RSS."""
    env = _bytecode(env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(out_path, "wb") as out:  # a file, not DEVNULL: grep stops early there
        # run from the source tree asked for (``python -m`` puts the working folder first on sys.path)
        cwd = (env or {}).get("PYTHONPATH") or None
        proc = subprocess.Popen(argv, stdout=out, env=env, cwd=cwd)
        rss = TreeRss(proc.pid)
        code = proc.wait()
    wall = time.perf_counter() - start
    peak = rss.stop()
    if code not in (0, 1):
        raise SystemExit(f"{argv[:4]} exited {code}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), peak


def startup(folder: str, src: str | None) -> float:
    """CPU seconds of ``topodoc logs --json`` on a one-line log: the fixed cost in every row below."""
    path = os.path.join(folder, "one-line.log")
    with open(path, "w") as out:
        out.write("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    env = dict(os.environ, PYTHONPATH=src) if src else None
    timed([sys.executable, "-m", "topodoc", "logs", "--json", path], path + ".json", env)  # bytecode written
    runs = [timed([sys.executable, "-m", "topodoc", "logs", "--json", path], path + ".json", env)[1]
            for _ in range(3)]
    return min(runs)


def run_shape(name: str, folder: str, scale: float, src: str | None, fixed: float,
              engines: list[str], jobs: list[str]) -> None:
    """Each scanner core (``C``; ``Python``: TOPODOC_PURE=1) in one process (``TOPODOC_JOBS=1``) and with
    worker processes chosen as usual (``auto``), each run paired with grep runs just before and after
    it (their least: the machine's load moves both)."""
    paths = SHAPES[name](folder, scale)
    size = sum(os.path.getsize(p) for p in paths)
    subprocess.run(["grep", "-c", "NCCL", *paths], check=False, stdout=subprocess.DEVNULL)  # warm the cache
    json_path = os.path.join(folder, f"{name}.json")
    argv = [sys.executable, "-m", "topodoc", "logs", "--json", *paths]
    mb, outputs = size / 1e6, set()
    for engine in engines:
        for job in jobs:
            env = dict(os.environ)
            env.pop("TOPODOC_JOBS", None)
            env.pop("TOPODOC_PURE", None)
            if src:
                env["PYTHONPATH"] = src
            if engine == "Python":
                env["TOPODOC_PURE"] = "1"
            if job != "auto":
                env["TOPODOC_JOBS"] = job
            # grep's CPU at a small scale is a few clock ticks: the least of three runs around ours
            runs = [timed(["grep", "-c", "NCCL", *paths], os.path.join(folder, f"{name}.grep"))
                    for _ in range(2)]
            ours, ours_cpu, ours_rss = timed(argv, json_path, env)
            runs.append(timed(["grep", "-c", "NCCL", *paths], os.path.join(folder, f"{name}.grep")))
            grep, grep_cpu = min(r[0] for r in runs), min(r[1] for r in runs)
            with open(json_path, "rb") as f:
                outputs.add(f.read())
            print(f"{name:9} {mb:7.1f} MB {len(paths):2d} file(s) {engine:6} jobs {job:4}: {ours:6.2f} s "
                  f"wall ({mb / ours:5.0f} MB/s) CPU {ours_cpu:6.2f} s | grep {grep:5.3f} s "
                  f"CPU {grep_cpu:5.3f} s | "
                  f"x grep: wall {ours / grep:5.1f} CPU {ours_cpu / max(grep_cpu, 1e-3):5.1f} | peak RSS "
                  f"{ours_rss / 2**20:4.0f} MB | JSON {os.path.getsize(json_path) / 1e6:.2f} MB | CPU less "
                  f"startup {max(ours_cpu - fixed, 0):.2f} s", flush=True)
    if len(outputs) > 1:
        print(f"{name}: the JSON differs between runs", flush=True)
    for p in paths:
        os.unlink(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="all", choices=["all", *SHAPES])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every shape's size")
    parser.add_argument("--src", help="run the topodoc in this source tree (PYTHONPATH)")
    parser.add_argument("--keep", help="generate the logs and the JSON here and keep the JSON")
    parser.add_argument("--engines", default="C,Python",
                        help="scanner cores to run: C, Python (TOPODOC_PURE=1)")
    parser.add_argument("--jobs", default="1,auto", help="TOPODOC_JOBS values to run (auto: unset)")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="logs-bench-")
    os.makedirs(folder, exist_ok=True)
    print(f"topodoc from {args.src or 'this checkout'}, scale {args.scale}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; jobs auto: free CPUs, inputs over 48 MB")
    try:
        fixed = startup(folder, args.src)
        print(f"startup (a one-line log): {fixed:.2f} s CPU")
        for name in SHAPES if args.shape == "all" else [args.shape]:
            run_shape(name, folder, args.scale, args.src, fixed, args.engines.split(","),
                      args.jobs.split(","))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(PYCACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
