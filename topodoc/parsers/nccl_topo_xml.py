"""The NCCL topology XML (``NCCL_TOPO_DUMP_FILE`` writes it, ``NCCL_TOPO_FILE`` reads it): parse it into
a :class:`~topodoc.model.Snapshot`, and write one from a Snapshot.

Element and attribute names follow NCCL's ``src/graph/xml.cc`` and ``topo.cc``: ``<system version>``,
``<cpu numaid affinity arch vendor familyid modelid>``, nested ``<pci busid class vendor device
subsystem_vendor subsystem_device link_speed link_width>``, ``<gpu dev sm rank gdr>`` with ``<nvlink
target count tclass>``, and ``<nic>`` with ``<net name dev speed port guid maxconn gdr>``.

NCCL keeps only PCIe *switches* as ``pci`` nodes (it walks a device's sysfs path two components at a
time), hangs them off one CPU node per NUMA id, and does not record host bridges. Parsed back, every
bridge is a switch upstream port, and the devices of one CPU node are taken as under one host bridge
(NCCL's PHB); both are listed in the snapshot's gaps.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

import regex

from topodoc import pciaddr
from topodoc.cpuset import CpuSet, CpuSetError
from topodoc.model import Gap, GapReason, Gpu, Nic, NicPort, NumaNode, NvLink, PciDevice, PciLink, Snapshot
from topodoc.numbers import to_count
from topodoc.topology import pcitree

MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS: no GPU has more NVLinks

NVSWITCH_CLASS = 0x068000
MAX_CHARS = 16 * 1024 * 1024


class NcclTopoParseError(ValueError):
    """Not an NCCL topology XML, or a broken one."""


def parse(text: str, source: str = "nccl-topo") -> Snapshot:
    root = _root(text)
    pci: dict[str, PciDevice] = {}
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    numa: list[NumaNode] = []
    for cpu in root.iter("cpu"):
        node = _int(cpu.get("numaid"), 10)
        if node is not None and node >= 0:
            numa.append(NumaNode(node=node, cpulist=_mask_cpulist(cpu.get("affinity"))))
        for child in cpu.findall("pci"):
            _walk(child, None, node, pci, gpus, nics)
    if not pci and not gpus:
        raise NcclTopoParseError("no <cpu>/<pci> elements: nothing to read")
    extra: tuple[Gap, ...] = ()
    if not gpus:
        gpus, nics, extra = _by_class(pci, source)
    if root.get("_cut"):
        extra += (
            Gap(
                what="the rest of the file",
                reason=GapReason.ERROR,
                source=source,
                detail=f"the XML stops early: {root.get('_cut')}",
            ),
        )
    gaps = extra + (
        Gap(
            what="host bridges",
            reason=GapReason.NOT_RECORDED,
            source=source,
            detail="NCCL's topology file has no host bridges: devices under one <cpu> are taken as under one",
        ),
        Gap(
            what="switch ports",
            reason=GapReason.NOT_RECORDED,
            source=source,
            detail="NCCL keeps one pci node per switch: root and downstream ports are not in the file",
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
        pci=pci,
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
        nics=tuple(nics),
        numa=tuple(numa),
        gaps=gaps,
    )


def _by_class(pci: dict[str, PciDevice], source: str) -> tuple[list[Gpu], list[Nic], tuple[Gap, ...]]:
    """A topology file written for NCCL_TOPO_FILE often has only ``pci`` nodes with a class (GPUs 0x03xx,
    NICs 0x0207/0x0200): GPUs are then numbered in PCI bus order and NICs named by their address."""
    leaves = sorted(
        a for a, d in pci.items() if d.class_code is not None and d.class_code >> 16 in (0x02, 0x03)
    )
    gpus = [
        Gpu(index=i, pci_address=a, numa_node=pci[a].numa_node)
        for i, a in enumerate(x for x in leaves if pci[x].class_code >> 16 == 0x03)
    ]
    nics = [
        Nic(name=f"nic@{a}", kind="ib" if pci[a].class_code >> 8 == 0x0207 else "unknown", pci_address=a)
        for a in leaves
        if pci[a].class_code >> 16 == 0x02
    ]
    gap = Gap(
        what="GPU indexes and NIC names",
        reason=GapReason.NOT_RECORDED,
        source=source,
        detail="the file has no <gpu>/<nic> elements: GPUs are numbered in PCI bus order, NICs named by "
        "address",
    )
    return gpus, nics, (gap,) if gpus or nics else ()


def _root(text: str) -> ET.Element:
    from topodoc.parsers.xmlcut import XmlError, parse_prefix

    if len(text) > MAX_CHARS:
        raise NcclTopoParseError("larger than 16 MiB: not a topology file")
    try:
        root, cut = parse_prefix(text)
    except XmlError as err:
        raise NcclTopoParseError(str(err)) from err
    if root.tag != "system":
        raise NcclTopoParseError(f"root element is <{root.tag}>, not <system>: an excerpt, not a whole file")
    if cut:
        root.set("_cut", cut)
    return root


def _int(text: str | None, base: int = 0) -> int | None:
    try:
        return int(text, base) if text not in (None, "") else None
    except ValueError:
        return None


def _speed(text: str | None) -> float | None:
    m = regex.match(r"^\s*([\d.]+)\s*GT/s", text or "")
    return float(m[1]) if m else None


def _mask_cpulist(mask: str | None) -> str | None:
    """NCCL's affinity mask ``ffffffff,00000000`` (32-bit words, most significant first) -> ``32-63``."""
    if not mask or not regex.fullmatch(r"[0-9a-fA-F,]{1,4096}", mask):
        return None
    try:
        return CpuSet.from_hex(mask).format() or None
    except CpuSetError:
        return None


