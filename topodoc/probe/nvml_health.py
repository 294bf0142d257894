"""GPU health through NVML: ECC, page retirement, row remapping, clock events, temperature, power, and
NVLink error counters. Called per GPU by :mod:`topodoc.probe.nvml_gpus` while NVML is initialised.

NVML calls (``i`` a GPU index, ``l`` an active NVLink), grouped in checks; each check has its own
deadline (:data:`CHECK_DEADLINE_S`, counted from its first call on this machine): once it has passed,
that check asks nothing more and says so in one gap, the other checks carry on.

- ``ecc``: ``nvmlDeviceGetEccMode(i)`` -> [current, pending]; when ECC is on,
  ``nvmlDeviceGetTotalEccErrors(i, e, c)`` for e = 0 corrected / 1 uncorrected and c = 0 volatile /
  1 aggregate, and ``nvmlDeviceGetMemoryErrorCounter(i, e, 1, loc)`` for loc = 2 DRAM / 7 SRAM
  (aggregate, where the GPU counts them apart)
- ``retired_pages`` (before Ampere): ``nvmlDeviceGetRetiredPages(i, cause)`` -> list of addresses for
  cause 0 multiple single-bit / 1 double-bit (only the count is kept),
  ``nvmlDeviceGetRetiredPagesPendingStatus(i)`` -> 0/1
- ``row_remap`` (Ampere and later): ``nvmlDeviceGetRemappedRows(i)`` -> [corrected, uncorrected,
  pending, failure]; ``nvmlDeviceGetRowRemapperHistogram(i)`` -> {max, high, partial, low, none}
- ``clocks``: ``nvmlDeviceGetCurrentClocksEventReasons(i)`` -> bit mask
  (``nvmlDeviceGetCurrentClocksThrottleReasons(i)``, the older name, when the new one is missing)
- ``thermal``: ``nvmlDeviceGetTemperature(i, 0)`` (GPU die, C), ``nvmlDeviceGetTemperatureThreshold(i,
  1)`` (slowdown) and ``(i, 0)`` (shutdown)
- ``power``: ``nvmlDeviceGetPowerUsage(i)``, ``nvmlDeviceGetEnforcedPowerLimit(i)`` (mW)
- ``nvlink_errors``: ``nvmlDeviceGetNvLinkErrorCounter(i, l, k)`` for k = 0 replay, 1 recovery,
  2 CRC flit, 3 CRC data (``NVML_NVLINK_ERROR_DL_*``)

Every value that cannot be read (NotSupported on a GPU without that feature, NoPermission, an older
driver without the function, a tape recorded before topodoc asked) is a :class:`~topodoc.probe.
nvml_grace.Miss`; the caller folds them into one gap per check and reason for the whole machine
(:func:`health_gaps`), so "row remapping of 8 GPUs: NotSupported" is said once. GpuIsLost still ends
every question about the GPU (:class:`~topodoc.probe.nvml_gpus.GpuLost`, raised by ``call``).
"""

from __future__ import annotations

from collections.abc import Callable

from topodoc.model import Gap, GapReason, GpuHealth
from topodoc.probe.host import Deadline, NotRecorded, NvmlError, NvmlTimeout
from topodoc.probe.nvml_grace import Miss

FUNCTION_NOT_FOUND = 13
CHECK_DEADLINE_S = {  # a check's NVML calls answer in microseconds; a sick GPU can take seconds each
    "ecc": 5.0, "retired_pages": 3.0, "row_remap": 3.0, "clocks": 2.0, "thermal": 2.0, "power": 2.0,
    "nvlink_errors": 5.0,
}
CHECK_NAMES = {
    "ecc": "ECC counts", "retired_pages": "retired pages", "row_remap": "row remapping",
    "clocks": "clock event reasons", "thermal": "temperature", "power": "power", "nvlink_errors":
    "NVLink error counters",
}
# nvmlClocksEventReason* bits (nvml.h; same values as the older nvmlClocksThrottleReason*)
CLOCK_EVENTS = {
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
    0x100: "display_clocks",
}
NVLINK_COUNTERS = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}
DRAM, SRAM = 2, 7  # NVML_MEMORY_LOCATION_*
HISTOGRAM = ("max", "high", "partial", "low", "none")

Call = Callable[..., object]


class Checks:
    """Asks NVML for one machine's health values: one deadline per check, misses kept for folding."""

    def __init__(self, call: Call, misses: list[Miss]) -> None:
        self.call = call  # raises NvmlError; GpuLost on GpuIsLost/Timeout (the caller's _raw_call)
        self.misses = misses
        self.deadlines: dict[str, Deadline] = {}

    def ask(self, check: str, fn: str, i: int, *args):
        deadline = self.deadlines.setdefault(check, Deadline.after(CHECK_DEADLINE_S[check]))
        if deadline.remaining() <= 0:
            passed = f"not asked: the {check} check's {deadline.seconds:g} s deadline had passed"
            self.misses.append(Miss(check, f"nvml:{fn}", NvmlTimeout(passed), i))
            return None
        try:
            return self.call(fn, i, *args)
        except NvmlError as err:
            self.misses.append(Miss(check, f"nvml:{fn}", err, i))
            return None

    def integer(self, check: str, fn: str, i: int, *args) -> int | None:
        return _uint(self.ask(check, fn, i, *args))


