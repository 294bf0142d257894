"""The partial machine that text inputs describe, as the same :class:`~topodoc.model.Snapshot` the probe
fills, so ``derive()`` and the hardware and joined rules run on it unchanged.

Each input adds what it knows: a whole-machine file (NCCL topology XML, hwloc XML, ``topodoc probe
--json``) is the base; ``lspci`` adds the PCIe tree, links and ACS; ``nvidia-smi -q`` GPU models, PCIe
generation/width and fabric state; ``nvidia-smi nvlink -s`` link states; ``ibstat``/``ibv_devinfo`` ports;
``ibdev2netdev``/``show_gids`` netdevs and GIDs; an NCCL log each rank's GPU index and bus id; ``nvidia-smi
topo -m`` GPU/NIC pairs and NUMA. What no input gave stays ``None``, and the snapshot's gaps say so.

``topo -m`` alone has no PCI addresses: the devices are then placed on a *stand-in* PCIe tree built so that
every pair has the class the matrix printed (PIX/PXB/PHB/NODE/SYS), with addresses in the unused PCI
domain ``fffe`` that :func:`cite` turns back into the matrix's names in every finding. Rules that need
what no input gave are reported as skipped with what to add (the rules' ``reads`` facets, :func:`facets_of`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, replace

from topodoc.model import (
    ConnectionMatrix,
    Gap,
    GapReason,
    Gpu,
    GpuPair,
    Nic,
    PciDevice,
    Snapshot,
)
from topodoc.numbers import check_count
from topodoc.parsers.rdma_text import merge_nic
from topodoc.text.detect import title
from topodoc.text.facets import cite, facets_of
from topodoc.text.inputs import HARDWARE_KINDS, TextInput
from topodoc.text.placement import (
    STAND_IN_DOMAIN,
    gpu_number,
    legend_names,
    matrix_lines,
    nic_kind_of_name,
    place_from_matrix,
)
from topodoc.topology.derive import MAX_GPUS

SOURCE = "text inputs"


@dataclass(frozen=True)
class TextMachine:
    snapshot: Snapshot
    provenance: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (input kind, "file:line")
    labels: dict[str, str] = field(default_factory=dict)  # stand-in PCI address -> "GPU0 (topo -m)"
    facets: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()
    has_base: bool = False  # over a probed machine or a recording (--from): its sysfs/NVML evidence stands


class _Builder:
    def __init__(self, base: Snapshot | None) -> None:
        self.base = base or Snapshot(source=SOURCE)
        self.pci: dict[str, PciDevice] = dict(self.base.pci)
        self.gpus: dict[int, Gpu] = {g.index: g for g in self.base.gpus}
        self.nics: dict[str, Nic] = {n.name: n for n in self.base.nics}
        self.pairs: dict[tuple[int, int], GpuPair] = {(p.a, p.b): p for p in self.base.gpu_pairs}
        self.gaps: list[Gap] = list(self.base.gaps)
        self.prov: dict[str, tuple[str, str]] = {}
        self.labels: dict[str, str] = {}
        self.notes: list[str] = []
        self.matrix: ConnectionMatrix | None = self.base.smi_topo
        self.matrix_path = ""
        self.driver = self.base.driver
        self.numa = self.base.numa
        self.host = self.base.host
        self.facts: set[str] = set()

    # ---- GPUs ----
    def gpu(self, gpu: Gpu, kind: str, where: str) -> None:
        """Merge by PCI address when both are known, else by index."""
        check_count("GPUs", len(self.gpus) + 1, MAX_GPUS)  # each merge looks at every GPU: bounded
        index = gpu.index
        if gpu.pci_address:
            index = next((i for i, g in self.gpus.items() if g.pci_address == gpu.pci_address), index)
        old = self.gpus.get(index)
        if old is not None and old.pci_address and gpu.pci_address and old.pci_address != gpu.pci_address:
            self.notes.append(
                f"GPU{index}: {where} gives bus id {gpu.pci_address}, another input "
                f"{old.pci_address}; kept {old.pci_address}"
            )
            gpu = replace(gpu, pci_address=old.pci_address)
        self.gpus[index] = _merge(old, replace(gpu, index=index)) if old else replace(gpu, index=index)
        self.prov.setdefault(f"gpu{index}", (kind, where))

    def nic(self, nic: Nic, kind: str, where: str, lines: dict[str, int], path: str) -> None:
        self.nics[nic.name] = merge_nic(self.nics[nic.name], nic) if nic.name in self.nics else nic
        for port in nic.ports:
            line = lines.get(f"{nic.name}:{port.port}")
            if line:
                self.prov[f"{nic.name}:{port.port}"] = (kind, f"{path}:{line}")
        self.prov.setdefault(nic.name, (kind, where))
        self.prov.setdefault("nics", (kind, where))

    def snapshot(self) -> Snapshot:
        return replace(
            self.base,
            source=self.base.source if self.base.source != "live" else SOURCE,
            pci=self.pci,
            gpus=tuple(self.gpus[i] for i in sorted(self.gpus)),
            nics=tuple(self.nics.values()),
            gpu_pairs=tuple(self.pairs[k] for k in sorted(self.pairs)),
            smi_topo=self.matrix,
            gaps=tuple(self.gaps),
            driver=self.driver,
            numa=self.numa,
            host=self.host,
        )


def _merge(old, new):
    """``new``'s known (non-None, non-empty) fields over ``old``'s."""
    values = {
        f.name: getattr(new, f.name)
        for f in dataclasses.fields(new)
        if getattr(new, f.name) not in (None, (), {}) and f.name != "lost"
    }
    return replace(old, **values)


def build(inputs: list[TextInput], logs=None, base: Snapshot | None = None) -> TextMachine | None:
    """The machine the hardware inputs describe (None when no input describes hardware); ``logs`` (an NCCL
    log analysis) adds each rank's GPU index and bus id; ``base`` (``--from``) is overlaid."""
    hardware = [i for i in inputs if i.kind in HARDWARE_KINDS and i.parsed is not None]
    probed = base is not None
    if not hardware and base is None:
        return None
    wholes = [i for i in hardware if i.kind in ("topodoc-json", "nccl-topo-xml", "hwloc-xml")]
    if base is None and wholes:
        base = replace(wholes[0].parsed, source=f"{title(wholes[0].kind)} {wholes[0].path}")
        if len(wholes) > 1:
            b = _Builder(base)
            b.notes.append(
                f"{len(wholes)} whole-machine files: {wholes[0].path} is the base, the others ignored"
            )
    b = _Builder(base)
    for item in wholes:
        for g in item.parsed.gpus:
            b.prov.setdefault(f"gpu{g.index}", (item.kind, item.path))
        for a in item.parsed.pci:
            b.prov.setdefault(a, (item.kind, item.path))
        b.facts.add("whole")
        if item.kind == "topodoc-json" or (item.kind == "nccl-topo-xml" and "<gpu" in item.text):
            b.facts.add("nvlink-listed")
        if item.kind == "topodoc-json":
            b.facts.add(
                "complete"
            )  # a probe snapshot: what it lacks, the probe could not read (its gaps say)
    for item in hardware:
        if item.kind in _APPLY:
            _APPLY[item.kind](b, item)
    _apply_prompt_host(b, hardware)
    if logs is not None:
        _apply_log(b, logs)
    place_from_matrix(b)
    snapshot = b.snapshot()
    return TextMachine(snapshot, b.prov, b.labels, facets_of(snapshot, b.facts), tuple(b.notes),
                       has_base=probed)


