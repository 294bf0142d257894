"""Run every collector against one Host and assemble the :class:`~topodoc.model.Snapshot`.

Each collector module declares in its docstring exactly which paths, NVML calls and commands it
reads; this module only wires them together, in a fixed order (the recorder relies on the same
calls being made on replay).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

from topodoc import __version__, model
from topodoc.probe.host import Host
from topodoc.probe.hostinfo import collect_host
from topodoc.probe.kernel import collect_kernel
from topodoc.probe.nics import collect_net, collect_nics
from topodoc.probe.numa import collect_cpuset, collect_numa
from topodoc.probe.nvml_gpus import collect_nvml
from topodoc.probe.pci import collect_pci
from topodoc.probe.reading import Reader
from topodoc.probe.smi import collect_smi_topo


def collect(host: Host, source: str = "live") -> model.Snapshot:
    gaps: list[model.Gap] = []
    reader = Reader(host.fs, gaps)
    hostinfo = collect_host(reader)
    kernel = collect_kernel(reader)
    pci = collect_pci(reader)
    numa = collect_numa(reader)
    cpuset = collect_cpuset(reader)
    net = collect_net(reader)
    nics = collect_nics(reader, net)
    driver, gpus, pairs = collect_nvml(host.nvml, gaps)
    smi = collect_smi_topo(host.runner, gaps) if driver.nvml_available else None
    meta = host.meta or {}
    return model.Snapshot(
        source=source,
        topodoc_version=meta.get("topodoc_version", __version__),
        recorded_at=meta.get("recorded_at") or _now(),
        host=hostinfo,
        kernel=kernel,
        driver=driver,
        pci=pci,
        gpus=tuple(_pci_numa(g, pci) for g in gpus),
        gpu_pairs=pairs,
        nics=nics,
        net=net,
        numa=numa,
        process_cpuset=cpuset,
        smi_topo=smi,
        gaps=tuple(gaps),
    )


def _pci_numa(gpu: model.Gpu, pci: dict[str, model.PciDevice]) -> model.Gpu:
    """The GPU's CPU-side NUMA node is its PCI function's sysfs numa_node (NVML's NumaNodeId is the GPU
    memory's own node on coherent systems: `Gpu.gpu_numa_id`)."""
    device = pci.get(gpu.pci_address or "")
    if gpu.numa_node is None and device and device.numa_node is not None and device.numa_node >= 0:
        return dataclasses.replace(gpu, numa_node=device.numa_node)
    return gpu


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
