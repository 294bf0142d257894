"""NUMA and CPU placement rules: GPU and NIC on different nodes, unknown nodes, a cpuset off the GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.model import Snapshot
from topodoc.rules.common import shortlist, snapshot_rule, sysfs_evidence
from topodoc.rules.engine import Evidence, Hit
from topodoc.rules.machine import (
    RailPair,
    gpu_device,
    gpu_label,
    gpu_name,
    multi_numa,
    parse_cpulist,
    rail_names,
    rail_pairs,
    rdma_nics,
)


@snapshot_rule(
    "gpu-nic-numa-mismatch", "warning", ("numa", "rdma", "topology"),
    title="GPU and its NIC on different NUMA nodes",
    fix="move the NIC to a slot on the GPU's socket, or pin the rank's NIC with NCCL_IB_HCA to one "
    "on its node",
)
def gpu_nic_numa_mismatch(snapshot: Snapshot) -> Iterator[Hit]:
    split = [pair for pair in rail_pairs(snapshot) if _nodes(snapshot, pair)]
    if not split:
        return
    first = split[0]
    gpu_node, nic_node = _nodes(snapshot, first)
    yield Hit(
        subject=rail_names(split),
        message=f"{len(split)} GPU(s) have no NIC on their own NUMA node ({gpu_name(first.gpu)} is on node "
        f"{gpu_node}, {first.nic.name} on node {nic_node}): their network traffic crosses the inter-socket "
        "link and GPUDirect RDMA is off for them under NCCL's default GDR level",
        evidence=tuple(
            sysfs_evidence(addr, "numa_node", str(snapshot.pci[addr].numa_node))
            for p in split[:2]
            for addr in (p.gpu.pci_address, p.nic.pci_address)
        ),
    )


def _nodes(snapshot: Snapshot, pair: RailPair) -> tuple[int, int] | None:
    """The (GPU, NIC) NUMA nodes when both are known and differ."""
    gpu_node = snapshot.pci[pair.gpu.pci_address].numa_node
    nic_node = snapshot.pci[pair.nic.pci_address].numa_node
    if gpu_node is None or nic_node is None or gpu_node < 0 or nic_node < 0 or gpu_node == nic_node:
        return None
    return gpu_node, nic_node


@snapshot_rule(
    "numa-node-unknown", "warning", ("numa", "firmware"),
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


@snapshot_rule(
    "cpuset-excludes-gpu-cpus", "warning", ("numa", "affinity", "container"),
    title="The process cpuset excludes a GPU's local CPUs",
    fix="give the job CPUs on each GPU's socket (Slurm --cpu-bind / cgroup cpuset, docker --cpuset-cpus)",
)
def cpuset_excludes_gpu_cpus(snapshot: Snapshot) -> Iterator[Hit]:
    allowed = parse_cpulist(snapshot.process_cpuset)
    if not allowed:
        return
    for gpu in snapshot.gpus:
        device = gpu_device(snapshot, gpu)
        local_text = (device.local_cpulist if device else None) or gpu.cpu_affinity
        local = parse_cpulist(local_text)
        if local and not local & allowed:
            yield Hit(
                subject=gpu_label(gpu),
                message=f"the process may only run on CPUs {snapshot.process_cpuset}, none of which are "
                f"local to {gpu_name(gpu)} ({local_text}): NCCL logs 'Affinity for GPU {gpu.index} is empty' "
                "and its proxy threads run on the far socket",
                evidence=(
                    Evidence("procfs", "/proc/self/status Cpus_allowed_list", snapshot.process_cpuset or ""),
                    sysfs_evidence(gpu.pci_address or "?", "local_cpulist", local_text or ""),
                ),
            )


RULES = (gpu_nic_numa_mismatch, numa_node_unknown, cpuset_excludes_gpu_cpus)