def _walk(node: ET.Element, parent: str | None, numa: int | None, pci: dict, gpus: list, nics: list) -> None:
    address = pciaddr.try_normalize(node.get("busid") or "")
    if address is None:
        for child in node.findall("pci"):
            _walk(child, parent, numa, pci, gpus, nics)
        return
    cls = _int(node.get("class"))
    bridge = cls is not None and cls >> 8 == 0x0604
    pci[address] = PciDevice(
        address=address,
        class_code=cls,
        vendor_id=_int(node.get("vendor")),
        device_id=_int(node.get("device")),
        subsystem_vendor_id=_int(node.get("subsystem_vendor")),
        subsystem_device_id=_int(node.get("subsystem_device")),
        numa_node=numa,
        link=PciLink(speed_gts=_speed(node.get("link_speed")), width=_int(node.get("link_width"), 10)),
        parent=parent,
        host_bridge=f"numa{numa}" if numa is not None else None,
        port_type="upstream" if bridge else "endpoint",
    )
    gpu = node.find("gpu")
    if gpu is not None:
        gpus.append(_gpu(gpu, address, numa, pci[address].link))
    nic = node.find("nic")
    if nic is not None:
        nics.extend(_nics(nic, address, cls))
    for child in node.findall("pci"):
        _walk(child, address, numa, pci, gpus, nics)


def _gpu(node: ET.Element, address: str, numa: int | None, link: PciLink) -> Gpu:
    sm = _int(node.get("sm"), 10)
    links: list[NvLink] = []
    for nv in node.findall("nvlink"):
        target = pciaddr.try_normalize(nv.get("target") or "")
        tclass = _int(nv.get("tclass"))
        kind = (
            "switch" if tclass == NVSWITCH_CLASS else "gpu" if tclass and tclass >> 16 == 0x03 else "unknown"
        )
        for _ in range(min(to_count(nv.get("count"), MAX_NVLINKS) or 1, MAX_NVLINKS - len(links))):
            links.append(NvLink(link=len(links), active=True, remote_pci_address=target, remote_type=kind))
    return Gpu(
        index=_int(node.get("dev"), 10) or 0,
        pci_address=address,
        numa_node=numa,
        compute_capability=f"{sm // 10}.{sm % 10}" if sm else None,
        pcie_gen=_gen(link.speed_gts),
        pcie_width=link.width,
        nvlinks=tuple(links),
    )


