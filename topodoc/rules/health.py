"""Health rules on what NVML and sysfs count: GPU memory (ECC, row remapping, page retirement), clock
slowdowns and temperature, NVLink error counters, and IB/RoCE port error counters joined to the GPUs
whose rail the port is.

The values are read by :mod:`topodoc.probe.nvml_health` and :mod:`topodoc.probe.nics` into
``Gpu.health``, ``NvLink.errors`` and ``NicPort.counters``; a GPU or port whose values were not read
(older recording, NotSupported) is passed over here and its gap says why. Counters are totals since
the driver loaded (or over the GPU's life for aggregate ECC): one snapshot cannot give a rate, so the
rules name the count and the agent's metrics carry the rate (docs/AGENT.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.model import Gpu, Nic, NicPort, Snapshot
from topodoc.rules.engine import Evidence, Hit, Severity, rule
from topodoc.rules.machine import gpu_label, verbs_ports
from topodoc.topology import rails
from topodoc.topology.types import Topology

MEMORY_DOC = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
DPR_DOC = "https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html"
RETIRED_PAGES_RMA = 60  # NVIDIA's dynamic page retirement guide: replacement at 60 retired pages
SLOWDOWN_MARGIN_C = 5  # within this of the slowdown threshold the GPU is about to throttle
POWER_AT_LIMIT = 0.98
SLOWDOWNS = {  # clock-event bits that mean the GPU is held below its clocks by a fault or a limit it hit
    "hw_slowdown": "HW slowdown (the board asserted its slowdown signal: over-temperature or power "
    "supply alarm)",
    "hw_thermal": "HW thermal slowdown (the GPU or its memory is at its temperature limit)",
    "hw_power_brake": "HW power brake (an external power-brake signal, usually the power supply)",
    "sw_thermal": "SW thermal slowdown (the driver holds clocks down to stay under the temperature limit)",
}
PORT_ERRORS = {  # counter -> (what it means, severity when > 0)
    "link_downed": ("times the link fell out of LinkUp", Severity.WARNING),
    "symbol_error": ("physical-layer symbol errors (cable, transceiver or port)", Severity.WARNING),
    "link_error_recovery": ("link error recoveries (retraining after errors)", Severity.WARNING),
    "local_link_integrity_errors": ("local link integrity errors", Severity.WARNING),
    "port_rcv_errors": ("received packets with errors", Severity.WARNING),
    "port_rcv_remote_physical_errors": ("packets received marked bad by a remote physical error",
                                        Severity.WARNING),
    "excessive_buffer_overrun_errors": ("receive buffer overruns (flow control broken)", Severity.WARNING),
    "port_xmit_discards": ("packets discarded on send (congestion, or the link went down)", Severity.INFO),
    "out_of_sequence": ("RoCE packets received out of sequence (drops in the fabric)", Severity.INFO),
    "packet_seq_err": ("RoCE NAK sequence errors received (packet loss)", Severity.WARNING),
    "rnr_nak_retry_err": ("RoCE receiver-not-ready retries exhausted (QPs moved to error)", Severity.WARNING),
    "local_ack_timeout_err": ("RoCE ACK timeouts (lost packets, retransmitted)", Severity.INFO),
    "implied_nak_seq_err": ("RoCE implied NAK sequence errors", Severity.INFO),
}


def _nvml(gpu: Gpu, call: str, value: str) -> Evidence:
    return Evidence("nvml", f"{call}(GPU{gpu.index})", value)


@rule(
    "gpu-ecc-uncorrected", "error", ("gpu", "memory", "ecc", "health"),
    title="Uncorrectable ECC errors on a GPU",
    fix="drain the GPU's jobs; reset it so pending row remaps take effect; if uncorrectable errors come "
    "back, run `dcgmi diag -r 3` and open a hardware case",
)
def gpu_ecc_uncorrected(snapshot: Snapshot) -> Iterator[Hit]:
    for gpu in snapshot.gpus:
        h = gpu.health
        if h is None or not h.ecc_enabled:
            continue
        volatile, aggregate = h.ecc_volatile_uncorrected or 0, h.ecc_aggregate_uncorrected or 0
        if not volatile and not aggregate:
            continue
        where = [f"{name} {count}" for name, count in (("SRAM", h.ecc_sram_uncorrected),
                                                       ("DRAM", h.ecc_dram_uncorrected)) if count]
        split = f" ({', '.join(where)} over its life)" if where else ""
        call = "nvmlDeviceGetTotalEccErrors"
        if volatile:
            message = (f"{volatile} uncorrectable ECC error(s) since the driver loaded ({aggregate} over the "
                       f"GPU's life{split}): work on this GPU may have read corrupted memory")
            severity = Severity.ERROR
        else:
            message = (f"{aggregate} uncorrectable ECC error(s) over the GPU's life{split}, none since the "
                       "driver loaded: watch for new ones")
            severity = Severity.WARNING
        yield Hit(gpu_label(gpu), message, (
            _nvml(gpu, call, f"uncorrected volatile={volatile}, aggregate={aggregate}"),), severity=severity)


@rule(
    "gpu-row-remap", "error", ("gpu", "memory", "ecc", "health"),
    title="GPU memory row remapping pending or failed",
    fix="pending: drain the GPU and reset it (`nvidia-smi -r -i N`, or reboot) so the remap takes effect; "
    "failed, or a bank without spare rows: drain the node and open a hardware case (RMA)",
)
def gpu_row_remap(snapshot: Snapshot) -> Iterator[Hit]:
    """NVIDIA's memory error management guide (``MEMORY_DOC``): a pending remap needs a GPU reset; a
    remap failure means the GPU should be replaced."""
    for gpu in snapshot.gpus:
        h = gpu.health
        if h is None or h.remap_pending is None:
            continue
        rows = (f"corrected={h.remapped_rows_corrected}, uncorrected={h.remapped_rows_uncorrected}, "
                f"pending={int(h.remap_pending)}, failure={int(bool(h.remap_failed))}")
        evidence = (_nvml(gpu, "nvmlDeviceGetRemappedRows", rows),)
        exhausted = (h.remap_histogram or {}).get("none", 0)
        if h.remap_failed:
            yield Hit(gpu_label(gpu), "a row remapping failed on this GPU: its memory could not be repaired; "
                      f"NVIDIA's guidance is to replace it ({MEMORY_DOC})", evidence,
                      fix="drain the node and open a hardware case (RMA) for this GPU",
                      severity=Severity.CRITICAL)
        elif h.remap_pending:
            yield Hit(gpu_label(gpu), f"{h.remapped_rows_uncorrected} row(s) remapped for uncorrectable "
                      "errors and a remap pending: it takes effect only after a GPU reset (until then the "
                      f"bad rows are fenced off per page) ({MEMORY_DOC})", evidence,
                      fix="drain the GPU's jobs and reset it (`nvidia-smi -r -i "
                      f"{gpu.index}`, or reboot the node)")
        elif exhausted:
            histogram = ", ".join(f"{k}={v}" for k, v in (h.remap_histogram or {}).items())
            yield Hit(gpu_label(gpu), f"{exhausted} memory bank(s) have no spare rows left: the next "
                      "uncorrectable error there cannot be remapped", (
                          *evidence, _nvml(gpu, "nvmlDeviceGetRowRemapperHistogram", histogram)),
                      fix="plan to replace the GPU; watch Xid 64 and the remap failure flag",
                      severity=Severity.WARNING)


@rule(
    "gpu-retired-pages", "error", ("gpu", "memory", "ecc", "health"),
    title="GPU memory pages pending retirement or retired past NVIDIA's replacement point",
    fix="pending: reboot the node (or reset the GPU) so the pages are retired; 60 or more retired pages: "
    "open a hardware case (RMA)",
)
def gpu_retired_pages(snapshot: Snapshot) -> Iterator[Hit]:
    """Dynamic page retirement (before Ampere; ``DPR_DOC``): a page is retired after one double-bit or
    two single-bit errors at one address; retirement takes effect when the driver reloads."""
    for gpu in snapshot.gpus:
        h = gpu.health
        if h is None or h.retired_pages_sbe is None:
            continue
        total = (h.retired_pages_sbe or 0) + (h.retired_pages_dbe or 0)
        value = f"single-bit={h.retired_pages_sbe}, double-bit={h.retired_pages_dbe}, pending=" \
                f"{int(bool(h.retired_pages_pending))}"
        evidence = (_nvml(gpu, "nvmlDeviceGetRetiredPages", value),)
        if total >= RETIRED_PAGES_RMA:
            yield Hit(gpu_label(gpu), f"{total} pages retired (NVIDIA's replacement point is "
                      f"{RETIRED_PAGES_RMA}; {DPR_DOC})", evidence,
                      fix="drain the node and open a hardware case (RMA) for this GPU",
                      severity=Severity.CRITICAL)
        elif h.retired_pages_pending:
            yield Hit(gpu_label(gpu), f"page retirement pending ({value}): the bad pages are fenced off only "
                      f"after the driver reloads ({DPR_DOC})", evidence,
                      fix="drain the node and reboot it (or reset the GPU) to retire the pages")


@rule(
    "gpu-clock-slowdown", "warning", ("gpu", "thermal", "power", "health"),
    title="GPU clocks held down by a slowdown (hardware, thermal, power brake) or near its slowdown "
    "temperature",
    fix="check the GPU's cooling (fans, airflow, inlet temperature) and power supply; a HW slowdown or "
    "power brake on one GPU of an otherwise cool node points at its board or PSU",
)
def gpu_clock_slowdown(snapshot: Snapshot) -> Iterator[Hit]:
    for gpu in snapshot.gpus:
        h = gpu.health
        if h is None:
            continue
        active = [SLOWDOWNS[name] for name in h.clock_events or () if name in SLOWDOWNS]
        if active:
            yield Hit(gpu_label(gpu), f"clocks held down: {'; '.join(active)}{_thermals(h)}", (
                _nvml(gpu, "nvmlDeviceGetCurrentClocksEventReasons",
                      f"0x{h.clock_event_mask:x} ({', '.join(h.clock_events or ())})"),))
        elif _near_slowdown(h):
            yield Hit(gpu_label(gpu), f"{h.temperature_c} C, within {SLOWDOWN_MARGIN_C} C of its slowdown "
                      f"threshold {h.slowdown_temperature_c} C: it is about to throttle", (
                          _nvml(gpu, "nvmlDeviceGetTemperature", f"{h.temperature_c} C"),
                          _nvml(gpu, "nvmlDeviceGetTemperatureThreshold",
                                f"slowdown {h.slowdown_temperature_c} C")))
        elif _at_power_limit(h):
            yield Hit(gpu_label(gpu), f"drawing {h.power_w:g} W of its {h.power_limit_w:g} W limit with the "
                      "software power cap active: clocks are limited by power (normal under full load; "
                      "a lowered limit shows here too)", (
                          _nvml(gpu, "nvmlDeviceGetPowerUsage", f"{h.power_w:g} W"),
                          _nvml(gpu, "nvmlDeviceGetEnforcedPowerLimit", f"{h.power_limit_w:g} W")),
                      fix="compare `nvidia-smi -q -d POWER` (enforced vs default limit); raise a lowered "
                      "limit with `nvidia-smi -pl`", severity=Severity.INFO)


def _thermals(h) -> str:
    if h.temperature_c is None:
        return ""
    limit = f" (slowdown at {h.slowdown_temperature_c} C)" if h.slowdown_temperature_c else ""
    return f"; GPU at {h.temperature_c} C{limit}"


def _near_slowdown(h) -> bool:
    if h.temperature_c is None or not h.slowdown_temperature_c:
        return False
    return h.temperature_c >= h.slowdown_temperature_c - SLOWDOWN_MARGIN_C


def _at_power_limit(h) -> bool:
    if h.power_w is None or not h.power_limit_w:
        return False
    return "sw_power_cap" in (h.clock_events or ()) and h.power_w >= POWER_AT_LIMIT * h.power_limit_w


@rule(
    "nvlink-errors", "warning", ("nvlink", "gpu", "health"),
    title="NVLink error counters are not zero",
    fix="watch the rate (`topodoc_nvlink_errors_total` in the agent, or `nvidia-smi nvlink -e`); recoveries "
    "or CRC data errors that keep rising: reset the GPU, then reseat or replace the GPU / baseboard",
)
def nvlink_errors(snapshot: Snapshot, topology: Topology | None = None) -> Iterator[Hit]:
    """Replays and CRC flit errors are retried by the link layer (a few are normal); recoveries and CRC
    data errors mean the link retrained or lost data."""
    gpus_by_address = {g.pci_address: g for g in snapshot.gpus if g.pci_address}
    for gpu in snapshot.gpus:
        for link in gpu.nvlinks:
            counts = {k: v for k, v in link.errors.items() if v}
            if not counts:
                continue
            serious = bool(counts.get("recovery") or counts.get("crc_data"))
            value = ", ".join(f"{k}={v}" for k, v in link.errors.items())
            yield Hit(
                f"{gpu_label(gpu)} NVLink {link.link}",
                f"NVLink {link.link} to {_peer(link, gpus_by_address)}: {value} since the driver loaded"
                + ("" if serious else " (replays and CRC flit errors are retried by the link; the rate "
                   "matters)"),
                (Evidence("nvml", f"nvmlDeviceGetNvLinkErrorCounter(GPU{gpu.index}, {link.link})", value),),
                severity=Severity.WARNING if serious else Severity.INFO,
            )


def _peer(link, gpus_by_address) -> str:
    peer = gpus_by_address.get(link.remote_pci_address)
    if peer is not None:
        return f"GPU{peer.index} ({link.remote_pci_address})"
    kind = {"switch": "NVSwitch"}.get(link.remote_type or "", link.remote_type or "an unknown peer")
    return f"{kind} {link.remote_pci_address}" if link.remote_pci_address else kind


@rule(
    "ib-port-errors", "warning", ("nic", "ib", "roce", "health"),
    title="InfiniBand/RoCE port error counters are not zero",
    fix="check the port's cable and transceiver (`mlxlink -d DEV -m`), its switch port, and the rate of the "
    "counters (`topodoc_nic_port_errors_total`); reseat or replace the cable when physical errors keep "
    "rising",
)
def ib_port_errors(snapshot: Snapshot, topology: Topology | None = None) -> Iterator[Hit]:
    served = _gpus_by_nic(topology)
    for nic, port in verbs_ports(snapshot):
        counts = {k: v for k, v in port.counters.items() if v and k in PORT_ERRORS}
        if not counts:
            continue
        severity = max((PORT_ERRORS[k][1] for k in counts), key=lambda s: s.rank)
        what = "; ".join(f"{k}={v} ({PORT_ERRORS[k][0]})" for k, v in counts.items())
        gpus = served.get(nic.name)
        rail = f"; the rail of {', '.join(gpus)}" if gpus else ""
        yield Hit(f"{nic.name} port {port.port}", f"{what} since the driver loaded{rail}",
                  tuple(_counter_evidence(nic, port, k, v) for k, v in counts.items()), severity=severity)


HW_COUNTERS = ("out_of_sequence", "packet_seq_err", "rnr_nak_retry_err", "local_ack_timeout_err",
               "implied_nak_seq_err")  # under ports/N/hw_counters (mlx5 RoCE); the rest under counters


def _counter_evidence(nic: Nic, port: NicPort, name: str, value: int) -> Evidence:
    folder = "hw_counters" if name in HW_COUNTERS else "counters"
    path = f"/sys/class/infiniband/{nic.name}/ports/{port.port}/{folder}/{name}"
    return Evidence("sysfs", path, str(value))


def _gpus_by_nic(topology: Topology | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if topology is None:
        return out
    for pair in rails.rail_pairs(topology):
        out.setdefault(pair.nic.device, []).append(pair.gpu.name)
    return out


RULES = (gpu_ecc_uncorrected, gpu_row_remap, gpu_retired_pages, gpu_clock_slowdown, nvlink_errors,
         ib_port_errors)