def gpu_health(checks: Checks, i: int) -> GpuHealth | None:
    """The GPU's health values; None when NVML answered none of them (the gaps say why)."""
    values: dict = {}
    values.update(_ecc(checks, i))
    values.update(_retired(checks, i))
    values.update(_remap(checks, i))
    mask = _clock_mask(checks, i)
    temperature = checks.integer("thermal", "nvmlDeviceGetTemperature", i, 0)
    power = checks.integer("power", "nvmlDeviceGetPowerUsage", i)
    limit = checks.integer("power", "nvmlDeviceGetEnforcedPowerLimit", i) if power is not None else None
    health = GpuHealth(
        **values,
        clock_event_mask=mask,
        clock_events=None if mask is None else tuple(n for bit, n in CLOCK_EVENTS.items() if mask & bit),
        temperature_c=temperature,
        slowdown_temperature_c=None if temperature is None else checks.integer(
            "thermal", "nvmlDeviceGetTemperatureThreshold", i, 1),
        shutdown_temperature_c=None if temperature is None else checks.integer(
            "thermal", "nvmlDeviceGetTemperatureThreshold", i, 0),
        power_w=None if power is None else power / 1000,
        power_limit_w=None if limit is None else limit / 1000,
    )
    return None if health == GpuHealth() else health


def _ecc(checks: Checks, i: int) -> dict:
    mode = checks.ask("ecc", "nvmlDeviceGetEccMode", i)
    enabled = bool(mode[0]) if isinstance(mode, list) and mode and _uint(mode[0]) is not None else None
    if not enabled:  # off (the counters then answer NotSupported) or unknown: nothing more to ask
        return {"ecc_enabled": enabled}
    out = {"ecc_enabled": True}
    for kind, error_type in (("corrected", 0), ("uncorrected", 1)):
        for scope, counter in (("volatile", 0), ("aggregate", 1)):
            out[f"ecc_{scope}_{kind}"] = checks.integer("ecc", "nvmlDeviceGetTotalEccErrors", i, error_type,
                                                        counter)
        for where, location in (("dram", DRAM), ("sram", SRAM)):
            out[f"ecc_{where}_{kind}"] = checks.integer("ecc", "nvmlDeviceGetMemoryErrorCounter", i,
                                                        error_type, 1, location)
    return out


def _retired(checks: Checks, i: int) -> dict:
    sbe = checks.ask("retired_pages", "nvmlDeviceGetRetiredPages", i, 0)
    if not isinstance(sbe, list):  # NotSupported on Ampere and later (row remapping instead)
        return {}
    dbe = checks.ask("retired_pages", "nvmlDeviceGetRetiredPages", i, 1)
    pending = checks.integer("retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus", i)
    return {"retired_pages_sbe": len(sbe), "retired_pages_dbe": len(dbe) if isinstance(dbe, list) else None,
            "retired_pages_pending": None if pending is None else bool(pending)}


def _remap(checks: Checks, i: int) -> dict:
    rows = checks.ask("row_remap", "nvmlDeviceGetRemappedRows", i)
    if not isinstance(rows, list) or len(rows) != 4 or any(_uint(v) is None for v in rows):
        return {}
    histogram = checks.ask("row_remap", "nvmlDeviceGetRowRemapperHistogram", i)
    if isinstance(histogram, dict) and all(_uint(histogram.get(k)) is not None for k in HISTOGRAM):
        histogram = {k: histogram[k] for k in HISTOGRAM}
    else:
        histogram = None
    return {"remapped_rows_corrected": rows[0], "remapped_rows_uncorrected": rows[1],
            "remap_pending": bool(rows[2]), "remap_failed": bool(rows[3]), "remap_histogram": histogram}


def _clock_mask(checks: Checks, i: int) -> int | None:
    before = len(checks.misses)
    mask = checks.integer("clocks", "nvmlDeviceGetCurrentClocksEventReasons", i)
    missed = checks.misses[before:]
    if mask is None and missed and missed[-1].error.code == FUNCTION_NOT_FOUND:
        del checks.misses[before:]  # drivers before 535 name it ...ThrottleReasons
        mask = checks.integer("clocks", "nvmlDeviceGetCurrentClocksThrottleReasons", i)
    return mask


def link_errors(checks: Checks, i: int, link: int) -> dict[str, int]:
    out = {}
    for counter, name in NVLINK_COUNTERS.items():
        value = checks.integer("nvlink_errors", "nvmlDeviceGetNvLinkErrorCounter", i, link, counter)
        if value is not None:
            out[name] = value
    return out


def _uint(value) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64
    return value if ok else None


def health_gaps(misses: list[Miss]) -> list[Gap]:
    """One gap per (check, reason, detail) for the whole machine ("row remapping of 8 GPUs:
    NotSupported"); every value a recording does not hold is one gap ("GPU health of 8 GPUs")."""
    from topodoc.probe.nvml_gpus import gap_reason

    groups: dict[tuple, set[int]] = {}
    for m in misses:
        if isinstance(m.error, NotRecorded):
            key = ("GPU health checks", GapReason.NOT_RECORDED, "nvml",
                   "the recording holds no answer (recorded by a topodoc that did not ask)")
        else:
            detail = m.error.detail if isinstance(m.error, NvmlTimeout) else m.error.name
            key = (CHECK_NAMES[m.what], gap_reason(m.error), m.source, detail)
        groups.setdefault(key, set()).add(m.gpu)
    out = []
    for (what, reason, source, detail), gpus in groups.items():
        where = f"GPU {min(gpus)}" if len(gpus) == 1 else f"{len(gpus)} GPUs"
        out.append(Gap(what=f"{what} of {where}", reason=reason, source=source, detail=detail))
    return out
