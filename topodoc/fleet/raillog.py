"""The rail map from NCCL logs of many nodes: which NIC each local GPU uses on each host.

Read from the analyzer's public model only (``topodoc.parsers.nccl_log.analyze``): each network
connection line gives the rank, its host and NCCL's net device index; the rank's line gives its CUDA
device; the host's ``NET/IB : Using [i]name`` line names the device. The majority NIC set for each
local GPU index is the fleet's rail map; a host that uses another NIC for that GPU breaks it. A
connection whose two ends use different NICs crosses rails: normal on a fat tree, a spine detour on
a rail-optimised fabric, and a failure on a rail-only one.

This module states the facts (:class:`RailMap`: the map, its breaks, the cross-rail connections); the
judgement is the rules ``rail-map-broken`` and ``cross-rail-connections`` (:mod:`topodoc.rules.fleetrails`,
with docs and cases), run by ``fleet --logs`` with ``nccl-version-mismatch`` (:data:`LOG_RULES`) and by
``diagnose --log`` on any multi-node log.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass

from topodoc.logmodel import Evidence, LogAnalysis


class RailLogError(ValueError):
    """The logs could not be read or hold no NCCL line."""


LOG_RULES = ("rail-map-broken", "cross-rail-connections", "nccl-version-mismatch")


@dataclass(frozen=True)
class RailFinding:
    """A rule's finding over the fleet's logs, as the fleet report carries it."""

    severity: str
    rule: str
    subject: str
    message: str
    evidence: tuple[str, ...] = ()  # "file:line: text"


@dataclass(frozen=True)
class RailBreak:
    """One host whose GPU uses other NICs than most hosts use for that local GPU."""

    host: str
    gpu: str
    nics: str
    majority: str
    evidence: Evidence | None = None


@dataclass(frozen=True)
class HostRails:
    host: str
    nics: dict[str, str]  # local GPU (CUDA device) index -> NIC names used ("mlx5_0" or "mlx5_0+mlx5_1")
    transport: str | None = None
    gdr: bool | None = None
    nccl_versions: tuple[str, ...] = ()
    machines: int = 1  # >1: one host name covers several machines (told apart by address)


@dataclass(frozen=True)
class RailMap:
    majority: dict[str, str]  # local GPU index -> NIC names on most hosts
    hosts: tuple[HostRails, ...]
    cross_rail: int  # network connections whose ends use different NICs
    breaks: tuple[RailBreak, ...] = ()
    cross_sample: str | None = None  # "rank 0 on mlx5_0, rank 2 on mlx5_1"
    cross_evidence: tuple[Evidence, ...] = ()
    findings: tuple[RailFinding, ...] = ()  # the LOG_RULES' findings, filled by rail_map


def _files(paths: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for base, dirs, names in os.walk(path):
                dirs.sort()
                out.extend(os.path.join(base, n) for n in sorted(names) if not n.startswith("."))
        else:
            out.append(path)
    return out


def rail_map(paths: tuple[str, ...]) -> RailMap:
    """The rail map of the logs under ``paths`` with the findings of :data:`LOG_RULES` on them."""
    from dataclasses import replace

    from topodoc import catalogue
    from topodoc.parsers.nccl_log import LogInputError, analyze
    from topodoc.rules.engine import Facts, evaluate
    from topodoc.rules.registry import get

    files = _files(paths)
    if not files:
        raise RailLogError("--logs: no log files found")
    try:
        analysis = analyze(files, catalogue.scan_literals())
    except (LogInputError, OSError) as err:
        raise RailLogError(f"--logs: {err}") from err
    report = evaluate(Facts(logs=analysis), [get(rule_id) for rule_id in LOG_RULES])
    findings = tuple(
        RailFinding(
            f.severity.value, f.rule, f.subject, f.message, tuple(f"{e.where}: {e.value}" for e in f.evidence)
        )
        for f in report.findings
    )
    return replace(build(analysis), findings=findings)


def build(analysis: LogAnalysis) -> RailMap:
    dev_of = {(r.host, r.rank): r.cuda_dev for r in analysis.ranks}
    name_of = {(d.host, d.index): d.name for d in analysis.devices if d.index is not None and d.role == "hca"}
    used: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    proof: dict[tuple[str, str], Evidence] = {}
    nic_of_rank: dict[int, dict[int, str]] = defaultdict(dict)  # rank -> peer -> NIC name
    evidence_of: dict[tuple[int, int], Evidence] = {}
    for conn in analysis.connections:
        if not conn.transport.startswith("NET/") or conn.nic is None or conn.host is None:
            continue
        gpu = dev_of.get((conn.host, conn.rank))
        nic = name_of.get((conn.host, conn.nic), f"net{conn.nic}")
        if gpu is not None:
            used[conn.host][str(gpu)].add(nic)
            if conn.evidence is not None:
                proof.setdefault((conn.host, str(gpu)), conn.evidence)
        nic_of_rank[conn.rank][conn.peer] = nic
        if conn.evidence is not None:
            evidence_of[(conn.rank, conn.peer)] = conn.evidence
    hosts = _hosts(analysis, used)
    majority = _majority(hosts)
    cross, sample = _cross_rail(nic_of_rank, evidence_of)
    return RailMap(
        majority,
        hosts,
        cross,
        tuple(_breaks(hosts, majority, proof)),
        sample[0] if sample else None,
        tuple(e for e in sample[1:] if e is not None),
    )


def _hosts(analysis: LogAnalysis, used: dict[str, dict[str, set[str]]]) -> tuple[HostRails, ...]:
    summaries = {h.name: h for h in analysis.hosts}
    out = []
    for host in sorted(set(used) | set(summaries)):
        summary = summaries.get(host)
        nics = {
            gpu: "+".join(sorted(names))
            for gpu, names in sorted(used.get(host, {}).items(), key=lambda kv: int(kv[0]))
        }
        out.append(
            HostRails(
                host,
                nics,
                analysis.summary.transport,
                summary.gdr if summary else None,
                summary.nccl_versions if summary else (),
                summary.machines if summary else 1,
            )
        )
    return tuple(out)


def _majority(hosts: tuple[HostRails, ...]) -> dict[str, str]:
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for host in hosts:
        for gpu, nics in host.nics.items():
            votes[gpu][nics] += 1
    majority = {}
    for gpu, counter in votes.items():
        value, count = counter.most_common(1)[0]
        if count * 2 > sum(counter.values()):
            majority[gpu] = value
    return dict(sorted(majority.items(), key=lambda kv: int(kv[0])))


def _breaks(hosts: tuple[HostRails, ...], majority: dict[str, str], proof: dict[tuple[str, str], Evidence]):
    for host in hosts:
        for gpu, nics in host.nics.items():
            want = majority.get(gpu)
            if want is not None and nics != want:
                yield RailBreak(host.host, gpu, nics, want, proof.get((host.host, gpu)))


def _cross_rail(nic_of_rank: dict[int, dict[int, str]], evidence_of: dict[tuple[int, int], Evidence]):
    cross = 0
    sample: list = []
    for rank, peers in nic_of_rank.items():
        for peer, nic in peers.items():
            back = nic_of_rank.get(peer, {}).get(rank)
            if back is not None and back != nic and rank < peer:
                cross += 1
                if not sample:
                    sample = [
                        f"rank {rank} on {nic}, rank {peer} on {back}",
                        evidence_of.get((rank, peer)),
                        evidence_of.get((peer, rank)),
                    ]
    return cross, sample
