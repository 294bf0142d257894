"""The typed snapshot of one machine: frozen dataclasses and enums, nothing else.

Collectors fill it, rules read it, renderers format it. Keys are hardware identities (canonical
PCI address ``0000:1a:00.0``, GPU index/UUID, NIC name); relations are by key. Units are in the field
names. A value that could not be read is ``None`` with a :class:`Gap` beside it saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from topodoc.schema_versions import VERSIONS

SCHEMA = "topodoc.snapshot"
SCHEMA_VERSION = VERSIONS[SCHEMA]  # 1 had no name, 2 no health values; codec.load reads both


class GapReason(str, Enum):
    UNSUPPORTED = "unsupported"  # the hardware/driver does not offer it (NVML NotSupported)
    MISSING = "missing"  # the file/function/binary does not exist here
    PERMISSION = "permission"  # exists, but we may not read it (EACCES, NVML NoPermission)
    ERROR = "error"  # reading it failed (garbage, timeout, GPU lost, ...)
    NOT_RECORDED = "not_recorded"  # a replayed recording does not hold it


@dataclass(frozen=True, kw_only=True)
class Gap:
    """Why a value is missing. ``what`` names the value, ``source`` where we tried to read it."""

    what: str
    reason: GapReason
    source: str = ""
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class HostInfo:
    hostname: str | None = None
    kernel: str | None = None
    os_name: str | None = None
    cpu_model: str | None = None
    cpu_vendor: str | None = None  # "GenuineIntel", "AuthenticAMD", ...
    sockets: int | None = None
    logical_cpus: int | None = None
    virtualized: bool | None = None  # hypervisor flag in /proc/cpuinfo
    boot_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class PciLink:
    """Link state of a PCI function: current and maximum speed (GT/s) and width (lanes)."""

    speed_gts: float | None = None
    width: int | None = None
    max_speed_gts: float | None = None
    max_width: int | None = None


@dataclass(frozen=True, kw_only=True)
class PciDevice:
    address: str  # canonical "0000:1a:00.0"
    class_code: int | None = None  # 0x030200
    vendor_id: int | None = None
    device_id: int | None = None
    subsystem_vendor_id: int | None = None
    subsystem_device_id: int | None = None
    driver: str | None = None
    numa_node: int | None = None  # -1 kept as -1: firmware gave none
    local_cpulist: str | None = None
    link: PciLink = field(default_factory=PciLink)
    parent: str | None = None  # upstream PCI function (bridge/port) address, None on a root bus
    host_bridge: str | None = None  # "pci0000:00": the root complex this device hangs from
    port_type: str | None = None  # "root_port", "upstream", "downstream", "endpoint", ... when known
    iommu_group: int | None = None
    acs_ctrl: int | None = None  # ACS control register bits; None = not readable (see gaps)
    aer: dict[str, int] = field(default_factory=dict)  # "correctable"/"fatal"/"nonfatal" totals
    sysfs_path: str | None = None  # real path under /sys/devices


@dataclass(frozen=True, kw_only=True)
class NvLink:
    link: int
    active: bool | None = None
    version: int | None = None  # NVML enum value (A100 reports 5 == NVLink 3.1)
    remote_pci_address: str | None = None
    remote_type: str | None = None  # "gpu", "switch", "ibmnpu", "unknown"
    # NVLink error counters since the driver loaded (nvmlDeviceGetNvLinkErrorCounter), by name:
    # "replay", "recovery", "crc_flit", "crc_data"; a counter the GPU does not offer is absent
    errors: dict[str, int] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True, kw_only=True)
class GpuFabric:
    """NVL72-style GPU fabric identity (nvmlDeviceGetGpuFabricInfoV)."""

    state: str | None = None  # "not_supported", "not_started", "in_progress", "completed"
    cluster_uuid: str | None = None
    clique_id: int | None = None
    status: int | None = None
    health_mask: int | None = None


@dataclass(frozen=True, kw_only=True)
class GpuHealth:
    """What NVML says about a GPU's health (:mod:`topodoc.probe.nvml_health`); None = not read (a Gap
    says why, once per machine). ECC counts are since the last driver load (volatile) or over the
    GPU's life (aggregate); SRAM/DRAM split aggregate counts where the GPU reports them apart."""

    ecc_enabled: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    ecc_sram_corrected: int | None = None
    ecc_sram_uncorrected: int | None = None
    ecc_dram_corrected: int | None = None
    ecc_dram_uncorrected: int | None = None
    # dynamic page retirement (before Ampere): pages retired for multiple single-bit / double-bit errors
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    # row remapping (Ampere and later)
    remapped_rows_corrected: int | None = None
    remapped_rows_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    remap_histogram: dict[str, int] | None = None  # banks by spare rows left: max/high/partial/low/none
    clock_event_mask: int | None = None  # nvmlDeviceGetCurrentClocksEventReasons bits
    clock_events: tuple[str, ...] | None = None  # the mask's bits by name ("hw_slowdown", ...)
    temperature_c: int | None = None
    slowdown_temperature_c: int | None = None
    shutdown_temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_address: str | None = None
    pcie_gen: int | None = None
    pcie_max_gen: int | None = None  # max for this device in this slot
    pcie_gpu_max_gen: int | None = None  # max the GPU itself supports
    pcie_width: int | None = None
    pcie_max_width: int | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None  # cpulist "0-31"
    compute_capability: str | None = None  # "9.0"
    memory_total_bytes: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    persistence_mode: bool | None = None
    mig_mode: bool | None = None
    fabric: GpuFabric | None = None
    lost: bool = False  # NVML said GPU_IS_LOST for this index
    # Grace (GH200/GB200): NVLink-C2C links to the CPU that are up (0 = none, None = unknown) and their
    # total bandwidth per direction as NCCL computes it (per-link max bandwidth x links / 1000, GB/s)
    c2c_links: int | None = None
    c2c_bandwidth_gbps: float | None = None
    # the GPU memory's own NUMA node on coherent systems (nvmlDeviceGetNumaNodeId, "GPU NUMA ID" in
    # nvidia-smi topo -m); distinct from ``numa_node``, the CPU node nearest the GPU
    gpu_numa_id: int | None = None
    health: GpuHealth | None = field(default=None, kw_only=True)


