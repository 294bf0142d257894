"""NVLink-C2C on Grace systems (GH200, GB200): the GPU-CPU link and NCCL's C2C and P2C path types.

A Grace-coupled GPU reaches its local CPU (NUMA node) over NVLink-C2C, which NCCL adds as a
``LINK_C2C`` from the NVML C2C fields (``ncclTopoAddC2c``, priced ``bw x count / 1000`` GB/s), so its
GPU-to-CPU path type is ``C2C`` rather than ``PHB``. NCCL >= 2.27 (``PATH_P2C`` in
``src/include/graph.h``: "a GPU and a NIC using the C2C connection to the CPU and the PCIe connection
to the NIC") then turns a GPU-NIC path that would be ``PHB`` -- the NIC hangs off that same CPU -- into
``P2C``: traffic goes GPU -C2C-> CPU -PCIe-> NIC instead of through the GPU's own PCIe link. A NIC on
the other socket stays ``SYS``. nvidia-smi knows nothing of this: its matrix cell keeps the PCIe class.
REFERENCE.md §3.1 (path types per NCCL version), §3.3 (C2C bandwidth), ANCHORS.md §4.
"""

from __future__ import annotations

from dataclasses import replace

from topodoc.topology import pcitree
from topodoc.topology.types import C2C, HOST_BRIDGE, NUMA, Connection, GpuEnd, Hop, Link, Route


def cpu_path(gpu: GpuEnd) -> str | None:
    """NCCL's path type from a GPU to its local CPU: C2C over NVLink-C2C, PHB over PCIe."""
    if gpu.c2c_links:
        return "C2C"
    return "PHB" if gpu.pci_address else None


def c2c_link(gpu: GpuEnd, cpu: Hop) -> Link:
    return Link(kind=C2C, a=gpu.name, b=cpu.id, bandwidth_gbps=gpu.c2c_gbps, max_bandwidth_gbps=gpu.c2c_gbps,
                c2c_links=gpu.c2c_links)


def apply_p2c(conn: Connection, gpu: GpuEnd, gpu_hop: Hop, cpu: Hop) -> Connection:
    """``conn`` (GPU -> NIC) as NCCL >= 2.27 takes it when the GPU has C2C to the NIC's CPU."""
    if not gpu.c2c_links or conn.nccl != "PHB" or conn.pcie is None:
        return conn
    hops = conn.pcie.hops
    kinds = [hop.kind for hop in hops]
    if NUMA in kinds:  # GPU and NIC on different host bridges: from the CPU on
        tail = hops[kinds.index(NUMA):]
    elif HOST_BRIDGE in kinds:  # under one host bridge: the CPU sits above it
        tail = (cpu, *hops[kinds.index(HOST_BRIDGE):])
    else:
        return conn
    ids = {hop.id for hop in tail}
    links = (c2c_link(gpu, tail[0]), *(ln for ln in conn.pcie.links if ln.a in ids and ln.b in ids))
    return replace(conn, nccl="P2C", route=Route((gpu_hop, *tail), links, pcitree.bottleneck(links)))
