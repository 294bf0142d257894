"""NUMA and CPU placement rules: GPU and NIC on different nodes, unknown nodes, a cpuset off the GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.model import Snapshot
from topodoc.rules.common import shortlist, sysfs_evidence
from topodoc.rules.engine import Evidence, Hit, Severity, rule
from topodoc.rules.machine import (
    gpu_device,
    gpu_label,
    gpu_name,
    multi_numa,
    parse_cpulist,
    rdma_nics,
)
from topodoc.topology import Topology, rails
from topodoc.topology.rails import RailPair, rail_names, rail_pairs


@rule(
    "gpu-nic-numa-mismatch", "warning", ("numa", "rdma", "topology"),
    reads=("placement", "nics", "numa"),
    title="GPU and its NIC on different NUMA nodes",
    fix="move the NIC to a slot on the GPU's socket, or pin the rank's NIC with NCCL_IB_HCA to one "
    "on its node",
)
def gpu_nic_numa_mismatch(snapshot: Snapshot, topology: Topology) -> Iterator[Hit]:
    pairs = rail_pairs(topology)
    split = [pair for pair in pairs if _nodes(snapshot, pair)]
    if not split:
        return
    first = split[0]
    gpu_node, nic_node = _nodes(snapshot, first)
    yield Hit(
        subject=rail_names(split),
        message=f"{len(split)} GPU(s) get an RDMA NIC on another NUMA node when each GPU takes its own "
        "nearest NIC (rail pairing, shared only when NICs run out): "
        f"{first.gpu.name} on node {gpu_node} gets {first.nic.device} on node {nic_node} ({first.path}); "
        + _local_choice(snapshot, topology, pairs, first),
        evidence=tuple(
            sysfs_evidence(addr, "numa_node", str(snapshot.pci[addr].numa_node))
            for p in split[:2]
            for addr in (p.gpu.pci_address, p.nic.pci_address)
        ),
    )


def _local_choice(snapshot: Snapshot, topology: Topology, pairs: list[RailPair], pair: RailPair) -> str:
    """What the GPU's own NUMA node offers instead: no RDMA NIC at all, or NICs paired with other GPUs."""
    node = snapshot.pci[pair.gpu.pci_address].numa_node
    owners = {other.nic.device: other.gpu.name for other in pairs if other.gpu != pair.gpu}
    local = [
        nic.device
        for nic in rails.rdma_nics(topology)
        if nic.pci_address in snapshot.pci and snapshot.pci[nic.pci_address].numa_node == node
    ]
    cost = (
        "the GPU's network traffic crosses NUMA nodes through the CPU, with GPUDirect RDMA off under NCCL's "
        "default GDR level"
    )
    if not local:
        return f"node {node} has no RDMA NIC at all, so {cost}"
    taken = ", ".join(f"{name} (paired with {owners[name]})" if name in owners else name for name in local)
    return (
        f"node {node}'s RDMA NIC(s) {taken} serve other GPUs: NCCL either shares them or uses the far NIC, "
        f"and then {cost}"
    )


def _nodes(snapshot: Snapshot, pair: RailPair) -> tuple[int, int] | None:
    """The (GPU, NIC) NUMA nodes when both are known and differ."""
    gpu_node = snapshot.pci[pair.gpu.pci_address].numa_node
    nic_node = snapshot.pci[pair.nic.pci_address].numa_node
    if gpu_node is None or nic_node is None or gpu_node < 0 or nic_node < 0 or gpu_node == nic_node:
        return None
    return gpu_node, nic_node


@rule(
    "numa-node-unknown", "warning", ("numa", "firmware"),
    reads=("numa",),
    title="GPU or NIC with numa_node = -1 on a multi-socket machine",
    fix='enable NUMA/ACPI SRAT ("NUMA per socket") in the BIOS; in a VM, ask for a NUMA-aware instance or '
    "give NCCL a topology file",
)
def numa_node_unknown(snapshot: Snapshot) -> Iterator[Hit]:
    if not multi_numa(snapshot):
        return
    devices = [(gpu_label(g), g.pci_address) for g in snapshot.gpus]
    devices += [(nic.name, nic.pci_address) for nic in rdma_nics(snapshot)]
    unknown = [(label, a) for label, a in devices if a in snapshot.pci and snapshot.pci[a].numa_node == -1]
    if unknown:
        yield Hit(
            subject=shortlist([label for label, _addr in unknown], 6),
            message=f"{len(unknown)} device(s) report numa_node -1 on a {len(snapshot.numa) or 2}-node "
            "machine: NCCL and the OS cannot place their threads and buffers on the right socket",
            evidence=tuple(sysfs_evidence(addr, "numa_node", "-1") for _label, addr in unknown[:4]),
        )