# ---- per-kind overlays ----


def _apply_lspci(b: _Builder, item: TextInput) -> None:
    res = item.parsed
    for address, dev in res.devices.items():
        b.pci[address] = _merge(b.pci[address], dev) if address in b.pci else dev
        info = res.info.get(address)
        b.prov[address] = ("lspci", f"{item.path}:{info.line}" if info else item.path)
    if res.form == "verbose":
        b.facts.add("lspci-verbose")
    nvidia = sorted(
        a
        for a, d in res.devices.items()
        if d.vendor_id == 0x10DE and d.class_code is not None and d.class_code >> 16 == 0x03
    )
    known = {g.pci_address for g in b.gpus.values()}
    if nvidia and not any(a in known for a in nvidia):
        if b.gpus and all(g.pci_address is None for g in b.gpus.values()) and len(b.gpus) == len(nvidia):
            for i, a in zip(sorted(b.gpus), nvidia, strict=True):
                b.gpus[i] = replace(b.gpus[i], pci_address=a)
        elif not b.gpus:
            for i, a in enumerate(nvidia):
                b.gpu(Gpu(index=i, pci_address=a), "lspci", b.prov[a][1])
        b.gaps.append(
            Gap(
                what="GPU indexes",
                reason=GapReason.NOT_RECORDED,
                source=item.path,
                detail="lspci gives no GPU indexes: taken in PCI bus order, as nvidia-smi numbers them",
            )
        )
    for gpu in list(b.gpus.values()):
        dev = b.pci.get(gpu.pci_address or "")
        if dev is not None and gpu.numa_node is None and dev.numa_node is not None:
            b.gpus[gpu.index] = replace(gpu, numa_node=dev.numa_node)


