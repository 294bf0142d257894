"""GPUs through NVML: driver versions, per-GPU identity, PCIe, NUMA, NVLink, fabric, and GPU pairs.

NVML calls (``i``, ``a < b`` are GPU indexes; ``l`` a link number), in order:

- ``nvmlInit()``; ``nvmlSystemGetDriverVersion()`` -> str; ``nvmlSystemGetNVMLVersion()`` -> str;
  ``nvmlSystemGetCudaDriverVersion_v2()`` -> int (``nvmlSystemGetCudaDriverVersion()`` when the _v2
  symbol is missing); ``nvmlDeviceGetCount()`` -> int
- per GPU: ``nvmlDeviceGetName(i)`` (GpuIsLost here or later marks the GPU lost and stops its calls),
  ``nvmlDeviceGetUUID(i)``, ``nvmlDeviceGetSerial(i)``, ``nvmlDeviceGetPciInfo(i)`` -> dict with
  ``busId``, ``nvmlDeviceGetCurrPcieLinkGeneration(i)``, ``nvmlDeviceGetMaxPcieLinkGeneration(i)``,
  ``nvmlDeviceGetGpuMaxPcieLinkGeneration(i)``, ``nvmlDeviceGetCurrPcieLinkWidth(i)``,
  ``nvmlDeviceGetMaxPcieLinkWidth(i)``, ``nvmlDeviceGetCpuAffinity(i, 16)`` -> 16 64-bit mask words,
  ``nvmlDeviceGetCudaComputeCapability(i)`` -> [major, minor],
  ``nvmlDeviceGetMemoryInfo(i)`` -> dict with ``total``,
  ``nvmlDeviceGetPersistenceMode(i)`` -> 0/1, ``nvmlDeviceGetMigMode(i)`` -> [current, pending],
  ``nvmlDeviceGetGpuFabricInfoV(i)`` -> dict (``clusterUuid`` 16 bytes as a list or a string,
  ``status``, ``cliqueId``, ``state``, ``healthMask``); when a driver has no V function
  (FunctionNotFound), ``nvmlDeviceGetGpuFabricInfo(i)`` (the same without ``healthMask``)
- the Grace calls of :mod:`topodoc.probe.nvml_grace`: ``nvmlDeviceGetNumaNodeId(i)`` (the GPU NUMA ID,
  not the nearest CPU node: ``numa_node`` is left to sysfs) and the C2C field values
- ``nvmlDeviceGetFieldValues(i, [91])`` (``NVML_FI_DEV_NVLINK_LINK_COUNT``) -> ``[{"fieldId": 91,
  "nvmlReturn": 0, "value": 18, ...}]``: the number of links to ask about. When it does not answer
  (older driver, per-field error, or a tape recorded before it was asked), every link up to
  ``NVML_NVLINK_MAX_LINKS`` (36) is tried (NCCL, too, skips links that do not answer).
- per link ``l`` below that count: ``nvmlDeviceGetNvLinkState(i, l)`` -> 0/1 (InvalidArgument or
  NotSupported: no such link, skipped; holes are allowed), and for active links
  ``nvmlDeviceGetNvLinkVersion(i, l)`` (NVML enum: 5 on A100),
  ``nvmlDeviceGetNvLinkRemotePciInfo(i, l)`` -> dict with ``busId``,
  ``nvmlDeviceGetNvLinkRemoteDeviceType(i, l)`` -> 0 GPU, 1 IBM NPU, 2 switch, 255 unknown
- per pair: ``nvmlDeviceGetP2PStatus(a, b, k)`` for k = 0 read, 1 write, 2 NVLink, 3 atomics (literal
  ints: pynvml's ``NVML_P2P_CAPS_INDEX_READ`` is a tuple in 13.615), and
  ``nvmlDeviceGetTopologyCommonAncestor(a, b)`` -> 0/10/20/30/40/50
- per GPU, the health checks of :mod:`topodoc.probe.nvml_health` (ECC, retired pages, row remapping,
  clock events, temperature, power; each with its own deadline) after the Grace calls, and for each
  active link its NVLink error counters (``nvmlDeviceGetNvLinkErrorCounter``) after its other calls
- ``nvmlShutdown()``

NotSupported is data (an UNSUPPORTED gap), one failing GPU or field never spoils the others. The Grace
values are quieter: NotSupported there means "none" (a PCIe GPU), and any other miss is one gap per
value for the whole machine, so an older driver or tape does not add a gap per GPU.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections import Counter
from dataclasses import dataclass
from dataclasses import field as dc_field

from topodoc import pciaddr
from topodoc.cpuset import CpuSet
from topodoc.model import DriverInfo, Gap, GapReason, Gpu, GpuFabric, GpuPair, NvLink
from topodoc.probe import nvml_grace, nvml_health
from topodoc.probe.host import NotRecorded, NvmlError
from topodoc.topology.vocab import SMI_LEVELS

MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS in nvidia-ml-py 13.615
NVLINK_LINK_COUNT_FIELD = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT
AFFINITY_WORDS = 16
GPU_IS_LOST, INVALID_ARGUMENT, NOT_SUPPORTED, TIMEOUT = 15, 2, 3, 10
MAX_GPUS = 1024  # a GPU count above this is a corrupt answer, not a machine
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_CAPS = (("p2p_read", 0), ("p2p_write", 1), ("p2p_nvlink", 2), ("p2p_atomics", 3))
# NVML_TOPOLOGY_INTERNAL 0, then SINGLE/MULTIPLE/HOSTBRIDGE/NODE/SYSTEM 10..50: nvidia-smi's classes
ANCESTOR = {0: "INTERNAL", **{10 * (i + 1): level for i, level in enumerate(SMI_LEVELS)}}
REMOTE_TYPE = {0: "gpu", 1: "ibmnpu", 2: "switch", 255: "unknown"}
FABRIC_STATE = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


def gap_reason(err: NvmlError) -> GapReason:
    if isinstance(err, NotRecorded):
        return GapReason.NOT_RECORDED
    return {
        3: GapReason.UNSUPPORTED,
        4: GapReason.PERMISSION,
        9: GapReason.MISSING,
        12: GapReason.MISSING,
        13: GapReason.MISSING,
    }.get(err.code, GapReason.ERROR)


INT, TEXT, LIST, DICT = "int", "str", "list", "dict"
EXPECTED = {  # the plain type of each call's answer (nvml_live.plain); anything else is a corrupt answer
    "nvmlSystemGetDriverVersion": TEXT, "nvmlSystemGetNVMLVersion": TEXT,
    "nvmlSystemGetCudaDriverVersion": INT, "nvmlSystemGetCudaDriverVersion_v2": INT,
    "nvmlDeviceGetCount": INT,
    "nvmlDeviceGetName": TEXT, "nvmlDeviceGetUUID": TEXT, "nvmlDeviceGetSerial": TEXT,
    "nvmlDeviceGetPciInfo": DICT, "nvmlDeviceGetMemoryInfo": DICT, "nvmlDeviceGetGpuFabricInfoV": DICT,
    "nvmlDeviceGetGpuFabricInfo": DICT,
    "nvmlDeviceGetNvLinkRemotePciInfo": DICT,
    "nvmlDeviceGetCurrPcieLinkGeneration": INT, "nvmlDeviceGetMaxPcieLinkGeneration": INT,
    "nvmlDeviceGetGpuMaxPcieLinkGeneration": INT, "nvmlDeviceGetCurrPcieLinkWidth": INT,
    "nvmlDeviceGetMaxPcieLinkWidth": INT, "nvmlDeviceGetPersistenceMode": INT,
    "nvmlDeviceGetNvLinkVersion": INT, "nvmlDeviceGetNvLinkRemoteDeviceType": INT,
    "nvmlDeviceGetP2PStatus": INT, "nvmlDeviceGetTopologyCommonAncestor": INT,
    "nvmlDeviceGetCpuAffinity": LIST, "nvmlDeviceGetCudaComputeCapability": LIST,
    "nvmlDeviceGetMigMode": LIST,
}


def plain_int(value) -> int | None:
    """``value`` when it is an int NVML could return (64 bits, not a bool), else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 64
    return value if ok else None