def _gen(speed: float | None) -> int | None:
    from topodoc.topology import rates

    return rates.gen_of(speed)


def _nics(node: ET.Element, address: str, cls: int | None) -> list[Nic]:
    """``<net>`` elements; the NIC's PCI class tells InfiniBand (0x0207) from Ethernet, i.e. RoCE (0x0200)."""
    kind = "roce" if cls is not None and cls >> 8 == 0x0200 else "ib"
    out = []
    for net in node.findall("net"):
        speed = _int(net.get("speed"), 10)
        port = _int(net.get("port"), 10) or 1
        out.append(
            Nic(
                name=net.get("name") or f"net{net.get('dev')}",
                kind=kind,
                pci_address=address,
                node_guid=guid_from_nccl(net.get("guid")),
                ports=(NicPort(port=port, rate_gbps=speed / 1000 if speed else None),),
            )
        )
    return out


# ---- writing ----


def write(snapshot: Snapshot, pci_only: bool = False) -> str:
    """The NCCL topology XML of ``snapshot``: switches (upstream ports) as nested ``pci`` nodes under one
    ``cpu`` per NUMA node; GPUs and RDMA NICs as leaves (left out with ``pci_only``, as NVIDIA suggests for
    a VM's NCCL_TOPO_FILE: NCCL discovers them itself)."""
    pci = snapshot.pci
    ends = [(g.pci_address, ("gpu", g)) for g in snapshot.gpus if g.pci_address in pci]
    ends += [
        (n.pci_address, ("nic", n))
        for n in snapshot.nics
        if n.pci_address in pci and n.kind in ("ib", "roce", "efa")
    ]
    tree: dict = {}
    payload: dict[str, list] = {}
    for address, item in ends:
        path = [
            a
            for a in reversed(pcitree.chain(pci, address)[1:])
            if pcitree.port_kind(pci, a) == pcitree.UPSTREAM
        ]
        numa = pcitree.numa_of(pci, address)
        node = tree.setdefault(numa if numa is not None and numa >= 0 else -1, {})
        for bridge in path:
            node = node.setdefault(bridge, {})
        node.setdefault(address, {})
        payload.setdefault(address, []).append(item)
    cpus = {n.node: n for n in snapshot.numa}
    out = ['<system version="1">']
    for numa in sorted(tree):
        attrs = {"numaid": str(numa)}
        if numa in cpus and cpus[numa].cpulist:
            attrs["affinity"] = _cpulist_mask(cpus[numa].cpulist)
        out.append(f"  <cpu{_attrs(attrs)}>")
        _write_pci(tree[numa], pci, payload, out, 2, pci_only)
        out.append("  </cpu>")
    out.append("</system>")
    return "\n".join(out) + "\n"


def _write_pci(level: dict, pci: dict, payload: dict, out: list, depth: int, pci_only: bool) -> None:
    pad = "  " * depth
    for address in sorted(level):
        dev = pci[address]
        attrs = {"busid": address}
        for key, value in (
            ("class", dev.class_code),
            ("vendor", dev.vendor_id),
            ("device", dev.device_id),
            ("subsystem_vendor", dev.subsystem_vendor_id),
            ("subsystem_device", dev.subsystem_device_id),
        ):
            if value is not None:
                attrs[key] = f"0x{value:06x}" if key == "class" else f"0x{value:04x}"
        if dev.link.speed_gts:
            attrs["link_speed"] = f"{dev.link.speed_gts:.1f} GT/s PCIe"
        if dev.link.width:
            attrs["link_width"] = str(dev.link.width)
        items = [] if pci_only else payload.get(address, [])
        if not level[address] and not items:
            out.append(f"{pad}<pci{_attrs(attrs)}/>")
            continue
        out.append(f"{pad}<pci{_attrs(attrs)}>")
        for kind, item in items:
            out.extend(_gpu_xml(item, pad + "  ") if kind == "gpu" else _nic_xml(item, pad + "  "))
        _write_pci(level[address], pci, payload, out, depth + 1, pci_only)
        out.append(f"{pad}</pci>")


