"""``nvidia-smi -q`` (text) and ``nvidia-smi -q -x`` (XML): per GPU, what the machine model holds (name,
UUID, PCI address, PCIe generation and width current/max, persistence, MIG, fabric state and clique) and
what it does not (compute mode, ECC mode and uncorrectable errors, remapped rows), kept in
:class:`GpuQuery` as printed. GPU indexes are the order nvidia-smi prints them (PCI bus order, its own
numbering). A GPU section cut short is listed in ``damaged`` with the fields it lacks.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

import regex

from topodoc import pciaddr
from topodoc.model import DriverInfo, Gpu, GpuFabric


class SmiQueryParseError(ValueError):
    """Not nvidia-smi -q output."""


@dataclass(frozen=True)
class GpuQuery:
    """What ``nvidia-smi -q`` says about one GPU beyond :class:`~topodoc.model.Gpu`, as printed."""

    index: int
    line: int = 0
    compute_mode: str | None = None
    ecc_mode: str | None = None
    ecc_uncorrectable_volatile: int | None = None
    remapped_rows_pending: str | None = None
    remapped_rows_failure: str | None = None
    retired_pages_pending: str | None = None
    mig_current: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # every "path/to/key" -> value kept


@dataclass(frozen=True)
class SmiQueryResult:
    form: str  # "text" or "xml"
    gpus: tuple[Gpu, ...] = ()
    queries: tuple[GpuQuery, ...] = ()
    driver: DriverInfo = field(default_factory=DriverInfo)
    damaged: tuple[str, ...] = ()
    # GPUs nvidia-smi could not open: (PCI address, its reason as printed, line), e.g. "GPU is lost"
    unreachable: tuple[tuple[str, str, int], ...] = ()


# text key paths -> canonical names shared with the XML form
_TEXT_KEYS = {
    "Product Name": "name",
    "GPU UUID": "uuid",
    "Serial Number": "serial",
    "PCI/Bus Id": "bus_id",
    "PCI/GPU Link Info/PCIe Generation/Max": "gen_max",
    "PCI/GPU Link Info/PCIe Generation/Current": "gen_cur",
    "PCI/GPU Link Info/PCIe Generation/Device Max": "gen_dev_max",
    "PCI/GPU Link Info/PCIe Generation/Host Max": "gen_host_max",
    "PCI/GPU Link Info/Link Width/Max": "width_max",
    "PCI/GPU Link Info/Link Width/Current": "width_cur",
    "Persistence Mode": "persistence",
    "MIG Mode/Current": "mig",
    "Compute Mode": "compute_mode",
    "ECC Mode/Current": "ecc_mode",
    "ECC Errors/Volatile/DRAM Uncorrectable": "ecc_uncorr",
    "ECC Errors/Volatile/Double Bit/Total": "ecc_uncorr",
    "Remapped Rows/Pending": "remap_pending",
    "Remapped Rows/Remapping Failure Occurred": "remap_failure",
    "Retired Pages/Pending Page Blacklist": "retired_pending",
    "Retired Pages/Pending": "retired_pending",
    "Fabric/State": "fabric_state",
    "Fabric/Status": "fabric_status",
    "Fabric/CliqueId": "clique",
    "Fabric/ClusterUUID": "cluster",
}
_XML_KEYS = {
    "product_name": "name",
    "uuid": "uuid",
    "serial": "serial",
    "pci/pci_bus_id": "bus_id",
    "pci/pci_gpu_link_info/pcie_gen/max_link_gen": "gen_max",
    "pci/pci_gpu_link_info/pcie_gen/current_link_gen": "gen_cur",
    "pci/pci_gpu_link_info/pcie_gen/device_current_link_gen": "gen_dev_cur",
    "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen": "gen_dev_max",
    "pci/pci_gpu_link_info/pcie_gen/max_host_link_gen": "gen_host_max",
    "pci/pci_gpu_link_info/link_widths/max_link_width": "width_max",
    "pci/pci_gpu_link_info/link_widths/current_link_width": "width_cur",
    "persistence_mode": "persistence",
    "mig_mode/current_mig": "mig",
    "compute_mode": "compute_mode",
    "ecc_mode/current_ecc": "ecc_mode",
    "ecc_errors/volatile/dram_uncorrectable": "ecc_uncorr",
    "ecc_errors/volatile/double_bit/total": "ecc_uncorr",
    "remapped_rows/remapped_row_pending": "remap_pending",
    "remapped_rows/remapped_row_failure": "remap_failure",
    "fabric/state": "fabric_state",
    "fabric/status": "fabric_status",
    "fabric/cliqueId": "clique",
    "fabric/clusterUuid": "cluster",
}
_NO_HANDLE = regex.compile(
    r"Unable to determine the device handle for GPU ?"
    r"(?P<addr>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]):\s*(?P<why>[^.\n]{1,120}+)"
)
_GPU_HEAD = regex.compile(r"^GPU (?P<addr>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_TEXT_KV = regex.compile(r"^(?P<ind>\s*)(?P<k>[^:]+?)\s*(?::\s*(?P<v>.*?))?\s*$")


def parse(text: str) -> SmiQueryResult:
    if regex.search(r"<nvidia_smi_log[\s>]", text[:8192]):
        return _parse_xml(text)
    return _parse_text(text)


def _parse_text(text: str) -> SmiQueryResult:
    sections: list[tuple[str, int, dict[str, str]]] = []
    top: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        head = _GPU_HEAD.match(line)
        if head:
            sections.append((head["addr"], number, {}))
            _not_too_many(len(sections))
            stack = []
            continue
        m = _TEXT_KV.match(line)
        if not line.strip() or not m:
            continue
        indent = len(m["ind"].expandtabs(4))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = "/".join([s[1] for s in stack] + [m["k"]])
        if m["v"] is None or m["v"] == "":
            stack.append((indent, m["k"]))
        elif sections and indent > 0:
            sections[-1][2].setdefault(key, m["v"])
        else:
            top.setdefault(key, m["v"])
    unreachable = _unreachable(text)
    if not sections and not unreachable:
        raise SmiQueryParseError("no 'GPU 00000000:BB:DD.F' section: not nvidia-smi -q output")
    canon = [
        (addr, line, {_TEXT_KEYS[k]: v for k, v in f.items() if k in _TEXT_KEYS}, f)
        for addr, line, f in sections
    ]
    driver = DriverInfo(
        driver_version=top.get("Driver Version"), cuda_driver_version=_cuda(top.get("CUDA Version"))
    )
    return replace(_result("text", canon, driver), unreachable=unreachable)


def _not_too_many(gpus: int) -> None:
    """A paste of more GPU sections than one machine has (derive's ``MAX_GPUS``) is refused as soon as
    they are counted, not after every section is read (25 MB of 4,800 GPUs took 3.6 s and 110 MB, 17 MB of
    XML 1.8 s and 182 MB, before the machine builder refused the 129th GPU)."""
    from topodoc.numbers import check_count
    from topodoc.topology.derive import MAX_GPUS

    check_count("GPUs", gpus, MAX_GPUS)


def _unreachable(text: str) -> tuple[tuple[str, str, int], ...]:
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        m = _NO_HANDLE.search(line)
        if m:
            address = pciaddr.try_normalize(m["addr"])
            if address:
                out.append((address, m["why"].strip(), number))
    return tuple(out)


def _parse_xml(text: str) -> SmiQueryResult:
    from topodoc.parsers.xmlcut import XmlError, parse_prefix

    _not_too_many(text.count("<gpu "))  # before the tree is built
    try:
        root, cut = parse_prefix(text)
    except XmlError as err:
        raise SmiQueryParseError(str(err)) from err
    canon = []
    for i, gpu in enumerate(root.findall("gpu")):
        flat: dict[str, str] = {}
        _flatten(gpu, "", flat)
        canon.append(
            (gpu.get("id") or "", i, {_XML_KEYS[k]: v for k, v in flat.items() if k in _XML_KEYS}, flat)
        )
    if not canon:
        raise SmiQueryParseError("no <gpu> element in nvidia_smi_log")
    driver = DriverInfo(
        driver_version=(root.findtext("driver_version") or None),
        cuda_driver_version=_cuda(root.findtext("cuda_version")),
    )
    result = _result("xml", canon, driver)
    if cut:
        note = f"the XML stops early ({cut}): fields after the cut are unknown"
        result = replace(result, damaged=(note, *result.damaged))
    return result


def _flatten(node: ET.Element, prefix: str, out: dict[str, str]) -> None:
    for child in node:
        key = f"{prefix}{child.tag}"
        if len(child):
            _flatten(child, key + "/", out)
        else:
            out.setdefault(key, (child.text or "").strip())


def _cuda(text: str | None) -> int | None:
    m = regex.match(r"^\s*(\d+)\.(\d+)", text or "")
    return int(m[1]) * 1000 + int(m[2]) * 10 if m else None


def _num(text: str | None) -> int | None:
    m = regex.match(r"^\s*(\d+)", text or "")
    return int(m[1]) if m else None


def _known(text: str | None) -> str | None:
    return None if text is None or text.strip() in ("", "N/A", "Unknown Error", "[N/A]") else text.strip()


def _on(text: str | None) -> bool | None:
    value = (_known(text) or "").lower()
    return True if value == "enabled" else False if value == "disabled" else None


_NEEDED = ("name", "bus_id", "gen_max", "gen_cur", "width_max", "width_cur")


def _result(form: str, canon: list, driver: DriverInfo) -> SmiQueryResult:
    gpus, queries, damaged = [], [], []
    for index, (addr, line, f, _raw) in enumerate(canon):
        address = pciaddr.try_normalize(_known(f.get("bus_id")) or addr)
        missing = [k for k in _NEEDED if k not in f]
        if missing:
            where = f" (line {line})" if form == "text" else ""
            damaged.append(f"GPU {addr or index}{where}: {', '.join(missing)} not in the paste")
        gpus.append(
            Gpu(
                index=index,
                name=_known(f.get("name")),
                uuid=_known(f.get("uuid")),
                serial=_known(f.get("serial")),
                pci_address=address,
                pcie_gen=_num(f.get("gen_cur") or f.get("gen_dev_cur")),
                pcie_max_gen=_num(f.get("gen_max")),
                pcie_gpu_max_gen=_num(f.get("gen_dev_max")),
                pcie_width=_num(f.get("width_cur")),
                pcie_max_width=_num(f.get("width_max")),
                persistence_mode=_on(f.get("persistence")),
                mig_mode=_on(f.get("mig")),
                fabric=_fabric(f),
            )
        )
        queries.append(
            GpuQuery(
                index=index,
                line=line,
                compute_mode=_known(f.get("compute_mode")),
                ecc_mode=_known(f.get("ecc_mode")),
                ecc_uncorrectable_volatile=_num(_known(f.get("ecc_uncorr"))),
                remapped_rows_pending=_known(f.get("remap_pending")),
                remapped_rows_failure=_known(f.get("remap_failure")),
                retired_pages_pending=_known(f.get("retired_pending")),
                mig_current=_known(f.get("mig")),
                fields={k: v for k, v in f.items()},
            )
        )
    return SmiQueryResult(form, tuple(gpus), tuple(queries), driver, tuple(damaged))


_FABRIC_STATES = {
    "completed": "completed",
    "in progress": "in_progress",
    "not started": "not_started",
    "not supported": "not_supported",
    "n/a": "not_supported",
}


def _fabric(f: dict[str, str]) -> GpuFabric | None:
    state = f.get("fabric_state")
    if state is None:
        return None
    clique = _num(f.get("clique"))
    return GpuFabric(
        state=_FABRIC_STATES.get(state.strip().lower(), state.strip().lower()),
        cluster_uuid=_known(f.get("cluster")),
        clique_id=clique,
    )