def fits(value, kind: str) -> bool:
    if kind == INT:
        return plain_int(value) is not None
    return isinstance(value, {TEXT: str, LIST: list, DICT: dict}[kind])


class GpuLost(Exception):
    """Stop asking about this GPU: it fell off the bus (GpuIsLost), or a call on it did not return;
    ``call`` is the NVML function that said so (the lost-GPU evidence names it)."""

    def __init__(self, err: NvmlError, call: str = "") -> None:
        super().__init__(err.name)
        self.call = call
        self.lost = err.code == GPU_IS_LOST
        if self.lost:
            self.detail = "GpuIsLost: the GPU fell off the bus"
        else:
            why = err.detail or "an NVML call did not return"
            self.detail = f"{err.name}: {why}; its other values were not asked"


def aborts(err: NvmlError) -> bool:
    """GpuIsLost and Timeout end the questions about a GPU (a replayed tape answers them the same way)."""
    return err.code in (GPU_IS_LOST, TIMEOUT) and not isinstance(err, NotRecorded)


@dataclass
class Query:
    """The one place NVML is called from: failures become Gaps, GpuIsLost aborts the GPU."""

    nvml: object
    gaps: list[Gap]
    misses: list[nvml_grace.Miss] = dc_field(default_factory=list)  # quiet Grace misses, folded per machine
    health_misses: list[nvml_grace.Miss] = dc_field(default_factory=list)  # health values not read
    _checks: nvml_health.Checks | None = None

    @property
    def checks(self) -> nvml_health.Checks:
        if self._checks is None:
            self._checks = nvml_health.Checks(functools.partial(_raw_call, self), self.health_misses)
        return self._checks

    def __call__(self, what: str, fn: str, *args, lost_aborts: bool = True):
        try:
            value = self.nvml.call(fn, *args)
        except NvmlError as err:
            if lost_aborts and aborts(err):
                raise GpuLost(err, fn) from err
            detail = f"{err.name}: {err.detail}" if err.code == TIMEOUT and err.detail else err.name
            self.gaps.append(Gap(what=what, reason=gap_reason(err), source=f"nvml:{fn}", detail=detail))
            return None
        if fn in EXPECTED and not fits(value, EXPECTED[fn]):
            detail = f"unexpected value {repr(value)[:60]}: not {EXPECTED[fn]}"
            self.gaps.append(Gap(what=what, reason=GapReason.ERROR, source=f"nvml:{fn}", detail=detail))
            return None
        return value


