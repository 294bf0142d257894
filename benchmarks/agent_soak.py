"""Soak the agent: many cycles on a recording, with events, rotation and HTTP, watching time, memory and fds.

    python benchmarks/agent_soak.py [--cycles 10000] [--from example:dgx-a100] [--events-per-cycle 5]
                                    [--events-file-max-kb 64] [--no-http]

Each cycle is what the agent does every interval — probe, derive, evaluate, track findings — plus
``--events-per-cycle`` events handled as the main loop handles them (an Xid, an AER and a udev remove in
turn: parsed, joined to the topology, pushed through the ring buffer and counters, and appended to an
``--events-file`` that rotates at ``--events-file-max-kb``), a watched NCCL log that grows every cycle and is
rotated every 100 (re-analysed every 10), and — unless ``--no-http`` — real requests to the agent's HTTP
server on 127.0.0.1 with its bearer token (``/metrics``, ``/healthz``, ``/findings``, ``/events``,
``/snapshot``, redacted). Prints the cycle time (mean, p50, p95), the peak RSS and the open descriptors
over the 10% of cycles after warm-up (the first 10%) and the last 10%: RSS and fds must stay flat.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from topodoc.agent.runner import Agent, AgentConfig  # noqa: E402
from topodoc.agent.sources import RawEvent  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LOG = REPO / "fixtures" / "logs" / "ib-2node-gdr-srun.log"
TOKEN = "soak-" + "0" * 27
LINES = (
    "NVRM: Xid (PCI:0000:4e:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
    "0x00000000 0x00000000 0x00000000)",
    "pcieport 0000:01:00.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:01:00.0",
)
PATHS = ("/metrics", "/healthz", "/findings", "/events", "/snapshot")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--from", dest="source", default="example:dgx-a100")
    parser.add_argument("--events-per-cycle", type=int, default=5)
    parser.add_argument("--events-file-max-kb", type=int, default=64)
    parser.add_argument("--no-http", dest="http", action="store_false")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="topodoc-soak-"))
    try:
        return soak(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def soak(args, work: Path) -> int:
    (work / "token").write_text(TOKEN)
    log_text = LOG.read_text().splitlines(keepends=True)
    config = AgentConfig(source=args.source, listen=("127.0.0.1", 0) if args.http else None,
                         live_events=False, interval=60, events_file=str(work / "events.jsonl"),
                         events_file_max_bytes=args.events_file_max_kb * 1024,
                         watch_log=(str(work / "*.log"),), auth_token_file=str(work / "token"))
    agent = Agent(config)
    agent.start_http()
    port = agent.http.address[1] if agent.http else None
    process = psutil.Process()
    times, rss, cpu, fds, answers = [], [], [], [], {}
    for n in range(args.cycles):
        started, cpu_started = time.perf_counter(), time.process_time()
        agent.run_cycle()
        for k in range(args.events_per_cycle):
            agent._handle(_event(n * args.events_per_cycle + k))
        _grow_log(work, log_text, n)
        if n % 10 == 0:
            agent.poll_logs()
        if port is not None:
            for path in PATHS:
                key = (path, _get(port, path))
                answers[key] = answers.get(key, 0) + 1
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        rss.append(process.memory_info().rss)
        fds.append(process.num_fds())
    _report(args, times, rss, cpu, fds, agent, work, answers)
    if agent.http is not None:
        agent.http.stop()
    return 0


def _event(k: int) -> RawEvent:
    if k % 3 == 2:  # distinct devices: exercises the bounded counters
        device = f"0000:{k % 256:02x}:00.0"
        return RawEvent("udev", time.time(), action="remove", subsystem="pci", device=device)
    return RawEvent("kmsg", time.time(), line=LINES[k % 3])


def _grow_log(work: Path, lines: list[str], n: int) -> None:
    path = work / "job.log"
    if n % 100 == 99:
        path.rename(work / "job.log.1.gz")  # rotated away (a .gz: not followed)
    with path.open("a") as handle:
        handle.writelines(lines[(n % 100) * 5:(n % 100) * 5 + 5] or lines[:5])


def _get(port: int, path: str) -> int:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            reply.read()
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


def _report(args, times, rss, cpu, fds, agent: Agent, work: Path, answers: dict) -> None:
    tenth = max(1, len(times) // 10)
    print(f"agent soak: {len(times)} cycles on {args.source}, {args.events_per_cycle} events/cycle, "
          f"events file rotating at {args.events_file_max_kb} KiB, HTTP {'on' if args.http else 'off'}")
    parts = (("after warm-up", slice(tenth, 2 * tenth)), ("last 10%", slice(-tenth, None)))
    for label, part in parts:
        ordered = sorted(times[part])
        p50, p95 = ordered[len(ordered) // 2], ordered[max(0, int(len(ordered) * 0.95) - 1)]
        print(f"  {label:13}: cycle mean {statistics.mean(ordered) * 1e3:7.1f} ms, p50 {p50 * 1e3:7.1f} ms, "
              f"p95 {p95 * 1e3:7.1f} ms, CPU {statistics.mean(cpu[part]) * 1e3:6.1f} ms/cycle, "
              f"peak RSS {max(rss[part]) / 2**20:7.1f} MiB, fds {min(fds[part])}-{max(fds[part])}")
    deciles = [f"{max(rss[i * tenth:(i + 1) * tenth]) / 2**20:.1f}" for i in range(1, len(rss) // tenth)]
    print(f"  peak RSS per tenth after the first (MiB): {' '.join(deciles)}")
    files = sorted((p.name, p.stat().st_size) for p in work.iterdir() if p.name.startswith("events"))
    print(f"  events kept {len(agent.events.recent())} (ring), counter series {len(agent.events.counts())}, "
          f"tracked findings {len(agent.tracker.items())}, events files {files}")
    print(f"  HTTP answers {dict(sorted(answers.items()))}, agent errors {len(agent.view().errors)}")


if __name__ == "__main__":
    sys.exit(main())
