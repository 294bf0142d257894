"""hwloc XML (``lstopo --of xml``, hwloc 1.x and 2.x): parse it into a :class:`~topodoc.model.Snapshot`.

PCI bridges and devices become :class:`~topodoc.model.PciDevice` objects with their parents; a host
bridge (``bridge_type="0-1"``) names the root bus of its children; the NUMA node of an I/O object is the
NUMA node attached to its nearest ancestor (hwloc 2) or its enclosing NUMANode (hwloc 1). OS devices
give GPU indexes and names (``nvmlN``/``cudaN``/``openclN``) and RDMA devices (``mlx5_0``, OpenFabrics).
``pci_link_speed`` is a GB/s figure, not a generation and width, so PCIe links stay unknown (a gap).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import regex

from topodoc import pciaddr
from topodoc.cpuset import CpuSet, CpuSetError
from topodoc.model import Gap, GapReason, Gpu, HostInfo, Nic, NumaNode, PciDevice, Snapshot

MAX_CHARS = 64 * 1024 * 1024


class HwlocParseError(ValueError):
    """Not an hwloc XML topology."""


_PCI_TYPE = regex.compile(
    r"^(?P<cls>[0-9a-fA-F]{4}) \[(?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})\] "
    r"\[(?P<sv>[0-9a-fA-F]{4}):(?P<sd>[0-9a-fA-F]{4})\]"
)
_GPU_OS = regex.compile(r"^(?:nvml|cuda|opencl\d+d)(?P<i>\d+)$")


def parse(text: str, source: str = "hwloc") -> Snapshot:
    if len(text) > MAX_CHARS:
        raise HwlocParseError("larger than 64 MiB")
    from topodoc.parsers.xmlcut import XmlError, parse_prefix

    try:
        root, cut = parse_prefix(text)
    except XmlError as err:
        raise HwlocParseError(str(err)) from err
    if cut:
        raise HwlocParseError(f"broken XML: {cut}")
    if root.tag != "topology":
        raise HwlocParseError(f"root element is <{root.tag}>, not <topology>")
    state = _State()
    for obj in root.findall("object"):
        state.walk(obj, None, None, None)
    if not state.pci and not state.numa:
        raise HwlocParseError("no NUMANode or PCI objects")
    host = HostInfo(
        cpu_model=state.info.get("CPUModel"),
        cpu_vendor=state.info.get("CPUVendor"),
        sockets=state.packages or None,
        logical_cpus=state.pus or None,
    )
    gpus = tuple(sorted(state.gpus.values(), key=lambda g: g.index))
    gaps = (
        Gap(
            what="PCIe link generation and width",
            reason=GapReason.NOT_RECORDED,
            source=source,
            detail="hwloc records a GB/s figure per link (pci_link_speed), not generation and width",
        ),
        Gap(
            what="NVLink",
            reason=GapReason.NOT_RECORDED,
            source=source,
            detail="hwloc XML keeps NVLink only as a distance matrix",
        ),
        Gap(
            what="kernel",
            reason=GapReason.NOT_RECORDED,
            source=source,
            detail="no kernel, driver or peer-memory state in the file",
        ),
    )
    return Snapshot(
        source=source,
        host=host,
        pci=state.pci,
        gpus=gpus,
        nics=tuple(state.nics),
        numa=tuple(sorted(state.numa.values(), key=lambda n: n.node)),
        gaps=gaps,
    )


class _State:
    def __init__(self) -> None:
        self.pci: dict[str, PciDevice] = {}
        self.gpus: dict[int, Gpu] = {}
        self.nics: list[Nic] = []
        self.numa: dict[int, NumaNode] = {}
        self.info: dict[str, str] = {}
        self.packages = 0
        self.pus = 0

    def walk(self, obj: ET.Element, numa: int | None, parent: str | None, host_bridge: str | None) -> None:
        kind = obj.get("type")
        for info in obj.findall("info"):
            self.info.setdefault(info.get("name") or "", info.get("value") or "")
        if kind == "Package":
            self.packages += 1
        elif kind == "PU":
            self.pus += 1
        numa = self._numa_here(obj, numa)
        address = None
        if kind in ("Bridge", "PCIDev"):
            address = pciaddr.try_normalize(obj.get("pci_busid") or "")
            if address is None and obj.get("bridge_type", "").startswith("0-"):
                host_bridge = self._host_bridge(obj.get("bridge_pci"))
            elif address is not None:
                self.pci[address] = self._device(obj, address, numa, parent, host_bridge)
        elif kind == "OSDev":
            self._osdev(obj, parent)
        for child in obj.findall("object"):
            self.walk(child, numa, address or parent, host_bridge)

    def _numa_here(self, obj: ET.Element, numa: int | None) -> int | None:
        if obj.get("type") == "NUMANode":
            node = int(obj.get("os_index") or 0)
            self.numa.setdefault(
                node,
                NumaNode(
                    node=node,
                    cpulist=_cpulist(obj.get("cpuset")),
                    memory_total_kb=_kb(obj.get("local_memory")),
                ),
            )
            return node
        for child in obj.findall("object"):
            if child.get("type") == "NUMANode":  # hwloc 2: memory children hang off the CPU-side parent
                node = int(child.get("os_index") or 0)
                return node
        return numa

    @staticmethod
    def _host_bridge(bridge_pci: str | None) -> str | None:
        m = regex.match(r"^([0-9a-fA-F]{4}):\[([0-9a-fA-F]{2})", bridge_pci or "")
        return f"pci{m[1].lower()}:{m[2].lower()}" if m else None

    @staticmethod
    def _device(
        obj: ET.Element, address: str, numa: int | None, parent: str | None, host_bridge: str | None
    ) -> PciDevice:
        m = _PCI_TYPE.match(obj.get("pci_type") or "")
        cls = int(m["cls"], 16) << 8 if m else None
        return PciDevice(
            address=address,
            class_code=cls,
            vendor_id=int(m["v"], 16) if m else None,
            device_id=int(m["d"], 16) if m else None,
            subsystem_vendor_id=int(m["sv"], 16) if m else None,
            subsystem_device_id=int(m["sd"], 16) if m else None,
            numa_node=numa,
            parent=parent,
            host_bridge=host_bridge if parent is None else None,
        )

    def _osdev(self, obj: ET.Element, parent: str | None) -> None:
        name = obj.get("name") or ""
        infos = {i.get("name"): i.get("value") for i in obj.findall("info")}
        gpu = _GPU_OS.match(name)
        if gpu and parent and (infos.get("GPUVendor") or "").startswith("NVIDIA"):
            index = int(gpu["i"])
            if index not in self.gpus or name.startswith("nvml"):
                self.gpus[index] = Gpu(
                    index=index,
                    name=infos.get("GPUModel"),
                    uuid=infos.get("NVIDIAUUID"),
                    pci_address=parent,
                    numa_node=self.pci[parent].numa_node if parent in self.pci else None,
                )
        elif _rdma_osdev(obj, name) and parent and not name.startswith(("ib", "en", "eth")):
            self.nics.append(Nic(name=name, kind="ib", pci_address=parent, node_guid=infos.get("NodeGUID")))


def _rdma_osdev(obj: ET.Element, name: str) -> bool:
    """An OpenFabrics OS device (``mlx5_0``, ``hfi1_0``): osdev_type 3 (hwloc 2), subtype OpenFabrics."""
    return obj.get("osdev_type") == "3" or obj.get("subtype") == "OpenFabrics" or name.startswith("mlx")


def _cpulist(mask: str | None) -> str | None:
    if not mask or not regex.fullmatch(r"0x[0-9a-fA-F,x]{1,4096}", mask):
        return None
    try:
        return CpuSet.from_hex(mask).format() or None
    except CpuSetError:
        return None


def _kb(text: str | None) -> int | None:
    return int(text) // 1024 if text and text.isdigit() else None