def collect_nvml(nvml, gaps: list[Gap]) -> tuple[DriverInfo, tuple[Gpu, ...], tuple[GpuPair, ...]]:
    try:
        nvml.call("nvmlInit")
    except NvmlError as err:
        gaps.append(
            Gap(
                what="NVIDIA driver (NVML)",
                reason=gap_reason(err),
                source="nvml:nvmlInit",
                detail=_init_detail(err),
            )
        )
        return DriverInfo(nvml_available=False), (), ()
    query = Query(nvml, gaps)
    driver = _driver(query)
    count = query("GPU count", "nvmlDeviceGetCount", lost_aborts=False) or 0
    if not 0 <= count <= MAX_GPUS:
        gaps.append(Gap(what="GPU count", reason=GapReason.ERROR, source="nvml:nvmlDeviceGetCount",
                        detail=f"unexpected value {str(count)[:40]!r}"))
        count = 0
    gpus = tuple(_gpu(query, i) for i in range(count))
    alive = [g.index for g in gpus if not g.lost]
    pairs = tuple(_pair(query, a, b) for n, a in enumerate(alive) for b in alive[n + 1 :])
    _squash_pair_gaps(gaps)
    gaps.extend(machine_gaps(query.misses))
    gaps.extend(nvml_health.health_gaps(query.health_misses))
    with contextlib.suppress(NvmlError):  # a failed shutdown changes nothing we report
        nvml.call("nvmlShutdown")
    return driver, gpus, pairs