def _apply_smi_q(b: _Builder, item: TextInput) -> None:
    res = item.parsed
    for gpu, query in zip(res.gpus, res.queries, strict=True):
        b.gpu(gpu, item.kind, f"{item.path}:{query.line}" if res.form == "text" else item.path)
        if query.remapped_rows_failure and query.remapped_rows_failure.lower() == "yes":
            b.notes.append(
                f"GPU{gpu.index}: nvidia-smi -q says Remapping Failure Occurred: Yes "
                f"({item.path}:{query.line}): the GPU needs service"
            )
        if query.ecc_uncorrectable_volatile:
            b.notes.append(
                f"GPU{gpu.index}: {query.ecc_uncorrectable_volatile} volatile uncorrectable ECC "
                f"error(s) ({item.path}:{query.line})"
            )
    b.facts.add("smi")
    for address, why, line in res.unreachable:
        _unreachable_gpu(b, address, why, f"{item.path}:{line}")
    if res.driver.driver_version:
        b.driver = replace(
            b.driver,
            driver_version=res.driver.driver_version,
            cuda_driver_version=res.driver.cuda_driver_version,
        )


def _apply_smi_table(b: _Builder, item: TextInput) -> None:
    """The default nvidia-smi table / nvidia-smi -L: GPU names, bus ids, UUIDs, persistence, MIG."""
    res = item.parsed
    lines = {g.index: g.line for g in res.listed} | {g.index: g.line for g in res.gpus}
    for gpu in res.model_gpus():
        b.gpu(gpu, item.kind, f"{item.path}:{lines.get(gpu.index, 0)}")
    if res.gpus:
        b.facts.add("smi")
    if res.driver_version:
        b.driver = replace(b.driver, driver_version=res.driver_version)


def _unreachable_gpu(b: _Builder, address: str, why: str, where: str) -> None:
    """A GPU nvidia-smi could not open. "GPU is lost" is NVML's GPU_IS_LOST; other reasons are kept as a
    note. A GPU no other input lists gets the index of its place in PCI bus order among the known GPUs."""
    b.notes.append(f"nvidia-smi could not open the GPU at {address}: {why} ({where})")
    if "lost" not in why.lower():
        return
    check_count("GPUs", len(b.gpus) + 1, MAX_GPUS)
    index = next((i for i, g in b.gpus.items() if g.pci_address == address), None)
    if index is None:
        known = sorted({g.pci_address for g in b.gpus.values() if g.pci_address} | {address})
        index = known.index(address)
        if index in b.gpus:
            index = max(b.gpus) + 1
        b.gaps.append(
            Gap(
                what=f"GPU index of {address}",
                reason=GapReason.ERROR,
                source=where,
                detail="nvidia-smi could not open it: its index is its place in PCI bus order",
            )
        )
    b.gpus[index] = replace(b.gpus.get(index) or Gpu(index=index, pci_address=address), lost=True)
    # nvidia-smi's "Unable to determine the device handle ... GPU is lost" is its handle lookup answering
    # GPU_IS_LOST: the gap names that call, as the live collector names the call that failed
    b.gaps.append(
        Gap(
            what=f"GPU {index}",
            reason=GapReason.ERROR,
            source="nvml:nvmlDeviceGetHandleByPciBusId",
            detail="GpuIsLost: nvidia-smi could not open the GPU",
        )
    )
    b.prov[f"gpu{index}"] = ("nvidia-smi-q", where)


