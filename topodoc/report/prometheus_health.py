"""Prometheus metrics of the health checks (GPU memory, clocks, temperature, power, NVLink and IB/RoCE
port error counters, fabric, lost GPUs), rendered from the last cycle's snapshot. Part of
:mod:`topodoc.report.prometheus` (which lists :data:`METRICS` with its own).

GPU series carry dcgm-exporter's labels so the two join without ``label_replace``: ``gpu`` (the NVML
index), ``UUID``, ``pci_bus_id`` (NVML's spelling, ``00000000:3A:00.0``) and ``device`` (``nvidia<index>``:
dcgm-exporter's ``nvidia<minor number>``, the same name whenever the minor number is the index, the
usual case). Series are stable: a state is a value, never a label that changes.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from topodoc import pciaddr

GPU = ["gpu", "UUID", "pci_bus_id", "device"]
CLOCK_REASONS = ("hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal", "sw_power_cap", "gpu_idle",
                 "applications_clocks", "sync_boost", "display_clocks")
FABRIC_STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3}
METRICS = (
    ("topodoc_gpu_lost", "gauge", "1 when NVML said GPU_IS_LOST for this GPU in the last cycle, else 0."),
    ("topodoc_gpu_ecc_errors", "counter",
     "ECC errors by type (corrected/uncorrected) and scope (volatile: since the driver loaded; aggregate: "
     "over the GPU's life)."),
    ("topodoc_gpu_ecc_memory_errors", "counter",
     "Aggregate ECC errors by type and memory (sram/dram) where the GPU counts them apart."),
    ("topodoc_gpu_retired_pages", "gauge",
     "Pages retired, by cause (sbe: multiple single-bit, dbe: double-bit)."),
    ("topodoc_gpu_retired_pages_pending", "gauge",
     "1 when a page retirement waits for the driver to reload."),
    ("topodoc_gpu_remapped_rows", "gauge", "Memory rows remapped, by cause (corrected/uncorrected errors)."),
    ("topodoc_gpu_row_remap_pending", "gauge", "1 when a row remap waits for a GPU reset."),
    ("topodoc_gpu_row_remap_failed", "gauge", "1 when a row remap ever failed (NVIDIA: replace the GPU)."),
    ("topodoc_gpu_row_remap_banks", "gauge",
     "Memory banks by spare rows left (availability max/high/partial/low/none)."),
    ("topodoc_gpu_clock_event_active", "gauge",
     "1 while a clock event reason holds the GPU's clocks, else 0."),
    ("topodoc_gpu_temperature_celsius", "gauge", "GPU die temperature."),
    ("topodoc_gpu_slowdown_temperature_celsius", "gauge", "Temperature at which the GPU slows down."),
    ("topodoc_gpu_power_watts", "gauge", "GPU power draw."),
    ("topodoc_gpu_power_limit_watts", "gauge", "GPU enforced power limit."),
    ("topodoc_gpu_fabric_state", "gauge",
     "GPU fabric registration state (0 not supported, 1 not started, 2 in progress, 3 completed)."),
    ("topodoc_gpu_fabric_status", "gauge", "GPU fabric registration status (NVML return code; 0 = success)."),
    ("topodoc_gpu_fabric_info", "gauge", "GPU fabric clique and cluster UUID (value 1)."),
    ("topodoc_nvlink_errors", "counter",
     "NVLink error counters by link and counter (replay, recovery, crc_flit, crc_data), since the driver "
     "loaded; peer names the GPU or NVSwitch at the other end."),
    ("topodoc_nic_port_errors", "counter",
     "IB/RoCE port error counters (sysfs counters and hw_counters) by counter, since the driver loaded."),
    ("topodoc_nic_rail_info", "gauge",
     "The GPU(s) whose rail a NIC is (value 1), with the GPU's dcgm-exporter labels, to join port errors "
     "with GPUs."),
)
_HELP = {name: text for name, _, text in METRICS}


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _HELP[name], labels=labels)


def _counter(name: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, _HELP[name], labels=labels)


def gpu_labels(gpu) -> list[str]:
    address = pciaddr.try_normalize(gpu.pci_address)
    bus_id = pciaddr.parse(address).nvml if address else ""
    return [str(gpu.index), gpu.uuid or "", bus_id, f"nvidia{gpu.index}"]


def collect(view):
    cycle = view.cycle
    snap = cycle.snapshot if cycle is not None else None
    gpus = snap.gpus if snap is not None else ()
    yield from _memory(gpus)
    yield from _clocks(gpus)
    yield from _fabric(gpus)
    yield _nvlink_errors(gpus)
    yield from _ports(snap, cycle.topology if cycle is not None else None)


def _memory(gpus):
    lost = _gauge("topodoc_gpu_lost", GPU)
    ecc = _counter("topodoc_gpu_ecc_errors", [*GPU, "type", "scope"])
    memory = _counter("topodoc_gpu_ecc_memory_errors", [*GPU, "type", "memory"])
    retired = _gauge("topodoc_gpu_retired_pages", [*GPU, "cause"])
    retired_pending = _gauge("topodoc_gpu_retired_pages_pending", GPU)
    rows = _gauge("topodoc_gpu_remapped_rows", [*GPU, "cause"])
    pending = _gauge("topodoc_gpu_row_remap_pending", GPU)
    failed = _gauge("topodoc_gpu_row_remap_failed", GPU)
    banks = _gauge("topodoc_gpu_row_remap_banks", [*GPU, "availability"])
    for gpu in gpus:
        key = gpu_labels(gpu)
        lost.add_metric(key, 1 if gpu.lost else 0)
        h = gpu.health
        if h is None:
            continue
        for kind in ("corrected", "uncorrected"):
            for scope in ("volatile", "aggregate"):
                _add(ecc, [*key, kind, scope], getattr(h, f"ecc_{scope}_{kind}"))
            for where in ("sram", "dram"):
                _add(memory, [*key, kind, where], getattr(h, f"ecc_{where}_{kind}"))
        _add(retired, [*key, "sbe"], h.retired_pages_sbe)
        _add(retired, [*key, "dbe"], h.retired_pages_dbe)
        _add(retired_pending, key, h.retired_pages_pending)
        _add(rows, [*key, "corrected"], h.remapped_rows_corrected)
        _add(rows, [*key, "uncorrected"], h.remapped_rows_uncorrected)
        _add(pending, key, h.remap_pending)
        _add(failed, key, h.remap_failed)
        for availability, count in (h.remap_histogram or {}).items():
            banks.add_metric([*key, availability], count)
    return [lost, ecc, memory, retired, retired_pending, rows, pending, failed, banks]


def _clocks(gpus):
    active = _gauge("topodoc_gpu_clock_event_active", [*GPU, "reason"])
    temperature = _gauge("topodoc_gpu_temperature_celsius", GPU)
    slowdown = _gauge("topodoc_gpu_slowdown_temperature_celsius", GPU)
    power = _gauge("topodoc_gpu_power_watts", GPU)
    limit = _gauge("topodoc_gpu_power_limit_watts", GPU)
    for gpu in gpus:
        h = gpu.health
        if h is None:
            continue
        key = gpu_labels(gpu)
        if h.clock_events is not None:
            for reason in CLOCK_REASONS:  # every reason always present: 0 -> 1 is a value change
                active.add_metric([*key, reason], 1 if reason in h.clock_events else 0)
        _add(temperature, key, h.temperature_c)
        _add(slowdown, key, h.slowdown_temperature_c)
        _add(power, key, h.power_w)
        _add(limit, key, h.power_limit_w)
    return [active, temperature, slowdown, power, limit]


def _fabric(gpus):
    state = _gauge("topodoc_gpu_fabric_state", GPU)
    status = _gauge("topodoc_gpu_fabric_status", GPU)
    info = _gauge("topodoc_gpu_fabric_info", [*GPU, "clique_id", "cluster_uuid"])
    for gpu in gpus:
        fabric = gpu.fabric
        if fabric is None:
            continue
        key = gpu_labels(gpu)
        if fabric.state in FABRIC_STATES:
            state.add_metric(key, FABRIC_STATES[fabric.state])
        _add(status, key, fabric.status)
        info.add_metric([*key, str(fabric.clique_id if fabric.clique_id is not None else ""),
                         fabric.cluster_uuid or ""], 1)
    return [state, status, info]


def _nvlink_errors(gpus):
    by_address = {g.pci_address: g for g in gpus if g.pci_address}
    errors = _counter("topodoc_nvlink_errors", [*GPU, "link", "counter", "peer"])
    for gpu in gpus:
        for link in gpu.nvlinks:
            peer_gpu = by_address.get(link.remote_pci_address)
            peer = f"GPU{peer_gpu.index}" if peer_gpu else (link.remote_type or "unknown")
            for counter, value in link.errors.items():
                errors.add_metric([*gpu_labels(gpu), str(link.link), counter, peer], value)
    return errors


def _ports(snap, topology):
    from topodoc.topology import rails

    errors = _counter("topodoc_nic_port_errors", ["nic", "port", "counter"])
    rail = _gauge("topodoc_nic_rail_info", ["nic", *GPU])
    if snap is None:
        return [errors, rail]
    for nic in snap.nics:
        for port in nic.ports:
            for counter, value in port.counters.items():
                errors.add_metric([nic.name, str(port.port), counter], value)
    if topology is not None:
        by_index = {g.index: g for g in snap.gpus}
        for pair in rails.rail_pairs(topology):
            gpu = by_index.get(pair.gpu.index)
            if gpu is not None:
                rail.add_metric([pair.nic.device, *gpu_labels(gpu)], 1)
    return [errors, rail]


def _add(family, labels: list[str], value) -> None:
    if value is not None:
        family.add_metric(labels, float(value))