def _init_detail(err: NvmlError) -> str:
    if isinstance(err, NotRecorded):
        return "the recording holds no NVML answers"
    if err.code == 12:
        return "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver installed"
    if err.code == 9:
        return "the NVIDIA kernel driver is not loaded"
    return f"{err.name}: {err.detail}" if err.detail else err.name


def _driver(query: Query) -> DriverInfo:
    try:
        cuda = query.nvml.call("nvmlSystemGetCudaDriverVersion_v2")
    except NvmlError:
        cuda = query("CUDA driver version", "nvmlSystemGetCudaDriverVersion", lost_aborts=False)
    return DriverInfo(
        driver_version=query("driver version", "nvmlSystemGetDriverVersion", lost_aborts=False),
        cuda_driver_version=plain_int(cuda),
        nvml_version=query("NVML version", "nvmlSystemGetNVMLVersion", lost_aborts=False),
        nvml_available=True,
    )


def _gpu(query: Query, i: int) -> Gpu:
    try:
        return _gpu_fields(query, i)
    except GpuLost as stop:
        source = f"nvml:{stop.call}" if stop.call else "nvml"
        query.gaps.append(Gap(what=f"GPU {i}", reason=GapReason.ERROR, source=source, detail=stop.detail))
        return Gpu(index=i, lost=stop.lost)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, IndexError) as err:
        query.gaps.append(
            Gap(
                what=f"GPU {i}",
                reason=GapReason.ERROR,
                source="nvml",
                detail=f"unexpected value: {str(err)[:200]}",
            )
        )
        return Gpu(index=i)