def _gpu_xml(gpu: Gpu, pad: str) -> list[str]:
    attrs = {"dev": str(gpu.index)}
    if gpu.compute_capability and regex.fullmatch(r"\d+\.\d", gpu.compute_capability):
        attrs["sm"] = gpu.compute_capability.replace(".", "")
    counts: dict[tuple[str, str], int] = {}
    for link in gpu.nvlinks:
        if link.active and link.remote_pci_address:
            key = (link.remote_pci_address, "0x068000" if link.remote_type == "switch" else "0x030200")
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return [f"{pad}<gpu{_attrs(attrs)}/>"]
    lines = [f"{pad}<gpu{_attrs(attrs)}>"]
    lines += [
        f"{pad}  <nvlink{_attrs({'target': t, 'count': str(c), 'tclass': k})}/>"
        for (t, k), c in sorted(counts.items())
    ]
    return lines + [f"{pad}</gpu>"]


def _nic_xml(nic: Nic, pad: str) -> list[str]:
    lines = [f"{pad}<nic>"]
    for i, port in enumerate(nic.ports or (NicPort(port=1),)):
        attrs = {"name": nic.name, "dev": str(i), "port": str(port.port)}
        if port.rate_gbps:
            attrs["speed"] = str(int(port.rate_gbps * 1000))
        guid = guid_to_nccl(nic.node_guid)
        if guid:
            attrs["guid"] = guid
        lines.append(f"{pad}  <net{_attrs(attrs)}/>")
    return lines + [f"{pad}</nic>"]


# GUIDs: sysfs and ibstat spell a node GUID as its 8 bytes in wire order, "58a2:e103:00b1:7ca8"; NCCL keeps
# the verbs GUID (a big-endian 64-bit field) in a host-order uint64 and dumps it with "0x%lx"
# (src/graph/topo.cc xmlInitAttrUint64), so on x86 the dump shows the bytes reversed, "0xa87cb10003e1a258",
# and reads it back with strtoull(str, NULL, 16) (src/graph/topo.cc): a colon-separated spelling would be
# cut at its first group and two adapters of one vendor would collapse to one value.


def guid_to_nccl(guid: str | None) -> str | None:
    """A GUID as NCCL's topology dumps spell it ("0x" + lowercase hex of the little-endian value)."""
    raw = _guid_bytes(guid)
    return None if raw is None else f"0x{int.from_bytes(raw, 'little'):x}"


def guid_from_nccl(text: str | None) -> str | None:
    """NCCL's "0x..." GUID back to the sysfs spelling the model keeps ("58a2:e103:00b1:7ca8")."""
    if not text:
        return None
    value = text.strip().lower()
    if value.startswith("0x") and regex.fullmatch(r"0x[0-9a-f]{1,16}", value):
        raw = int(value, 16).to_bytes(8, "little")
        return ":".join(raw[i : i + 2].hex() for i in range(0, 8, 2))
    return text  # another spelling: kept as written (the model holds what the input said)


def _guid_bytes(guid: str | None) -> bytes | None:
    if not guid:
        return None
    digits = guid.strip().lower()
    if digits.startswith("0x"):  # already NCCL's spelling: back to wire order first
        return bytes.fromhex(guid_from_nccl(digits).replace(":", "")) if guid_from_nccl(digits) else None
    digits = digits.replace(":", "")
    return bytes.fromhex(digits) if regex.fullmatch(r"[0-9a-f]{16}", digits) else None


def _attrs(attrs: dict[str, str]) -> str:
    return "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())


def _cpulist_mask(cpulist: str) -> str:
    try:
        return CpuSet.parse(cpulist).hex_words(32)
    except CpuSetError:
        return CpuSet().hex_words(32)
