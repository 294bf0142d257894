"""NUMA and CPU placement rules: GPU and NIC on different nodes, unknown nodes, a cpuset off the GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.engine import Evidence, Facts, Hit, rule
from topodoc.rules.machine import (
    gpu_device,
    gpu_label,
    gpu_name,
    multi_numa,
    parse_cpulist,
    rail_pairs,
    rdma_nics,
    sysfs,
)


@rule(
    id="gpu-nic-numa-mismatch",
    title="GPU and its NIC on different NUMA nodes",
    severity="warning",
    tags=("numa", "rdma", "topology"),
    needs=("snapshot",),
    fix="move the NIC to a slot on the GPU's socket, or pin the rank's NIC with NCCL_IB_HCA to one "
    "on its node",
)
def gpu_nic_numa_mismatch(facts: Facts) -> Iterator[Hit]:
    snapshot = facts.snapshot
    split = [pair for pair in rail_pairs(snapshot) if _nodes(snapshot, pair)]
    if not split:
        return
    pairs = ", ".join(f"{gpu_name(p.gpu)}->{p.nic.name}" for p in split)
    first = split[0]
    gpu_node, nic_node = _nodes(snapshot, first)
    yield Hit(
        subject=pairs,
        message=f"{len(split)} GPU(s) have no NIC on their own NUMA node ({gpu_name(first.gpu)} is on node "
        f"{gpu_node}, {first.nic.name} on node {nic_node}): their network traffic crosses the inter-socket "
        "link and GPUDirect RDMA is off for them under NCCL's default GDR level",
        evidence=tuple(
            Evidence("sysfs", sysfs(addr, "numa_node"), str(snapshot.pci[addr].numa_node))
            for p in split[:2]
            for addr in (p.gpu.pci_address, p.nic.pci_address)
        ),
    )


def _nodes(snapshot, pair) -> tuple[int, int] | None:
    """The (GPU, NIC) NUMA nodes when both are known and differ."""
    gpu_node = snapshot.pci[pair.gpu.pci_address].numa_node
    nic_node = snapshot.pci[pair.nic.pci_address].numa_node
    if gpu_node is None or nic_node is None or gpu_node < 0 or nic_node < 0 or gpu_node == nic_node:
        return None
    return gpu_node, nic_node


@rule(
    id="numa-node-unknown",
    title="GPU or NIC with numa_node = -1 on a multi-socket machine",
    severity="warning",
    tags=("numa", "firmware"),
    needs=("snapshot",),
    fix='enable NUMA/ACPI SRAT ("NUMA per socket") in the BIOS; in a VM, ask for a NUMA-aware instance or '
    "give NCCL a topology file",
)
def numa_node_unknown(facts: Facts) -> Iterator[Hit]:
    snapshot = facts.snapshot
    if not multi_numa(snapshot):
        return
    devices = [(gpu_label(g), g.pci_address) for g in snapshot.gpus]
    devices += [(nic.name, nic.pci_address) for nic in rdma_nics(snapshot)]
    unknown = [
        (label, addr)
        for label, addr in devices
        if addr in snapshot.pci and snapshot.pci[addr].numa_node == -1
    ]
    if unknown:
        yield Hit(
            subject=", ".join(label for label, _addr in unknown[:6]),
            message=f"{len(unknown)} device(s) report numa_node -1 on a "
            f"{len(snapshot.numa) or 2}-node machine: "
            "NCCL and the OS cannot place their threads and buffers on the right socket",
            evidence=tuple(Evidence("sysfs", sysfs(addr, "numa_node"), "-1") for _label, addr in unknown[:4]),
        )


@rule(
    id="cpuset-excludes-gpu-cpus",
    title="The process cpuset excludes a GPU's local CPUs",
    severity="warning",
    tags=("numa", "affinity", "container"),
    needs=("snapshot",),
    fix="give the job CPUs on each GPU's socket (Slurm --cpu-bind / cgroup cpuset, docker --cpuset-cpus)",
)
def cpuset_excludes_gpu_cpus(facts: Facts) -> Iterator[Hit]:
    snapshot = facts.snapshot
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
                message=f"the process may only run on CPUs {snapshot.process_cpuset}, none of which "
                "are local to "
                f"{gpu_name(gpu)} ({local_text}): NCCL logs 'Affinity for GPU {gpu.index} is empty' and its "
                "proxy threads run on the far socket",
                evidence=(
                    Evidence("procfs", "/proc/self/status Cpus_allowed_list", snapshot.process_cpuset or ""),
                    Evidence("sysfs", sysfs(gpu.pci_address or "?", "local_cpulist"), local_text or ""),
                ),
            )


RULES = (gpu_nic_numa_mismatch, numa_node_unknown, cpuset_excludes_gpu_cpus)