@dataclass(frozen=True, kw_only=True)
class GpuPair:
    """What NVML says about one unordered GPU pair (a < b)."""

    a: int
    b: int
    p2p_read: str | None = None  # "OK", "CNS", "GNS", "TNS", "NS", "DR", "U"
    p2p_write: str | None = None
    p2p_nvlink: str | None = None
    p2p_atomics: str | None = None
    common_ancestor: str | None = None  # "PIX", "PXB", "PHB", "NODE", "SYS", "INTERNAL"
    # NV<n> as `nvidia-smi topo -m` printed it for this pair: the NVLink count of a machine whose per-link
    # NVML data was not given (a pasted matrix); None when not printed or not NVLink
    nvlink_count: int | None = None


@dataclass(frozen=True, kw_only=True)
class Gid:
    index: int
    gid: str
    type: str | None = None  # "RoCE v2", "IB/RoCE v1"
    netdev: str | None = None


@dataclass(frozen=True, kw_only=True)
class NicPort:
    port: int
    state: str | None = None  # "ACTIVE", "DOWN", ...
    phys_state: str | None = None  # "LinkUp", "Disabled", ...
    rate_gbps: float | None = None
    rate_text: str | None = None  # "400 Gb/sec (4X NDR)"
    link_layer: str | None = None  # "InfiniBand" or "Ethernet"
    gids: tuple[Gid, ...] = ()
    # error counters of the port (``ports/N/counters`` and the RoCE ``ports/N/hw_counters``) by file
    # name, since the driver loaded; only the ones topodoc watches (probe.nic_counters.COUNTERS)
    counters: dict[str, int] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True, kw_only=True)
class Nic:
    """An RDMA device (``/sys/class/infiniband``), an EFA device, or a plain network function.

    ``kind``: "ib", "roce", "efa", "gvnic", "ethernet", "slingshot", "unknown".
    """

    name: str
    kind: str
    pci_address: str | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    driver: str | None = None
    netdevs: tuple[str, ...] = ()
    ports: tuple[NicPort, ...] = ()
    fw_version: str | None = None
    hca_type: str | None = None
    node_guid: str | None = None


@dataclass(frozen=True, kw_only=True)
class NetInterface:
    name: str
    pci_address: str | None = None
    driver: str | None = None
    speed_mbps: int | None = None
    operstate: str | None = None
    mtu: int | None = None
    mac: str | None = None
    virtual: bool = False  # no PCI device behind it (lo, bridges, veth, ...)


@dataclass(frozen=True, kw_only=True)
class NumaNode:
    node: int
    cpulist: str | None = None
    memory_total_kb: int | None = None
    distances: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class KernelInfo:
    release: str | None = None
    cmdline: str | None = None
    iommu_mode: str | None = None  # "off", "passthrough", "translated", "unknown"
    iommu_groups: int | None = None
    nvidia_driver_version: str | None = None  # from /proc/driver/nvidia/version
    nvidia_open_kernel_module: bool | None = None
    peermem_module: str | None = None  # "nvidia_peermem", "nv_peer_mem" or None when absent
    peermem_version: str | None = None
    dmabuf_supported: bool | None = None


