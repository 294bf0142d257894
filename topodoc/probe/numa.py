"""NUMA nodes and the current process's CPU set.

Reads: ``/sys/devices/system/node`` (listing, ``node<N>`` entries), and per node
``/sys/devices/system/node/node<N>/cpulist``, ``.../distance`` (the SLIT row, 10 = local),
``.../meminfo`` (``Node N MemTotal: <kB> kB``); ``/proc/self/status`` (``Cpus_allowed_list``, the
cpuset the kernel enforces on this process — the same set ``psutil.Process().cpu_affinity()``
returns, read as a file so that it records and replays). A kernel without NUMA support has no
``node`` directory: that is one Gap, and an empty node list.
"""

from __future__ import annotations

import re

from topodoc.model import NumaNode
from topodoc.probe.reading import Reader, format_cpulist, parse_cpulist, parse_int

NODES = "/sys/devices/system/node"
NODE = re.compile(r"^node([0-9]{1,9})$")


def collect_numa(reader: Reader) -> tuple[NumaNode, ...]:
    names = reader.listdir(NODES, "NUMA nodes")
    numbers = sorted(int(m.group(1)) for m in map(NODE.match, names) if m)
    return tuple(_node(reader, n) for n in numbers)


def _node(reader: Reader, node: int) -> NumaNode:
    base = f"{NODES}/node{node}"
    cpus = reader.parsed(f"{base}/cpulist", f"cpulist of NUMA node {node}", parse_cpulist)
    distances = reader.parsed(f"{base}/distance", f"distances of NUMA node {node}", _distances)
    memory = reader.parsed(f"{base}/meminfo", f"memory of NUMA node {node}", mem_total_kb)
    return NumaNode(
        node=node,
        cpulist=format_cpulist(cpus) if cpus is not None else None,
        memory_total_kb=memory,
        distances=tuple(distances or ()),
    )


def _distances(text: str) -> list[int]:
    return [parse_int(word) for word in text.split()]


def mem_total_kb(text: str) -> int:
    """``Node 0 MemTotal:       4024524 kB`` -> 4024524."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] == "MemTotal:":
            return parse_int(words[3])
    raise ValueError("no MemTotal line")


def collect_cpuset(reader: Reader) -> str | None:
    return reader.parsed("/proc/self/status", "process cpuset", _allowed_list)


def _allowed_list(text: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "Cpus_allowed_list":
            return format_cpulist(parse_cpulist(value.strip()))
    raise ValueError("no Cpus_allowed_list line")