def _apply_nvlink(b: _Builder, item: TextInput) -> None:
    res = item.parsed
    if res.form != "status":
        b.notes.append(
            f"{item.path}: nvidia-smi nvlink {'-e' if res.form == 'errors' else '-c'} gives link "
            "numbers, not their state (nvidia-smi nvlink -s does)"
        )
    for g in res.gpus:
        links = g.links
        old = b.gpus.get(g.index)
        if old is not None and old.nvlinks and res.form == "status":
            remote = {link.link: link for link in old.nvlinks}
            links = tuple(replace(remote[n.link], active=n.active) if n.link in remote else n for n in links)
        b.gpu(Gpu(index=g.index, name=g.name, uuid=g.uuid, nvlinks=links), "nvlink", f"{item.path}:{g.line}")
        for n, line in g.link_lines.items():
            b.prov[f"gpu{g.index}:link{n}"] = ("nvlink", f"{item.path}:{line}")
        if res.form == "status":
            b.facts.add("nvlink-status")


def _apply_rdma(b: _Builder, item: TextInput) -> None:
    res = item.parsed
    for nic in res.nics:
        address = res.inferred_pci.get(nic.name)
        if address and nic.pci_address is None:
            nic = replace(nic, pci_address=address)
            b.notes.append(
                f"{nic.name}: PCI address {address} read from its netdev name {nic.netdevs[0]} ({item.path})"
            )
        b.nic(nic, item.kind, f"{item.path}:{res.lines.get(nic.name, 0)}", res.lines, item.path)
    if res.tool == "show_gids" and res.gids_found and res.gids_found[0] == 0 and not res.nics:
        b.notes.append(
            f"show_gids found no GID (n_gids_found=0, {item.path}:{res.gids_found[1]}): no RDMA port "
            "visible here has a GID, so NCCL's IB/RoCE transport has none to use; in a container this is "
            "usually the RDMA device's netdev missing from its network namespace "
            "(Mellanox/k8s-rdma-shared-dev-plugin#101)"
        )
    if res.tool == "ibdev2netdev":
        down = [k for k, v in res.netdev_links.items() if v == "Down"]
        if down:
            b.notes.append(
                f"ibdev2netdev shows {len(down)} port(s) whose netdev is Down ({', '.join(down[:4])}); "
                "on InfiniBand this is the IPoIB interface, not the port state (ibstat says that)"
            )


def _apply_matrix(b: _Builder, item: TextInput) -> None:
    matrix: ConnectionMatrix = item.parsed
    if matrix.kind == "p2p":
        lines = matrix_lines(item.text)
        mode = _P2P_FIELD.get(matrix.p2p_mode or "r", "read")
        for row, cells in matrix.links.items():
            a = gpu_number(row)
            if a is not None:
                b.gpu(Gpu(index=a), "smi-topo", f"{item.path}:{lines.get(row, 0)}")
            for col, cell in cells.items():
                c = gpu_number(col)
                if a is not None and c is not None and a < c:
                    old = b.pairs.get((a, c), GpuPair(a=a, b=c))
                    b.pairs[(a, c)] = replace(old, **{f"p2p_{mode}": cell})
                    b.prov[f"pair{a}-{c}"] = ("smi-topo", f"{item.path}:{lines.get(row, 0)}")
        return
    b.matrix, b.matrix_path = matrix, item.path
    b.facts.add("matrix")
    lines = matrix_lines(item.text)
    for g in matrix.gpus:
        index = gpu_number(g.name)
        if index is None:
            continue
        numa = int(g.numa_affinity) if g.numa_affinity and g.numa_affinity.isdigit() else None
        gpu_numa = int(g.gpu_numa_id) if g.gpu_numa_id and g.gpu_numa_id.isdigit() else None
        b.gpu(
            Gpu(index=index, numa_node=numa, cpu_affinity=g.cpu_affinity, gpu_numa_id=gpu_numa),
            "smi-topo",
            f"{item.path}:{lines.get(g.name, 0)}",
        )
    names = legend_names(matrix)
    dupes = sorted({n.device for n in matrix.nics if n.device and names[n.name] != n.device})
    if dupes:
        b.notes.append(
            f"the NIC legend gives {', '.join(dupes)} to more than one NIC column: those NICs are "
            f"named by their column ({item.path})"
        )
    for n in matrix.nics:
        name = names[n.name]
        if name not in b.nics:
            kind = nic_kind_of_name(name) if n.device else "ib"  # topo -m lists RDMA-capable NICs
            line = lines.get(n.name)
            b.nic(Nic(name=name, kind=kind), "smi-topo", f"{item.path}:{line}" if line else item.path, {},
                  item.path)
    for row, cells in matrix.links.items():
        b.prov.setdefault(f"smi:{row}", ("smi-topo", f"{item.path}:{lines.get(row, 0)}"))
        for col, cell in cells.items():
            a, c = gpu_number(row), gpu_number(col)
            if a is not None and c is not None and a < c and cell.startswith("NV"):
                count = int(cell[2:]) if cell[2:].isdigit() and len(cell) < 6 else None
                old = b.pairs.get((a, c), GpuPair(a=a, b=c))
                b.pairs[(a, c)] = replace(old, p2p_nvlink="OK", nvlink_count=count)
                b.prov.setdefault(f"pair{a}-{c}", ("smi-topo", f"{item.path}:{lines.get(row, 0)}"))


