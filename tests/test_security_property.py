"""Every reader and every command on small hostile inputs (issue 22): no input under 1 MB may take more
than 200 MB or 10 s, and each ends with an exit code and at most a clear line, never a traceback.

A seeded generator draws one batch of hostile documents (the same batch every run, three of each kind)
from building blocks that broke readers before: CPU lists and numbers beyond any machine, 1,000-deep XML
and JSON, binary bytes, over-long lines, huge counts in NCCL logs and nccl-tests tables, real pastes
repeated into hundreds of devices. Each is written under 1 MB and given to every command that reads a
file; the recorded-machine commands get the audit's bomb recordings. All of it runs under one subprocess
(``tests/hostile_driver.py``) with ``RLIMIT_AS`` = 512 MB, each command line in its own forked child,
timed, its peak RSS its own.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

from bounded import HOSTS, rewrite_recording
from test_security_archive import seesaw
from test_security_bounds import TEXT_CASES, _amplified, _bomb_cells

LIMIT_MB, PEAK_MB, CASE_S, MAX_INPUT = 512, 200, 10.0, 1 << 20
HERE = Path(__file__).resolve().parent

NUMBERS = ["0-40000000", "0-1048575", "9" * 4400, "-1", "nan", "inf", "1e308", "0x" + "f" * 5000,
           "18446744073709551616", "0-3," * 3000, "\x1b]0;t\x07", "\u202e", ""]


def _topo(n: int, cell: str, affinity: str) -> str:
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    rows = "".join(f"GPU{i}\t" + "\t".join(" X " if i == j else cell for j in range(n))
                   + f"\t{affinity}\t{affinity}\tN/A\n" for i in range(n))
    legend = "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    return head + rows + legend


def _deep_xml(kind: int, depth: int) -> str:
    return [
        '<?xml version="1.0"?><topology version="2.0">' + '<object type="Bridge">' * depth,
        '<system version="1"><cpu numaid="0" affinity="ff">' + '<pci busid="0000:01:00.0">' * depth,
        '<?xml version="1.0" ?><nvidia_smi_log><gpu id="00000000:17:00.0">' + "<a>" * depth,
    ][kind]


def _nccl(number: str, repeat: int) -> str:
    lines = [
        "h1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        f"h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks {number} cudaDev 0 busId 1000 - Init COMPLETE",
        f"h1:1:1 [0] NCCL INFO Channel {number}/{number} :    0   1",
        f"h1:1:1 [0] NCCL INFO Ring 00 : {' '.join(['0'] * 50)} {number}",
        f"h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> {number}[{number}] via P2P/IPC",
        f"h1:1:1 [0] NCCL INFO {number} coll channels, {number} nvls channels, {number} p2p channels",
        f"h1:1:1 [0] NCCL INFO Connected all rings, nNodes {number}",
    ]
    return "\n".join(lines * repeat) + "\n"


def _nccl_tests(number: str, repeat: int) -> str:
    head = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
            "   algbw   busbw #wrong\n")
    row = f"  {number}  {number}  float  sum  -1  {number}  {number}  {number}  0  1.0  1.0  1.0  0\n"
    return head + row * repeat + f"# Avg bus bandwidth    : {number}\n"


KINDS = ("topo", "xml", "json", "bytes", "line", "nccl", "nccltests", "amplified")
PASTES = sorted(str(p.relative_to(TEXT_CASES)) for p in TEXT_CASES.glob("*/*.txt"))


def hostile(rng: random.Random, kind: str) -> bytes:
    """One hostile document of ``kind`` under 1 MB, its sizes and numbers drawn from ``rng``."""
    number = rng.choice(NUMBERS)
    if kind == "topo":
        text = _topo(rng.randint(1, 16), rng.choice(["PIX", "NV18", number]), number)
    elif kind == "xml":
        text = _deep_xml(rng.randint(0, 2), rng.randint(65, 20_000))
    elif kind == "json":
        depth = rng.randint(900, 200_000)
        text = '{"schema": "topodoc.snapshot", "schema_version": 2, "pci": ' + "[" * depth
    elif kind == "bytes":
        return rng.randbytes(rng.randint(1, MAX_INPUT - 1))
    elif kind == "line":
        text = "NCCL INFO " + "x" * rng.randint(70_000, MAX_INPUT - 100) + "\n"
    elif kind == "nccl":
        text = _nccl(number, rng.randint(1, 200))
    elif kind == "amplified":  # a real paste repeated, one more device per copy
        text = _amplified(rng.choice(PASTES), rng.randint(10_000, MAX_INPUT - 120_000))
    else:
        text = _nccl_tests(number, rng.randint(1, 200))
    data = text.encode("utf-16") if rng.random() < 0.3 else text.encode("utf-8", "surrogatepass")
    return data[: MAX_INPUT - 1]


def _file_commands(path: str, events: str) -> list[list[str]]:
    return [["diagnose", path], ["topo", path], ["topo", "--from", path], ["logs", path],
            ["nccltests", path], ["diagnose", "--log", path, "--nccl-tests", path], ["fleet", path, path]]


def _recording_commands(path: str) -> list[list[str]]:
    return [["probe", "--from", path], ["topo", "--from", path], ["diagnose", "--from", path],
            ["bandwidth", "--from", path], ["export", "nccl-topo", "--from", path],
            ["agent", "--from", path, "--cycles", "1", "--listen", "off", "--interval", "1"]]


def _run_driver(cases: list[list[str]], tmp: Path) -> list[dict]:
    listing = tmp / "cases.json"
    listing.write_text(json.dumps(cases))

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MB << 20, LIMIT_MB << 20))

    env = {**os.environ, "TOPODOC_JOBS": "1", "NO_COLOR": "1", "XDG_CACHE_HOME": str(tmp / "cache")}
    proc = subprocess.run([sys.executable, str(HERE / "hostile_driver.py"), str(listing), str(CASE_S)],
                          capture_output=True, text=True, preexec_fn=cap, env=env, timeout=240, check=False)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(cases), (proc.returncode, proc.stderr[-2000:], rows[-1:] if rows else None)
    return rows


SEED, PER_KIND = 22, 3


def test_every_reader_and_command_stays_small_on_hostile_input(tmp_path):
    tmp = tmp_path
    rng = random.Random(SEED)  # a fixed batch: the same documents every run, varied across kinds
    docs = [hostile(rng, kind) for kind in KINDS for _ in range(PER_KIND)]
    cases = []
    for i, data in enumerate(docs):
        assert len(data) < MAX_INPUT
        path = tmp / f"in{i}.txt"
        path.write_bytes(data)
        cases += _file_commands(str(path), str(path))
    events = tmp / "events.jsonl"
    events.write_text('{"source": "kmsg", "data": ' + "[" * 50_000 + "\n")
    cases.append(["agent", "--from", "example:dgx-a100", "--replay-events", str(events), "--listen", "off",
                  "--cycles", "1", "--interval", "1"])
    bomb = rewrite_recording(HOSTS / "8xgpu-2s-pcie-switches" / "recording.tar.gz", tmp / "bomb.tar.gz",
                             {"commands.json": _bomb_cells})
    cases += _recording_commands(str(bomb)) + _recording_commands(str(seesaw(tmp / "seesaw.tar.gz")))
    rows = _run_driver(cases, tmp)
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    slow = [(r["argv"], r["wall"]) for r in rows if r["late"] or r["wall"] > CASE_S]
    big = [(r["argv"], r["peak_mb"]) for r in rows if r["peak_mb"] > PEAK_MB]
    bad = [(r["argv"], r["tail"]) for r in rows if r["bad"] or r["code"] not in (0, 1, 2)]
    assert not slow, slow
    assert not big, big[:1]
    assert not bad, bad[:3]
