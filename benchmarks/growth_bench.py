"""Cost per input unit of every reader at 1x, 4x and 16x its input: a super-linear path shows up as a
number that grows along a row.

    python benchmarks/growth_bench.py [--reader all|logs|ranks|topo|lspci|dmesg|smi-q|xml|fleet] [--base 1.0]

Each reader runs on generated input of three sizes as a user runs it (``topodoc logs --json``,
``topodoc diagnose --json FILE`` for the pastes, ``topodoc fleet DIR --json``; the topology derivation
in this process on hand-built machines, ``benchmarks/pairs_bench.py``'s). The CLI's fixed cost (a
one-line input of the same reader, least of three runs) is subtracted, then the CPU seconds are divided
by the input's units: MB of log or dmesg, ranks of a job's init log (256 to 4,096: the logs reader along
the job's size, where a cost per host or rank pair would show), GPUs or GPU pairs of a paste or machine
(every pair is derived, so pairs are the unit that should stay flat), nodes of a fleet. The lspci row is
followed by a 4,096-GPU paste, over derive's MAX_GPUS: its refusal's CPU seconds and peak RSS. ``--base``
scales the 1x size. In the ranks row the cost per rank rises about 1.5x from 1x to 16x, not from a pair
loop: a rank's connection lines are spread over more 1 MiB blocks as the interleaved log grows, so
fewer of them fold into one key per block (at most one key per line: linear in the log).
Figures only, not a test; on a loaded 2-core machine expect +-30% per figure.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def cpu(argv: list[str]) -> tuple[float, int]:
    """CPU seconds and peak RSS (MiB, summed over the process tree, sampled: logs_bench.timed)."""
    import logs_bench

    with tempfile.NamedTemporaryFile() as out:
        _, spent, rss = logs_bench.timed(argv, out.name, dict(os.environ, PYTHONPATH=str(ROOT)))
    return spent, rss // 2**20


def topodoc(*args: str) -> list[str]:
    return [sys.executable, "-m", "topodoc", *args]


# -- generators: (path or folder, units) -------------------------------------------------------------------

def gen_logs(folder: str, scale: float) -> tuple[str, dict]:
    import logs_bench

    path = os.path.join(folder, "coll.log")
    logs_bench.generate_coll(path, 4 * scale)
    return path, {"MB": os.path.getsize(path) / 1e6}


def gen_ranks(folder: str, scale: float) -> tuple[str, dict]:
    """The logs reader along the other axis: one communicator init of 32, 128, 512 nodes (256 to 4,096
    ranks), so a cost that grows with the job's size (hosts, ranks) shows, not only with the log's MB."""
    import logs_bench

    path = os.path.join(folder, "init.log")
    logs_bench.generate_init(path, scale / 16)
    nodes = max(2, round(512 * scale / 16))
    return path, {"rank": nodes * logs_bench.GPUS}


def gen_lspci(folder: str, scale: float) -> tuple[str, dict]:
    gpus = max(2, round(8 * scale))  # 16x: 128 GPUs, derive's MAX_GPUS (more are refused: refused_row)
    out = []
    for i in range(gpus):
        dom, bus = divmod(i, 200)
        out.append(f"{dom:04x}:{bus + 1:02x}:00.0 3D controller: NVIDIA Corporation GA100 (rev a1)\n"
                   "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n"
                   "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
                   "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x16 (ok)\n")
    path = os.path.join(folder, "lspci.txt")
    Path(path).write_text("".join(out))
    return path, {"GPU": gpus, "pair": gpus * (gpus - 1) / 2}


def gen_dmesg(folder: str, scale: float) -> tuple[str, dict]:
    lines = [line for f in sorted((ROOT / "fixtures" / "kernel_log").glob("*.log"))
             for line in f.read_text().splitlines() if line.strip() and not line.startswith("#")]
    benign = ["[%10.6f] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
              "[%10.6f] audit: type=1400 apparmor=\"STATUS\" name=\"docker-default\"",
              "[%10.6f] mlx5_core 0000:0c:00.0: E-Switch: Total vports 2, per vport: max uc(128)",
              "[%10.6f] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null)"]
    rng, out, size, t = random.Random(1), [], 0, 0.0
    while size < 1e6 * scale:
        t += 0.001
        line = rng.choice(benign) % t if rng.random() < 0.98 else rng.choice(lines)
        out.append(line)
        size += len(line) + 1
    path = os.path.join(folder, "dmesg.log")
    Path(path).write_text("\n".join(out) + "\n")
    return path, {"MB": size / 1e6}


def gen_smi_q(folder: str, scale: float) -> tuple[str, dict]:
    text = (ROOT / "fixtures/text/nvidia-smi-q/rtx4070-laptop-full.txt").read_text()
    head, gpu = text.split("\nGPU 00000000:01:00.0\n", 1)
    gpus = max(1, round(8 * scale))
    head = head.replace("Attached GPUs                             : 1",
                        f"Attached GPUs                             : {gpus}")
    body = "".join(f"\nGPU 00000000:{i + 1:02x}:00.0\n"
                   + gpu.replace("00000000:01:00.0", f"00000000:{i + 1:02x}:00.0") for i in range(gpus))
    path = os.path.join(folder, "smi-q.txt")
    Path(path).write_text(head + body)
    return path, {"GPU": gpus, "pair": gpus * (gpus - 1) / 2}


def gen_xml(folder: str, scale: float) -> tuple[str, dict]:
    text = (ROOT / "fixtures/text/nvidia-smi-q-xml/gtx950-cut.xml").read_text()  # cut: closed here
    start = text.index('        <gpu id="')
    gpu, end, text = text[start:].rstrip() + "\n        </gpu>", len(text), text + "\n</nvidia_smi_log>\n"
    gpus = max(1, round(8 * scale))
    body = "\n".join(gpu.replace("00000000:05:00.0", f"00000000:{i + 1:02x}:00.0") for i in range(gpus))
    path = os.path.join(folder, "smi-q.xml")
    head = text[:start].replace("<attached_gpus>1<", f"<attached_gpus>{gpus}<")
    Path(path).write_text(head + body + text[end:])
    return path, {"GPU": gpus, "pair": gpus * (gpus - 1) / 2}


def gen_fleet(folder: str, scale: float) -> tuple[str, dict]:
    import fleet_bench

    nodes = max(2, round(25 * scale))
    out = os.path.join(folder, "fleet")
    os.makedirs(out)
    fleet_bench.generate(out, nodes, 0)
    return out, {"node": nodes}


READERS = {
    "logs": (gen_logs, lambda p: topodoc("logs", "--json", p)),
    "ranks": (gen_ranks, lambda p: topodoc("logs", "--json", p)),
    "lspci": (gen_lspci, lambda p: topodoc("diagnose", "--json", p)),
    "dmesg": (gen_dmesg, lambda p: topodoc("diagnose", "--json", p)),
    "smi-q": (gen_smi_q, lambda p: topodoc("diagnose", "--json", p)),
    "xml": (gen_xml, lambda p: topodoc("diagnose", "--json", p)),
    "fleet": (gen_fleet, lambda p: topodoc("fleet", p, "--json")),
}


def topo_row(base: float) -> None:
    """The topology derivation of an NVSwitch machine of 8x, 32x, 128x GPUs (in this process)."""
    import pairs_bench

    from topodoc.topology.derive import derive

    cells = []
    for mult in (1, 4, 16):
        gpus = max(2, round(4 * base * mult))
        snap = pairs_bench.machine(gpus)
        start = time.process_time()
        derive(snap)
        spent = time.process_time() - start
        pairs = gpus * (gpus - 1) / 2
        cells.append(f"{mult:2d}x {gpus:4d} GPUs {spent:6.2f} s {spent / pairs * 1e6:7.1f} us/pair")
    print(f"{'topo':6} | " + " | ".join(cells), flush=True)


def refused_row(folder: str, gpus: int = 4096) -> None:
    """An lspci paste of ``gpus`` GPUs, more than derive's MAX_GPUS: refused in one line, exit 2, before
    anything per pair is built; its CPU seconds and peak RSS."""
    import subprocess

    import logs_bench

    where = os.path.join(folder, "refused")
    os.makedirs(where)
    path, _ = gen_lspci(where, gpus / 8)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(topodoc("diagnose", "--json", path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    rss = logs_bench.TreeRss(proc.pid)
    _, err = proc.communicate()
    peak = rss.stop() // 2**20
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    said = err.decode(errors="replace").strip().splitlines()
    print(f"{'lspci':6} | {gpus} GPUs: exit {proc.returncode} in {spent:.2f} s CPU, RSS {peak} MiB, "
          f"{len(said)} line(s) on stderr: {said[-1] if said else ''}", flush=True)
    shutil.rmtree(where)


def row(name: str, base: float, folder: str) -> None:
    gen, argv = READERS[name]
    os.makedirs(os.path.join(folder, "fixed"))
    small, _ = gen(os.path.join(folder, "fixed"), 0.01)
    fixed = min(cpu(argv(small))[0] for _ in range(3))
    cells = []
    for mult in (1, 4, 16):
        where = os.path.join(folder, f"{name}{mult}")
        os.makedirs(where)
        path, units = gen(where, base * mult)
        spent, rss = cpu(argv(path))
        spent = max(spent - fixed, 0.0)
        per = " ".join(f"{spent / n * (1e3 if n > 1 else 1):.3g} ms/{unit}" for unit, n in units.items())
        size = " ".join(f"{n:g} {unit}" for unit, n in list(units.items())[:1])
        cells.append(f"{mult:2d}x {size:>12} {spent:6.2f} s {per} RSS {rss} MiB")
        shutil.rmtree(where)
    print(f"{name:6} | fixed {fixed:.2f} s | " + " | ".join(cells), flush=True)
    shutil.rmtree(os.path.join(folder, "fixed"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reader", default="all", choices=["all", "topo", *READERS])
    ap.add_argument("--base", type=float, default=1.0, help="multiply the 1x size")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="growth-bench-")
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; CPU seconds less the fixed cost, per unit")
    try:
        order = ["logs", "ranks", "topo", "lspci", "dmesg", "smi-q", "xml", "fleet"]
        for name in order if args.reader == "all" else [args.reader]:
            if name == "topo":
                topo_row(args.base)
            else:
                row(name, args.base, folder)
            if name == "lspci":
                refused_row(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
