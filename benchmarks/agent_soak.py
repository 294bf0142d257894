"""Soak the agent: many cycles on a recording, with events and exporters, watching time and memory.

    python benchmarks/agent_soak.py [--cycles 10000] [--from example:dgx-a100] [--events-per-cycle 5]

Each cycle is what the agent does every interval — probe, derive, evaluate, track findings — plus
``--events-per-cycle`` kernel-log events (an Xid, an AER and a udev remove in turn, joined to the topology
and pushed through the ring buffer and counters), one ``/metrics`` render and one ``/findings`` document.
Prints the cycle time (mean, p50, p95), the CPU time per cycle, the peak RSS and the open file descriptors
over the first and the last 10% of cycles: RSS and fds must stay flat (bounded buffers, nothing leaked), and
the cycle time must stay well under a 60 s interval.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from topodoc.agent.events import from_kmsg, from_udev  # noqa: E402
from topodoc.agent.runner import Agent, AgentConfig  # noqa: E402
from topodoc.report.prometheus import render  # noqa: E402

LINES = (
    "NVRM: Xid (PCI:0000:4e:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
    "0x00000000 0x00000000 0x00000000)",
    "pcieport 0000:01:00.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:01:00.0",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--from", dest="source", default="example:dgx-a100")
    parser.add_argument("--events-per-cycle", type=int, default=5)
    args = parser.parse_args()
    agent = Agent(AgentConfig(source=args.source, listen=None, live_events=False, interval=60))
    process = psutil.Process()
    times, rss, cpu, fds = [], [], [], []
    for n in range(args.cycles):
        started, cpu_started = time.perf_counter(), time.process_time()
        cycle = agent.run_cycle()
        for k in range(args.events_per_cycle):
            _event(agent, cycle, n * args.events_per_cycle + k)
        render(agent.view())
        agent.findings_document()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        rss.append(process.memory_info().rss)
        fds.append(process.num_fds())
    _report(args, times, rss, cpu, fds, agent)
    return 0


def _event(agent: Agent, cycle, k: int) -> None:
    if k % 3 == 2:
        event = from_udev("remove", "pci", f"0000:{k % 256:02x}:00.0", time.time(), "soak", cycle.topology,
                          cycle.snapshot)  # distinct devices: exercises the bounded counters
    else:
        event = from_kmsg(LINES[k % 3], time.time(), "soak", cycle.topology, cycle.snapshot)
    agent.events.add(event)


def _report(args, times: list[float], rss: list[int], cpu: list[float], fds: list[int], agent: Agent) -> None:
    tenth = max(1, len(times) // 10)
    print(f"agent soak: {len(times)} cycles on {args.source}, {args.events_per_cycle} events/cycle")
    parts = (("first 10%", slice(None, tenth)), ("last 10%", slice(-tenth, None)))
    for label, cut in parts:
        part = times[cut]
        ordered = sorted(part)
        p50, p95 = ordered[len(part) // 2], ordered[max(0, int(len(part) * 0.95) - 1)]
        print(f"  {label:9}: cycle mean {statistics.mean(part) * 1e3:7.1f} ms, p50 {p50 * 1e3:7.1f} ms, "
              f"p95 {p95 * 1e3:7.1f} ms, CPU {statistics.mean(cpu[cut]) * 1e3:7.1f} ms/cycle, "
              f"peak RSS {max(rss[cut]) / 2**20:7.1f} MiB, fds {min(fds[cut])}-{max(fds[cut])}")
    print(f"  events kept {len(agent.events.recent())} (ring), counter series {len(agent.events.counts())}, "
          f"tracked findings {len(agent.tracker.items())}")


if __name__ == "__main__":
    sys.exit(main())
