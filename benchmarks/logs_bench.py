"""Benchmark ``topodoc logs --json`` against ``grep -c NCCL`` on a generated multi-node INFO log.

    python benchmarks/logs_bench.py [--size-mb 500] [--nodes 16] [--keep PATH]

The log imitates a Slurm job at NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH: one long job of
NODES × 8 ranks (fixed pids), interleaved in blocks; each communicator creation prints bootstrap, plugin
and NET lines, Init START and COMPLETE, ring and tree lines, and channel lines (P2P inside a node, NET/IB
with GDRDMA across nodes), with training-loop noise in between; communicators are created again and
again (new comm pointers and commIds) until the file reaches the requested size. Prints MB/s (wall and
CPU), the ratio to grep, and topodoc's peak RSS. For files over 64 MB topodoc plans blocks in a second
process: the CPU figure is both processes together, the peak RSS the larger of the two.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

GPUS = 8


def comm_block(nodes: int, step: int, rng: random.Random) -> list[str]:
    """All lines one communicator creation prints, ranks interleaved the way a shared stdout mixes them."""
    nranks, comm_id = nodes * GPUS, f"0x{rng.getrandbits(60):x}"
    return _interleave([rank_lines(rank, nranks, nodes, step, comm_id) for rank in range(nranks)], rng)


def rank_lines(rank: int, nranks: int, nodes: int, step: int, comm_id: str) -> list[str]:
    node, gpu = divmod(rank, GPUS)
    host, pid, ip = f"gpu-node{node:03d}", 40000 + gpu, f"10.8.{node // 250}.{node % 250 + 1}"
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


def generate(path: str, size_mb: int, nodes: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    target, step = size_mb * 1_000_000, 0
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write("NCCL version 2.21.5+cuda12.4\n")
        while out.tell() < target:
            block = comm_block(nodes, step, rng) + noise(step, 20000)
            out.write("\n".join(block) + "\n")
            step += 1
    return os.path.getsize(path)


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU from the children's rusage, so other load matters less)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.PIPE)  # not DEVNULL: grep stops early there
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--keep", help="write the log here and keep it")
    args = parser.parse_args()
    path = args.keep or tempfile.mkstemp(suffix=".log")[1]
    try:
        size = generate(path, args.size_mb, args.nodes)
        subprocess.run(["grep", "-c", "NCCL", path], check=False, stdout=subprocess.DEVNULL)  # warm the cache
        ours, ours_cpu = timed([sys.executable, "-m", "topodoc", "logs", "--json", path])
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        grep, grep_cpu = timed(["grep", "-c", "NCCL", path])
        mb = size / 1e6
        print(f"log: {mb:.0f} MB, {args.nodes} nodes x {GPUS} ranks")
        print(f"topodoc logs --json: {ours:.2f} s wall ({mb / ours:.0f} MB/s), {ours_cpu:.2f} s CPU "
              f"({mb / ours_cpu:.0f} MB/s), peak RSS {rss_mb:.0f} MB")
        print(f"grep -c NCCL:        {grep:.2f} s wall ({mb / grep:.0f} MB/s), {grep_cpu:.2f} s CPU")
        print(f"ratio topodoc/grep:  {ours / grep:.1f}x wall, {ours_cpu / max(grep_cpu, 1e-3):.1f}x CPU")
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    main()