@rule(
    "cpuset-excludes-gpu-cpus", "warning", ("numa", "affinity", "container"),
    reads=("cpuset",),
    title="The process cpuset excludes a GPU's local CPUs",
    fix="give the job CPUs on each GPU's socket (Slurm --cpu-bind / cgroup cpuset, docker --cpuset-cpus)",
)
def cpuset_excludes_gpu_cpus(snapshot: Snapshot) -> Iterator[Hit]:
    allowed = parse_cpulist(snapshot.process_cpuset)
    if not allowed:
        return
    whose, caveat, confidence = _whose_cpuset(snapshot)
    none: dict[str, list[str]] = {}  # local cpulist -> GPUs none of whose local CPUs are allowed
    some: dict[str, list[str]] = {}  # ... of which only some are allowed
    for gpu in snapshot.gpus:
        device = gpu_device(snapshot, gpu)
        local_text = (device.local_cpulist if device else None) or gpu.cpu_affinity
        local = parse_cpulist(local_text)
        if local and not local & allowed:
            none.setdefault(local_text or "", []).append(gpu_name(gpu))
        elif local and not local <= allowed:
            some.setdefault(local_text or "", []).append(gpu_name(gpu))
    if none:
        yield _cpuset_hit(snapshot, none, whose, caveat, confidence, partial=False)
    if some:
        yield _cpuset_hit(snapshot, some, whose, caveat, confidence, partial=True)


def _cpuset_hit(snapshot: Snapshot, groups: dict[str, list[str]], whose: str, caveat: str,
                confidence: float, partial: bool) -> Hit:
    """One finding for every GPU in the same situation; evidence per distinct local CPU list."""
    gpus = [name for names in groups.values() for name in names]
    local = "; ".join(f"{', '.join(names)}: {text}" for text, names in groups.items())
    address = {gpu_name(g): g.pci_address or "?" for g in snapshot.gpus}
    evidence = (Evidence("procfs", "/proc/self/status Cpus_allowed_list", snapshot.process_cpuset or ""),)
    evidence += tuple(sysfs_evidence(address[names[0]], "local_cpulist", text)
                      for text, names in groups.items())
    if partial:
        message = (f"{whose} may only run on CPUs {snapshot.process_cpuset}, which leaves out some of the "
                   f"local CPUs of {len(gpus)} GPU(s) ({local}): NCCL binds each rank to the allowed part of "
                   f"its GPU's local CPUs, so proxy and data threads share fewer cores; {caveat}")
        return Hit(shortlist(gpus, 8), message, evidence, severity=Severity.INFO, confidence=confidence)
    message = (f"{whose} may only run on CPUs {snapshot.process_cpuset}, none of which are local to "
               f"{len(gpus)} GPU(s) ({local}): a job confined like this gets NCCL's 'Affinity for GPU N is "
               f"empty' and proxy threads on the far socket; {caveat}")
    return Hit(shortlist(gpus, 8), message, evidence, confidence=confidence)


INSIDE_JOB = "inside the job's cgroup or container (srun, docker exec, kubectl exec) to check the job's own"


def _whose_cpuset(snapshot: Snapshot) -> tuple[str, str, float]:
    """Whose cpuset the snapshot holds, what that means for a job, and the confidence: a live probe reads
    this process's (run where the user chose); a recording holds its recorder's, with nothing saying the
    recorder ran inside a job."""
    if snapshot.source == "live":
        return "this topodoc process", f"this is topodoc's own cpuset: run it {INSIDE_JOB}", 1.0
    when = f" at {snapshot.recorded_at}" if snapshot.recorded_at else ""
    caveat = f"the recording does not say whether that process ran inside a job: record {INSIDE_JOB}"
    return f"the process that made the recording {snapshot.source}{when}", caveat, 0.5


RULES = (gpu_nic_numa_mismatch, numa_node_unknown, cpuset_excludes_gpu_cpus)
