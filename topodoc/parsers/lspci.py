"""``lspci`` output: ``-vvv`` / ``-nn`` device blocks, ``-tv`` / ``-vvvt`` trees, and grep-trimmed pastes.

From device blocks: class, vendor/device IDs (``-nn``), port type (``Express (v2) Root Port``), link
capability vs status (``LnkCap``/``LnkSta``), ACS capability and control, NUMA node, IOMMU group, driver;
each bridge's ``Bus: primary=.. secondary=..`` gives its children, so the tree is rebuilt without ``-t``.
From a tree: each function's parent bridge and root bus. What could not be read is listed in
``damaged`` with its line (a cut line, ACS lines whose device header was trimmed away), never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice

import regex

from topodoc import pciaddr
from topodoc.model import PciDevice, PciLink


class LspciParseError(ValueError):
    """Nothing in the text is lspci output (or more of it than any machine prints)."""


# PCI functions read from one paste: a whole PCI segment holds 65,536 and the largest GPU servers list a few
# thousand (SR-IOV virtual functions included); a paste with more is refused before it costs memory
# (a 64 MB paste of 292,000 GPUs took 12 s and 650 MB before the machine builder refused its 129th GPU)
MAX_FUNCTIONS = 16384
NOTES_LIMIT = 100  # notes on lines not read: the first ones, then a count


class _Damaged(list):
    """The notes on lines not read: the first :data:`NOTES_LIMIT` kept, the rest counted."""

    def __init__(self) -> None:
        super().__init__()
        self.more = 0

    def append(self, note: str) -> None:
        if len(self) < NOTES_LIMIT:
            super().append(note)
        else:
            self.more += 1

    def notes(self) -> tuple[str, ...]:
        return (*self, f"{self.more} more line(s) not read") if self.more else tuple(self)


def _too_many(count: int) -> None:
    if count > MAX_FUNCTIONS:
        raise LspciParseError(
            f"more than {MAX_FUNCTIONS:,} PCI functions: more than any machine lists (at most "
            f"{MAX_FUNCTIONS:,} are read)"
        )


@dataclass(frozen=True)
class LspciDevice:
    address: str
    description: str = ""
    line: int = 0
    acs_cap: int | None = None


@dataclass(frozen=True)
class LspciResult:
    form: str  # "verbose" (-v/-vv/-vvv blocks), "plain" (one line per device), "tree" (-t), "fragment"
    devices: dict[str, PciDevice] = field(default_factory=dict)
    info: dict[str, LspciDevice] = field(default_factory=dict)
    acs_lines: tuple[tuple[int, int], ...] = ()  # (line, ACSCtl bits) lines with no device header
    damaged: tuple[str, ...] = ()


_HEADER = regex.compile(
    r"^(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])\s"
    r"(?P<cls>[^:\[]{2,60}?)(?:\s\[(?P<clsid>[0-9a-fA-F]{4})\])?:\s(?P<desc>.*+)$"
)
_IDS = regex.compile(r"\[(?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})\](?:\s*\(rev [0-9a-fA-F]{2}\))?\s*$")
_LNKCAP = regex.compile(
    r"^\s+LnkCap:\s+(?:Port #\d++,\s*)?Speed (?P<s>[\d.]++)GT/s(?:\s*\([^)]*+\))?,\s*"
    r"Width x(?P<w>\d++)"
)
_LNKSTA = regex.compile(r"^\s+LnkSta:\s+Speed (?P<s>[\d.]++)GT/s(?:\s*\([^)]*+\))?,\s*Width x(?P<w>\d++)")
_LNK_ANY = regex.compile(r"^\s+(?P<what>LnkCap|LnkSta):")
_ACS_NAMES = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
_ACS = regex.compile(
    r"^\s*(?P<what>ACSCtl|ACSCap):\s+"
    + r"\s+".join(n + r"(?P<b" + str(i) + r">[+-])" for i, n in enumerate(_ACS_NAMES))
)
_ACS_ANY = regex.compile(r"^\s*(?P<what>ACSCtl|ACSCap):")
_EXPRESS = regex.compile(
    r"Express \([^)]*+\) (?P<t>Root Port|Upstream Port|Downstream Port|Endpoint|"
    r"Legacy Endpoint|PCI-Express to PCI/PCI-X Bridge|Root Complex Integrated Endpoint)"
)
_NUMA = regex.compile(r"^\s+NUMA node:\s+(?P<n>-?\d++)")
_IOMMU = regex.compile(r"^\s+IOMMU group:\s+(?P<n>\d++)")
_DRIVER = regex.compile(r"^\s+Kernel driver in use:\s+(?P<d>\S++)")
_BUS = regex.compile(r"^\s+Bus: primary=(?P<p>[0-9a-fA-F]{2}), secondary=(?P<s>[0-9a-fA-F]{2}),")
_TREE_ROOT = regex.compile(r"\[(?P<dom>[0-9a-fA-F]{4}):(?P<bus>[0-9a-fA-F]{2})\]")
_TREE_DEV = regex.compile(
    r"(?<![0-9a-fA-F:])(?P<slot>[0-9a-fA-F]{2})\.(?P<fn>[0-7])"
    r"(?:-\[(?P<sec>[0-9a-fA-F]{2})(?:-[0-9a-fA-F]{2})?\])?"
)
_TREE_LINE = regex.compile(r"^[-+\\| ]*+(?:\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]|[0-9a-fA-F]{2}\.[0-7])")

_PORT_TYPES = {
    "Root Port": "root_port",
    "Upstream Port": "upstream",
    "Downstream Port": "downstream",
    "Endpoint": "endpoint",
    "Legacy Endpoint": "endpoint",
    "Root Complex Integrated Endpoint": "endpoint",
    "PCI-Express to PCI/PCI-X Bridge": "pcie_to_pci_bridge",
}
# lspci's class names (without -nn) -> class code; only the classes topodoc reasons about
_CLASS_NAMES = {
    "PCI bridge": 0x060400,
    "Host bridge": 0x060000,
    "3D controller": 0x030200,
    "VGA compatible controller": 0x030000,
    "Display controller": 0x038000,
    "Infiniband controller": 0x020700,
    "Ethernet controller": 0x020000,
    "Network controller": 0x028000,
    "Bridge": 0x068000,
    "Processing accelerators": 0x120000,
}
_VENDOR_NAMES = {
    "NVIDIA Corporation": 0x10DE,
    "Mellanox Technologies": 0x15B3,
    "PLX Technology": 0x10B5,
    "Broadcom / LSI": 0x1000,
    "Intel Corporation": 0x8086,
    "Advanced Micro Devices": 0x1022,
    "Amazon.com": 0x1D0F,
    "Broadcom Inc. and subsidiaries": 0x14E4,
}


def parse(text: str) -> LspciResult:
    if any(_TREE_LINE.match(line) and ("-[" in line or "+-" in line) for line in islice(_lines(text), 400)):
        tree = _parse_tree(_lines(text))
        if tree.devices:
            return tree
    return _parse_blocks(_lines(text))


def _lines(text: str) -> Iterator[str]:
    """``text.split("\n")`` one line at a time: a paste refused at :data:`MAX_FUNCTIONS` is not split
    whole first."""
    start = 0
    while True:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


# ---- device blocks (-v/-vv/-vvv, -nn, plain) ----


@dataclass
class _Block:
    address: str
    line: int
    cls: str
    clsid: str | None
    desc: str
    fields: dict = field(default_factory=dict)


def _parse_blocks(lines: Iterable[str]) -> LspciResult:
    blocks: list[_Block] = []
    orphans: list[tuple[int, int]] = []
    damaged = _Damaged()
    verbose = False
    for number, line in enumerate(lines, start=1):
        header = _HEADER.match(line)
        if header:
            blocks.append(_new_block(header, number))
            _too_many(len(blocks))
            continue
        if line[:1] in (" ", "\t") and line.strip():
            verbose = True
            if blocks:
                _read_field(blocks[-1], line, number, damaged)
            else:
                _orphan(line, number, orphans, damaged)
                _too_many(len(orphans))
        elif line.strip() and (_ACS_ANY.match(line) or _LNK_ANY.match(line)):
            _orphan(line, number, orphans, damaged)
            _too_many(len(orphans))
    if not blocks and not orphans and not damaged:
        raise LspciParseError("no lspci device lines (BB:DD.F class: name) and no LnkSta/ACSCtl lines")
    if orphans:
        damaged.append(
            f"{len(orphans)} ACSCtl line(s) (first at line {orphans[0][0]}) have no device header: "
            "which bridge each belongs to cannot be told (paste `sudo lspci -vvv` whole)"
        )
    devices = _link_parents({b.address: _device(b) for b in blocks}, blocks)
    info = {b.address: LspciDevice(b.address, b.desc, b.line, b.fields.get("acs_cap")) for b in blocks}
    form = "verbose" if verbose and blocks else ("plain" if blocks else "fragment")
    return LspciResult(form, devices, info, tuple(orphans), damaged.notes())


def _new_block(header: regex.Match, number: int) -> _Block:
    address = (
        pciaddr.normalize(f"{header['dom'] or '0000'}:{header['bus']}:{header['dev']}.{header['fn']}")
        if int(header["dev"], 16) <= 0x1F
        else f"invalid:{number}"
    )
    return _Block(address, number, header["cls"].strip(), header["clsid"], header["desc"].strip())


def _orphan(line: str, number: int, orphans: list[tuple[int, int]], damaged: list[str]) -> None:
    link = _LNK_ANY.match(line)
    if link:
        damaged.append(
            f"line {number}: {link['what']} with no device header above it: whose link it is "
            f"cannot be told: {line.strip()[:80]}"
        )
        return
    acs = _ACS.match(line)
    if acs and acs["what"] == "ACSCtl":
        orphans.append((number, _acs_bits(acs)))
    elif _ACS_ANY.match(line) and not acs:
        damaged.append(f"line {number}: cut ACS line, not read: {line.strip()[:80]}")


def _acs_bits(match: regex.Match) -> int:
    return sum(1 << i for i in range(len(_ACS_NAMES)) if match[f"b{i}"] == "+")


def _read_field(block: _Block, line: str, number: int, damaged: list[str]) -> None:
    f = block.fields
    for pattern, key in ((_LNKCAP, "cap"), (_LNKSTA, "sta")):
        m = pattern.match(line)
        if m:
            f[key] = (float(m["s"]), int(m["w"]))
            return
    any_link = _LNK_ANY.match(line)
    if any_link and "unknown" not in line and "Speed" in line:
        damaged.append(
            f"line {number}: {block.address} {any_link['what']} cut, not read: {line.strip()[:80]}"
        )
        return
    acs = _ACS.match(line)
    if acs:
        f["acs_ctl" if acs["what"] == "ACSCtl" else "acs_cap"] = _acs_bits(acs)
        return
    if _ACS_ANY.match(line):
        damaged.append(f"line {number}: {block.address} ACS line cut, not read: {line.strip()[:80]}")
        return
    for pattern, key, conv in ((_NUMA, "numa", int), (_IOMMU, "iommu", int), (_DRIVER, "driver", str)):
        m = pattern.match(line)
        if m:
            f[key] = conv(m[1])
            return
    express = _EXPRESS.search(line)
    if express and "Capabilities:" in line:
        f["port_type"] = _PORT_TYPES[express["t"]]
        return
    bus = _BUS.match(line)
    if bus:
        f["secondary"] = int(bus["s"], 16)


def _class_code(block: _Block) -> int | None:
    if block.clsid:
        return int(block.clsid, 16) << 8
    return _CLASS_NAMES.get(block.cls)


def _ids(desc: str) -> tuple[int | None, int | None]:
    m = _IDS.search(desc)
    if m:
        return int(m["v"], 16), int(m["d"], 16)
    vendor = next((v for name, v in _VENDOR_NAMES.items() if desc.startswith(name)), None)
    return vendor, None


def _device(block: _Block) -> PciDevice:
    f = block.fields
    vendor, device = _ids(block.desc)
    cap, sta = f.get("cap", (None, None)), f.get("sta", (None, None))
    return PciDevice(
        address=block.address,
        class_code=_class_code(block),
        vendor_id=vendor,
        device_id=device,
        driver=f.get("driver"),
        numa_node=f.get("numa"),
        link=PciLink(speed_gts=sta[0], width=sta[1], max_speed_gts=cap[0], max_width=cap[1]),
        port_type=f.get("port_type"),
        iommu_group=f.get("iommu"),
        acs_ctrl=f.get("acs_ctl"),
    )


def _link_parents(devices: dict[str, PciDevice], blocks: list[_Block]) -> dict[str, PciDevice]:
    """A device's parent is the bridge whose secondary bus is the device's bus (same domain)."""
    by_bus: dict[tuple[int, int], str] = {}
    for b in blocks:
        if "secondary" in b.fields and not b.address.startswith("invalid"):
            domain, _bus, _dev, _fn = pciaddr.parse(b.address)
            by_bus.setdefault((domain, b.fields["secondary"]), b.address)
    out = {}
    for address, dev in devices.items():
        if address.startswith("invalid"):
            continue
        domain, bus, _d, _f = pciaddr.parse(address)
        parent = by_bus.get((domain, bus))
        out[address] = replace(dev, parent=parent if parent != address else None)
    return out


# ---- trees (-t, -tv, -vvvt) ----


def _parse_tree(lines: Iterable[str]) -> LspciResult:
    """Columns carry the tree: a function's parent context is the nearest bridge (or root bus) that opened
    at a column left of it; opening a context at column c closes every context at or right of c. The open
    contexts are a stack ordered by column, so each token costs amortized O(1)."""
    devices: dict[str, PciDevice] = {}
    info: dict[str, LspciDevice] = {}
    damaged = _Damaged()
    stack: list[tuple[int, tuple[int, int, str | None]]] = []  # (column, (domain, bus, parent address))
    domain = 0
    for number, line in enumerate(lines, start=1):
        if len(line) > 2048:  # lspci -t lines are a few hundred characters
            damaged.append(f"line {number}: longer than 2048 characters, not read")
            continue
        if not _TREE_LINE.match(line):
            if line.strip() and devices:
                damaged.append(f"line {number}: not a tree line, not read: {line.strip()[:80]}")
            continue
        roots = list(_TREE_ROOT.finditer(line))
        tokens = sorted(
            [(m.start(), "root", m) for m in roots]
            + [(m.start(), "dev", m) for m in _TREE_DEV.finditer(line) if not _inside(roots, m)],
            key=lambda t: t[0],
        )
        for column, what, m in tokens:
            while stack and stack[-1][0] >= column:
                stack.pop()
            if what == "root":
                domain = int(m["dom"], 16)
                stack.append((column, (domain, int(m["bus"], 16), None)))
                continue
            if not stack:
                if "-[" not in line[:column] and column != 0:
                    damaged.append(
                        f"line {number}: {m[0]} has no parent bus on its left (cut tree), not read"
                    )
                    continue
                stack.append((-1, (domain, 0, None)))
            dom, bus, parent = stack[-1][1]
            if int(m["slot"], 16) > 0x1F:
                continue
            address = f"{dom:04x}:{bus:02x}:{m['slot'].lower()}.{m['fn']}"
            desc = _tree_desc(line, m.end())
            vendor, device = _ids(desc)
            bridge = m["sec"] is not None
            devices[address] = PciDevice(
                address=address,
                class_code=0x060400 if bridge else None,
                vendor_id=vendor,
                device_id=device,
                parent=parent,
            )
            info[address] = LspciDevice(address, desc, number)
            _too_many(len(devices))
            if bridge:
                stack.append((column, (dom, int(m["sec"], 16), address)))
    return LspciResult("tree", devices, info, (), damaged.notes())


def _inside(roots: list[regex.Match], m: regex.Match) -> bool:
    return any(r.start() <= m.start() < r.end() for r in roots)


def _tree_desc(line: str, end: int) -> str:
    rest = line[end:]
    return rest.strip() if rest.startswith("  ") else ""