def _gpu_fields(query: Query, i: int) -> Gpu:
    def q(what: str, fn: str, *args):
        return query(f"{what} of GPU {i}", fn, i, *args)

    pci = q("PCI info", "nvmlDeviceGetPciInfo") or {}
    capability = q("compute capability", "nvmlDeviceGetCudaComputeCapability")
    memory = q("memory size", "nvmlDeviceGetMemoryInfo") or {}
    mig = q("MIG mode", "nvmlDeviceGetMigMode")
    persistence = q("persistence mode", "nvmlDeviceGetPersistenceMode")
    call = functools.partial(_raw_call, query)
    c2c_links, c2c_gbps = nvml_grace.c2c(call, i, query.misses)
    return Gpu(
        index=i,
        name=q("name", "nvmlDeviceGetName"),
        uuid=q("UUID", "nvmlDeviceGetUUID"),
        serial=q("serial", "nvmlDeviceGetSerial"),
        pci_address=_address(pci.get("busId")),
        pcie_gen=q("PCIe generation", "nvmlDeviceGetCurrPcieLinkGeneration"),
        pcie_max_gen=q("max PCIe generation", "nvmlDeviceGetMaxPcieLinkGeneration"),
        pcie_gpu_max_gen=q("GPU max PCIe generation", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
        pcie_width=q("PCIe width", "nvmlDeviceGetCurrPcieLinkWidth"),
        pcie_max_width=q("max PCIe width", "nvmlDeviceGetMaxPcieLinkWidth"),
        cpu_affinity=mask_to_cpulist(q("CPU affinity", "nvmlDeviceGetCpuAffinity", AFFINITY_WORDS)),
        compute_capability=_capability(capability),
        memory_total_bytes=plain_int(memory.get("total")),
        nvlinks=_nvlinks(query, i),
        persistence_mode=None if persistence is None else bool(persistence),
        mig_mode=None if not mig or plain_int(mig[0]) is None else bool(mig[0]),
        fabric=_fabric(_fabric_info(query, i)),
        c2c_links=c2c_links,
        c2c_bandwidth_gbps=c2c_gbps,
        gpu_numa_id=nvml_grace.gpu_numa_id(call, i, query.misses),
        health=nvml_health.gpu_health(query.checks, i),
    )


def _address(text) -> str | None:
    return pciaddr.try_normalize(text) if isinstance(text, str) else None


def _capability(value: list | None) -> str | None:
    """``[9, 0]`` -> ``"9.0"``; any other shape is unknown."""
    if not value or len(value) != 2 or plain_int(value[0]) is None or plain_int(value[1]) is None:
        return None
    return f"{value[0]}.{value[1]}"


def _raw_call(query: Query, fn: str, *args):
    """One NVML call, errors raised as they come; GpuIsLost still aborts the GPU."""
    try:
        return query.nvml.call(fn, *args)
    except NvmlError as err:
        if aborts(err):
            raise GpuLost(err, fn) from err
        raise


def machine_gaps(misses: list[nvml_grace.Miss]) -> list[Gap]:
    """One Gap per (value, reason) for the whole machine: "C2C links of 8 GPUs" ("... of GPU 3" alone)."""
    groups: dict[tuple, list[int]] = {}
    for m in misses:
        detail = "not in the recording" if isinstance(m.error, NotRecorded) else m.error.name
        groups.setdefault((m.what, gap_reason(m.error), m.source, detail), []).append(m.gpu)
    return [
        Gap(
            what=f"{what} of {len(gpus)} GPUs" if len(gpus) > 1 else f"{what} of GPU {gpus[0]}",
            reason=reason,
            source=source,
            detail=detail,
        )
        for (what, reason, source, detail), gpus in groups.items()
    ]


def mask_to_cpulist(words: list[int] | None) -> str | None:
    """NVML's 64-bit affinity words (word k covers CPUs 64k..64k+63) -> ``"0-31,64-95"``."""
    if words is None:
        return None
    if not isinstance(words, list):
        raise TypeError(f"affinity mask is {type(words).__name__}, not a list of words")
    return CpuSet.from_mask_words(words).format() or None


def _nvlinks(query: Query, i: int) -> tuple[NvLink, ...]:
    start = len(query.gaps)
    links = _each_link(query, i)
    _squash_link_gaps(query.gaps, start, i)
    return links


def _squash_link_gaps(gaps: list[Gap], start: int, i: int) -> None:
    """One Gap per field and reason for all links of GPU ``i`` ("remote type of 18 NVLinks of GPU 0");
    a field that failed on one link only keeps that link's number."""
    added = gaps[start:]
    groups: dict[tuple, list[Gap]] = {}
    for g in added:
        key = (re.sub(r"NVLink \d+", "NVLink", g.what), g.reason, g.source, g.detail)
        groups.setdefault(key, []).append(g)
    del gaps[start:]
    for (what, reason, source, detail), members in groups.items():
        if len(members) == 1:
            gaps.append(members[0])
        else:
            gaps.append(Gap(what=what.replace("NVLink of", f"{len(members)} NVLinks of"), reason=reason,
                            source=source, detail=detail))


def _each_link(query: Query, i: int) -> tuple[NvLink, ...]:
    links, absent = [], False
    for link in range(_link_count(query, i)):
        try:
            state = query.nvml.call("nvmlDeviceGetNvLinkState", i, link)
        except NotRecorded as err:
            # a tape from a recorder that stopped at the first absent link ends right after it
            if not absent:
                query.gaps.append(
                    Gap(
                        what=f"NVLink {link} of GPU {i}",
                        reason=gap_reason(err),
                        source="nvml",
                        detail=err.name,
                    )
                )
            break
        except NvmlError as err:
            if aborts(err):
                raise GpuLost(err, "nvmlDeviceGetNvLinkState") from err
            absent = err.code in (INVALID_ARGUMENT, NOT_SUPPORTED)
            if not absent:
                query.gaps.append(
                    Gap(
                        what=f"NVLink {link} of GPU {i}",
                        reason=gap_reason(err),
                        source="nvml",
                        detail=err.name,
                    )
                )
            continue
        links.append(_link(query, i, link, bool(state)))
    return tuple(links)


def _link_count(query: Query, i: int) -> int:
    """Links to ask about: NVML's per-device link count field, else every link NVML can name."""
    try:
        answer = query.nvml.call("nvmlDeviceGetFieldValues", i, [NVLINK_LINK_COUNT_FIELD])
    except NvmlError as err:
        if aborts(err):
            raise GpuLost(err, "nvmlDeviceGetFieldValues") from err
        return MAX_LINKS
    entry = answer[0] if isinstance(answer, list) and answer and isinstance(answer[0], dict) else {}
    value = entry.get("value")
    if entry.get("nvmlReturn") != 0 or not isinstance(value, int) or not 0 <= value <= 4 * MAX_LINKS:
        return MAX_LINKS
    return value


def _link(query: Query, i: int, link: int, active: bool) -> NvLink:
    if not active:
        return NvLink(link=link, active=False)
    what = f"NVLink {link} of GPU {i}"
    remote = query(f"remote PCI of {what}", "nvmlDeviceGetNvLinkRemotePciInfo", i, link) or {}
    kind = query(f"remote type of {what}", "nvmlDeviceGetNvLinkRemoteDeviceType", i, link)
    return NvLink(
        link=link,
        active=True,
        version=query(f"version of {what}", "nvmlDeviceGetNvLinkVersion", i, link),
        remote_pci_address=_address(remote.get("busId")),
        remote_type=REMOTE_TYPE.get(kind) if kind is not None else None,
        errors=nvml_health.link_errors(query.checks, i, link),
    )


def _fabric_info(query: Query, i: int) -> dict | None:
    """``nvmlDeviceGetGpuFabricInfoV``, or the older ``nvmlDeviceGetGpuFabricInfo`` on a driver without it."""
    start = len(query.gaps)
    info = query(f"fabric info of GPU {i}", "nvmlDeviceGetGpuFabricInfoV", i)
    added = query.gaps[start:]
    missing = bool(added) and added[-1].reason is GapReason.MISSING and added[-1].detail == "FunctionNotFound"
    if info is None and missing:
        del query.gaps[start:]
        info = query(f"fabric info of GPU {i}", "nvmlDeviceGetGpuFabricInfo", i)
    return info


def _fabric(info: dict | None) -> GpuFabric | None:
    if not info:
        return None
    return GpuFabric(
        state=FABRIC_STATE.get(plain_int(info.get("state")), str(info.get("state"))[:40]),
        cluster_uuid=_uuid(info.get("clusterUuid")),
        clique_id=plain_int(info.get("cliqueId")),
        status=plain_int(info.get("status")),
        health_mask=plain_int(info.get("healthMask")),
    )


def _uuid(raw) -> str | None:
    if isinstance(raw, str) or raw is None:
        return raw[:200] if raw else None
    if not isinstance(raw, list) or len(raw) > 64 or any(plain_int(b) is None for b in raw):
        raise ValueError("fabric cluster UUID is neither text nor a list of bytes")
    text = bytes(int(b) & 0xFF for b in raw).hex()
    return None if not text.strip("0") else f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _pair(query: Query, a: int, b: int) -> GpuPair:
    values = {}
    for name, index in P2P_CAPS:
        code = query(f"{name} GPU{a}-GPU{b}", "nvmlDeviceGetP2PStatus", a, b, index, lost_aborts=False)
        values[name] = P2P_STATUS.get(code, str(code)) if code is not None else None
    level = query(
        f"common_ancestor GPU{a}-GPU{b}", "nvmlDeviceGetTopologyCommonAncestor", a, b, lost_aborts=False
    )
    return GpuPair(a=a, b=b, common_ancestor=ANCESTOR.get(level) if level is not None else None, **values)


def _squash_pair_gaps(gaps: list[Gap]) -> None:
    """One Gap per (pair field, reason) instead of one per GPU pair."""
    pair_gaps = [g for g in gaps if " GPU" in g.what and "-GPU" in g.what]
    if not pair_gaps:
        return
    counts = Counter((g.what.split(" GPU")[0], g.reason, g.source, g.detail) for g in pair_gaps)
    gaps[:] = [g for g in gaps if g not in pair_gaps]
    for (field, reason, source, detail), n in counts.items():
        gaps.append(Gap(what=f"{field} of {n} GPU pairs", reason=reason, source=source, detail=detail))
