"""Prometheus exposition of the agent's state (``/metrics`` and ``--textfile``), with prometheus-client.

Pure: :func:`render` turns an agent :class:`~topodoc.agent.runner.View` into the text format; it never
reads the machine. Names follow Prometheus conventions: ``topodoc_`` prefix, base units (seconds,
bytes), ``_total`` for counters, ``_info`` for 1-valued label carriers; a state is a value, never a label
that changes (a new label value is a new series). The agent's own CPU, memory and file descriptors are
the standard ``process_*`` metrics of prometheus_client's ProcessCollector. Every metric is listed in
:data:`METRICS` (name, type, help) and documented in docs/AGENT.md; a test checks both agree.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from topodoc.report import prometheus_health

METRICS = (
    ("topodoc_build_info", "gauge", "topodoc version (value 1)."),
    ("topodoc_fingerprint_info", "gauge",
     "Hash of the node properties that matter to NCCL (topodoc fleet's fingerprint; value 1): nodes that "
     "should be alike share it."),
    ("topodoc_agent_start_time_seconds", "gauge", "When the agent started (Unix time)."),
    ("topodoc_probe_runs", "counter", "Cycles (probe, derive, evaluate) run."),
    ("topodoc_probe_skipped", "counter", "Cycles not started because the previous probe was still running."),
    ("topodoc_probe_errors", "counter", "Cycles whose probe, derivation or time budget reported an error."),
    ("topodoc_probe_duration_seconds", "gauge", "How long the last cycle took."),
    ("topodoc_probe_last_run_timestamp_seconds", "gauge", "When the last cycle finished (Unix time)."),
    ("topodoc_rule_errors", "gauge", "1 for each rule that raised in the last cycle (reported, not fatal)."),
    ("topodoc_finding", "gauge",
     "One series per finding: 1 while open, 0 once resolved (kept for an hour); the series keeps its labels "
     "from first seen to resolved."),
    ("topodoc_finding_first_seen_timestamp_seconds", "gauge", "When a finding was first seen (Unix time)."),
    ("topodoc_findings", "gauge", "Open findings by severity."),
    ("topodoc_pcie_link_width_lanes", "gauge", "PCIe lanes the GPU or NIC link trained at."),
    ("topodoc_pcie_link_max_width_lanes", "gauge", "PCIe lanes the GPU or NIC link supports."),
    ("topodoc_pcie_link_generation", "gauge", "PCIe generation the GPU or NIC link trained at."),
    ("topodoc_pcie_link_max_generation", "gauge", "PCIe generation the GPU or NIC link supports."),
    ("topodoc_nvlinks_active", "gauge", "NVLinks up per GPU."),
    ("topodoc_nvlinks_down", "gauge", "NVLinks present but down per GPU."),
    ("topodoc_nic_port_up", "gauge", "1 when the IB/RoCE port state is ACTIVE, else 0."),
    ("topodoc_nic_port_rate_bytes_per_second", "gauge", "The IB/RoCE port's rate (signalling rate / 8)."),
    ("topodoc_nic_port_info", "gauge", "IB/RoCE port state, physical state and link layer (value 1)."),
    ("topodoc_kernel_events", "counter", "Kernel-log events (Xid, SXid, AER, IOMMU, mlx5, EFA...) by kind, "
     "code and PCI device, since the agent started."),
    ("topodoc_udev_events", "counter", "udev actions on pci/net/infiniband devices since the agent started."),
    ("topodoc_event_source_up", "gauge", "1 when an event source (udev, kmsg, replay) is running."),
    ("topodoc_disabled_check_info", "gauge", "A check this agent cannot run here, and why (value 1)."),
    ("topodoc_nccl_log_transport_info", "gauge", "The inter-node transport NCCL used in a watched log (1)."),
    ("topodoc_nccl_log_gdr", "gauge",
     "1 when a watched log shows GPUDirect RDMA on every network connection, 0 when not; absent when the log "
     "does not say."),
    ("topodoc_nccl_log_errors", "gauge", "Errors the analyzer found in a watched log."),
    ("topodoc_nccl_log_kept_bytes", "gauge", "Bytes of a watched log kept for analysis (bounded)."),
    ("topodoc_nccl_log_restarts", "counter", "Rotations and truncations seen on a watched log."),
    *prometheus_health.METRICS,
)
_HELP = {name: text for name, _, text in METRICS}


def render(view) -> bytes:
    """The Prometheus text format (what ``--textfile`` writes)."""
    return generate_latest(_registry(view))


def exposition(view, accept: str = "", accept_encoding: str = "") -> tuple[str, bytes, bool]:
    """``(content type, body, gzipped)`` for a scrape: OpenMetrics when the scraper's ``Accept`` asks for
    it, else the text format (prometheus_client's ``choose_encoder``), gzip when ``Accept-Encoding``
    allows it."""
    import gzip

    from prometheus_client.exposition import choose_encoder

    encoder, content_type = choose_encoder(accept)
    body = encoder(_registry(view))
    zipped = "gzip" in accept_encoding.lower()
    return content_type, gzip.compress(body, compresslevel=6) if zipped else body, zipped


def _registry(view) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(view))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
    return registry


class _Collector:
    def __init__(self, view) -> None:
        self.view = view

    def collect(self):
        for part in (_agent, _probe, _findings, _pcie, _nvlink, _ports, _events, _logs,
                     prometheus_health.collect):
            yield from part(self.view)


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _HELP[name], labels=labels)


def _counter(name: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, _HELP[name], labels=labels)


def _agent(view):
    build = _gauge("topodoc_build_info", ["version"])
    build.add_metric([view.version], 1)
    start = GaugeMetricFamily("topodoc_agent_start_time_seconds", _HELP["topodoc_agent_start_time_seconds"],
                              value=view.started)
    up = _gauge("topodoc_event_source_up", ["source"])
    for name, running in sorted(view.sources.items()):
        up.add_metric([name], 1 if running else 0)
    disabled = _gauge("topodoc_disabled_check_info", ["check", "reason"])
    for check, reason in view.disabled:
        disabled.add_metric([check, reason], 1)
    out = [build, start, up, disabled]
    cycle = view.cycle
    if cycle is not None and cycle.snapshot is not None:
        out.append(_fingerprint(cycle.snapshot))
    return out


def _fingerprint(snapshot):
    from topodoc.fleet.fingerprint import digest, fingerprint

    family = _gauge("topodoc_fingerprint_info", ["fingerprint"])
    family.add_metric([digest(fingerprint(snapshot))], 1)
    return family


def _probe(view):
    runs = CounterMetricFamily("topodoc_probe_runs", _HELP["topodoc_probe_runs"], value=view.cycles)
    skipped = CounterMetricFamily("topodoc_probe_skipped", _HELP["topodoc_probe_skipped"], value=view.skipped)
    errors = CounterMetricFamily("topodoc_probe_errors", _HELP["topodoc_probe_errors"],
                                 value=view.cycle_errors)
    out = [runs, skipped, errors]
    cycle = view.cycle
    if cycle is not None:
        out.append(GaugeMetricFamily("topodoc_probe_duration_seconds",
                                     _HELP["topodoc_probe_duration_seconds"], value=cycle.duration_s))
        out.append(GaugeMetricFamily("topodoc_probe_last_run_timestamp_seconds",
                                     _HELP["topodoc_probe_last_run_timestamp_seconds"], value=cycle.finished))
        rule_errors = _gauge("topodoc_rule_errors", ["rule"])
        for err in cycle.report.errors:
            rule_errors.add_metric([err.rule], 1)
        out.append(rule_errors)
    return out


def _findings(view):
    finding = _gauge("topodoc_finding", ["scope", "rule", "severity", "subject"])
    first = _gauge("topodoc_finding_first_seen_timestamp_seconds", ["scope", "rule", "subject"])
    counts = _gauge("topodoc_findings", ["severity"])
    open_by = dict.fromkeys(("info", "warning", "error", "critical"), 0)
    for item in view.tracked:
        is_open = item.status != "resolved"
        labels = [item.scope, item.rule, item.severity, item.subject]
        finding.add_metric(labels, 1 if is_open else 0)
        first.add_metric([item.scope, item.rule, item.subject], item.first_seen)
        if is_open:
            open_by[item.severity] = open_by.get(item.severity, 0) + 1
    for severity, count in open_by.items():
        counts.add_metric([severity], count)
    return [finding, first, counts]


def _pcie(view):
    # GPU rows carry dcgm-exporter's gpu/UUID/pci_bus_id/device; a NIC's device is its RDMA/net name
    labels = ["endpoint", "model", "pci_address", "gpu", "UUID", "pci_bus_id", "device"]
    names = ("topodoc_pcie_link_width_lanes", "topodoc_pcie_link_max_width_lanes",
             "topodoc_pcie_link_generation", "topodoc_pcie_link_max_generation")
    fams = {n: _gauge(n, labels) for n in names}
    for row in _links(view):
        for name, value in zip(names, row[len(labels):], strict=True):
            if value is not None:
                fams[name].add_metric(list(row[: len(labels)]), value)
    return list(fams.values())


def _links(view):
    """``(endpoint, model, address, gpu, UUID, pci_bus_id, device, width, max_width, gen, max_gen)`` per GPU
    and NIC."""
    from topodoc import pciaddr
    from topodoc.topology.rates import gen_of

    cycle = view.cycle
    if cycle is None or cycle.snapshot is None or cycle.topology is None:
        return []
    snap, topo = cycle.snapshot, cycle.topology
    rows = []
    by_index = {g.index: g for g in snap.gpus}
    for end in topo.gpus:
        gpu = by_index.get(end.index)
        if gpu is not None:
            rows.append((end.name, end.model or "", end.pci_address or "", *prometheus_health.gpu_labels(gpu),
                         gpu.pcie_width, gpu.pcie_max_width, gpu.pcie_gen, gpu.pcie_max_gen))
    for end in topo.nics:
        dev = snap.pci.get(end.pci_address or "")
        if dev is not None:
            link = dev.link
            bus_id = pciaddr.parse(end.pci_address).nvml if end.pci_address else ""
            rows.append((end.name, "", end.pci_address, "", "", bus_id, end.device, link.width,
                         link.max_width, gen_of(link.speed_gts), gen_of(link.max_speed_gts)))
    return rows


def _nvlink(view):
    labels = prometheus_health.GPU  # gpu (index), UUID, pci_bus_id, device: dcgm-exporter's
    active = _gauge("topodoc_nvlinks_active", labels)
    down = _gauge("topodoc_nvlinks_down", labels)
    cycle = view.cycle
    if cycle is not None and cycle.topology is not None and cycle.snapshot is not None:
        by_index = {g.index: g for g in cycle.snapshot.gpus}
        for end in cycle.topology.gpus:
            gpu = by_index.get(end.index)
            if gpu is None:
                continue
            key = prometheus_health.gpu_labels(gpu)
            active.add_metric(key, end.nvlinks_active)
            down.add_metric(key, end.nvlinks_down)
    return [active, down]


def _ports(view):
    labels = ["nic", "port"]
    up = _gauge("topodoc_nic_port_up", labels)
    rate = _gauge("topodoc_nic_port_rate_bytes_per_second", labels)
    info = _gauge("topodoc_nic_port_info", [*labels, "state", "phys_state", "link_layer"])
    cycle = view.cycle
    for nic in cycle.snapshot.nics if cycle is not None and cycle.snapshot is not None else ():
        for port in nic.ports:
            key = [nic.name, str(port.port)]
            up.add_metric(key, 1 if (port.state or "").upper() == "ACTIVE" else 0)
            if port.rate_gbps is not None:
                rate.add_metric(key, port.rate_gbps * 1e9 / 8)
            info.add_metric([*key, port.state or "", port.phys_state or "", port.link_layer or ""], 1)
    return [up, rate, info]


def _events(view):
    kernel = _counter("topodoc_kernel_events", ["kind", "code", "device"])
    udev = _counter("topodoc_udev_events", ["action", "device"])
    for (kind, code, device), count in sorted(view.event_counts.items()):
        if kind == "udev":
            udev.add_metric([code, device], count)
        else:
            kernel.add_metric([kind, code, device], count)
    return [kernel, udev]


def _logs(view):
    transport = _gauge("topodoc_nccl_log_transport_info", ["file", "transport"])
    gdr = _gauge("topodoc_nccl_log_gdr", ["file"])
    errors = _gauge("topodoc_nccl_log_errors", ["file"])
    kept = _gauge("topodoc_nccl_log_kept_bytes", ["file"])
    restarts = _counter("topodoc_nccl_log_restarts", ["file"])
    for path, result in sorted(view.logs.items()):
        kept.add_metric([path], result.kept_bytes)
        restarts.add_metric([path], result.restarts)
        summary = result.analysis.summary if result.analysis is not None else None
        if summary is None:
            continue
        if summary.transport:
            transport.add_metric([path, summary.transport], 1)
        if summary.gdr is not None:
            gdr.add_metric([path], 1 if summary.gdr else 0)
        errors.add_metric([path], len(result.analysis.errors))
    return [transport, gdr, errors, kept, restarts]