@dataclass(frozen=True, kw_only=True)
class MatrixGpu:
    name: str  # "GPU0"
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class MatrixNic:
    name: str  # "NIC0" or "mlx5_0" (old drivers)
    device: str | None = None  # from the NIC legend


@dataclass(frozen=True, kw_only=True)
class ConnectionMatrix:
    """An ``nvidia-smi topo -m`` style matrix (or ``-p2p`` when ``kind == "p2p"``).

    ``links[row][col]`` holds each cell exactly as printed ("NV12", "PIX", "X"), with ``SOC``
    normalised to ``SYS``; rows and columns use the names the matrix uses.
    """

    kind: str = "topo"  # "topo" or "p2p"
    gpus: tuple[MatrixGpu, ...] = ()
    nics: tuple[MatrixNic, ...] = ()
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    p2p_mode: str | None = None  # "r", "w", "n", "a", "p" for -p2p matrices
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DriverInfo:
    driver_version: str | None = None
    cuda_driver_version: int | None = None  # 12040 == 12.4
    nvml_version: str | None = None
    nvml_available: bool = False


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Everything the collectors saw on one machine (live or replayed)."""

    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION
    source: str = "live"  # "live" or the recording's name
    topodoc_version: str | None = None
    recorded_at: str | None = None
    host: HostInfo = field(default_factory=HostInfo)
    kernel: KernelInfo = field(default_factory=KernelInfo)
    driver: DriverInfo = field(default_factory=DriverInfo)
    pci: dict[str, PciDevice] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    gpu_pairs: tuple[GpuPair, ...] = ()
    nics: tuple[Nic, ...] = ()
    net: tuple[NetInterface, ...] = ()
    numa: tuple[NumaNode, ...] = ()
    process_cpuset: str | None = None
    smi_topo: ConnectionMatrix | None = None
    gaps: tuple[Gap, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NcclTestsResult:
    """One half of an nccl-tests row (out-of-place or in-place), values as printed.

    ``algbw``/``busbw`` are GB/s with 1 GB = 1e9 bytes. ``wrong`` is the ``#wrong`` count of newer
    builds, or the maximum relative ``error`` of old builds (see ``NcclTestsRun.wrong_column``); ``None``
    where the test printed ``N/A`` (validation off, or in-place sendrecv/alltoall).
    """

    time_us: float | None = None
    algbw: float | None = None
    busbw: float | None = None
    wrong: int | float | None = None


@dataclass(frozen=True, kw_only=True)
class NcclTestsRow:
    size: int  # bytes
    count: int | None = None  # elements
    type: str | None = None  # "float", "bfloat16", ...
    redop: str | None = None  # "sum", "none", ...
    root: int | None = None  # -1 for rootless collectives; None on old builds without the column
    out_of_place: NcclTestsResult | None = None
    in_place: NcclTestsResult | None = None
    line: int = 0  # 1-based line number in the input


@dataclass(frozen=True, kw_only=True)
class NcclTestsDevice:
    """One ``#  Rank  3 Group  0 Pid 1234 on host device  3 [0x4a] NVIDIA A100-SXM4-80GB`` line."""

    rank: int
    host: str | None = None
    device: int | None = None
    bus_id: str | None = None  # as printed: "0x4a" (older) or "0000:4a:00" (newer)
    name: str | None = None
    group: int | None = None
    pid: int | None = None


@dataclass(frozen=True, kw_only=True)
class NcclTestsRun:
    """One nccl-tests invocation's output (``all_reduce_perf`` and friends)."""

    collective: str | None = None  # "all_reduce", "all_gather", ... None when it cannot be told
    program: str | None = None  # "all_reduce_perf" when the output names it
    nranks: int | None = None
    nodes: int | None = None  # distinct hosts in the device list
    devices: tuple[NcclTestsDevice, ...] = ()
    rows: tuple[NcclTestsRow, ...] = ()
    avg_bus_bandwidth: float | None = None  # GB/s, as printed in "# Avg bus bandwidth"
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK|FAILED"
    wrong_column: str = "#wrong"  # "#wrong" (count) or "error" (old builds: max relative error)
    time_column: str = "time"  # "time" or "cputime"
    complete: bool = False  # the footer was seen; False for a truncated or crashed run
    params: dict[str, str] = field(default_factory=dict)  # nThread, nGpus, minBytes, ... as printed
    nccl_tests_version: str | None = None
    nccl_version: str | None = None  # "2.21.5" from an interleaved "NCCL version" line
    failures: tuple[str, ...] = ()  # "Test NCCL failure ..." / "Test failure ..." lines
    ignored_lines: int = 0  # NCCL INFO/WARN and launcher lines skipped
    unparsed_lines: tuple[int, ...] = ()  # line numbers of lines that matched nothing known