_P2P_FIELD = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics"}


_PROMPT = re.compile(r"^\[?[\w.-]{1,64}@(?P<host>[A-Za-z0-9][\w.-]{0,62})[: ][^\n]{0,200}?[$#] ", re.M)


def _apply_prompt_host(b: _Builder, hardware: list[TextInput]) -> None:
    """The host name in a shell prompt pasted with the output (``ops@gpu-node-a:~$ nvidia-smi topo -m``):
    the NCCL log's ranks on that host are then the ones the hardware describes."""
    if b.host.hostname:
        return
    hosts = {}
    for item in hardware:
        m = _PROMPT.search(item.text[:65536])
        if m:
            hosts.setdefault(m["host"], item.path)
    if len(hosts) == 1:
        host, path = next(iter(hosts.items()))
        b.host = replace(b.host, hostname=host)
        b.notes.append(f"host name {host} from the shell prompt in {path}")
    elif len(hosts) > 1:
        b.notes.append(
            f"the pasted shell prompts name {len(hosts)} hosts ({', '.join(sorted(hosts))}): "
            "no host name taken"
        )


def _apply_log(b: _Builder, logs) -> None:
    """Each rank's GPU index and bus id, from one host: the one the hardware inputs name, else the first."""
    hosts = sorted({r.host for r in logs.ranks if r.host})
    short = (b.host.hostname or "").split(".")[0]
    host = short if short in hosts else (hosts[0] if hosts else None)
    for rank in logs.ranks:
        if rank.nvml_dev is None or (host is not None and rank.host not in (host, None)):
            continue
        if b.gpus and rank.nvml_dev not in b.gpus:
            continue  # the hardware inputs list the GPUs; a rank on an unlisted index adds nothing
        where = f"{rank.evidence.file}:{rank.evidence.line}" if rank.evidence else "NCCL log"
        b.gpu(Gpu(index=rank.nvml_dev, pci_address=rank.bus_id), "nccl-log", where)
    if len(hosts) > 1:
        b.notes.append(f"the NCCL log spans {len(hosts)} hosts: GPU bus ids taken from {host}")


_APPLY = {
    "lspci": _apply_lspci,
    "nvidia-smi-q": _apply_smi_q,
    "nvidia-smi-q-xml": _apply_smi_q,
    "nvlink": _apply_nvlink,
    "ibstat": _apply_rdma,
    "ibv-devinfo": _apply_rdma,
    "ibdev2netdev": _apply_rdma,
    "show-gids": _apply_rdma,
    "smi-topo": _apply_matrix,
    "nvidia-smi": _apply_smi_table,
    "rdma-link": _apply_rdma,
}


__all__ = ["STAND_IN_DOMAIN", "TextMachine", "build", "cite"]
