"""One node's fingerprint: the properties that should be identical across a fleet of like servers.

A fingerprint is a flat, ordered mapping ``key -> Prop`` read from the typed snapshot
(:class:`topodoc.model.Snapshot`, decoded once at the edge by :mod:`topodoc.fleet.nodes`), so the same
function serves recordings, ``probe --json`` files and agents' documents. Identity (host name, serials,
UUIDs, MACs, GUIDs, boot id, timestamps) is left out by construction: only the fields read here count.

Path classes (which GPUs and NICs share a switch, a root port, a socket) are the derived topology's
answer (:func:`topodoc.topology.derive`), derived afresh for each distinct snapshot: there is no
derivation cache keyed on a hand-kept list of what ``derive`` reads (one such list once served a node
another node's NV12). The fleet folds identical inputs before decoding them, so a fleet of a few
distinct machines derives a few times. Each property names what it is (``RULE_OF``): the rule whose
doc explains the consequence of a difference, or a fleet rule (``fleet-*``) where only the fleet
comparison can see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from topodoc import model

# Where a property's consequence is explained: the rule a difference maps to (None: no rule does).
RULE_OF = {
    "gpus": None,
    "driver": None,
    "cuda": None,
    "kernel": None,
    "pcie.width": "pcie-width-reduced",
    "pcie.max": "pcie-speed-reduced",
    "pcie.gen": "pcie-speed-reduced",
    "nvlink": "nvlink-link-down",
    "fabric": "nvswitch-fabric-incomplete",
    "path.gpu": "gpu-p2p-via-cpu",
    "path.nic": "gpu-nic-far",
    "rail": None,
    "nic.port": "ib-port-down",
    "nic.rate": "ib-rate-below-peers",
    "nic.fw": None,
    "nic.present": None,
    "numa": "gpu-nic-numa-mismatch",
    "peermem": "gdr-prereq-missing",
    "dmabuf": "gdr-prereq-missing",
    "iommu": "iommu-translated",
    "acs": "acs-on-p2p-path",
    "finding": None,  # finding.<rule>: that rule (topodoc.fleet.compare reads it from the key)
}


@dataclass(frozen=True)
class Prop:
    """One property of one node. ``matters``: a difference changes what NCCL can do (a rail broken, a
    link narrower); False for differences that are bookkeeping or need a second look (an idle GPU's
    link speed, an OS release)."""

    family: str  # a RULE_OF key: what kind of property
    label: str  # for people: "GPU3 PCIe width"
    value: str
    matters: bool = True
    note: str = ""


def fingerprint(snapshot: model.Snapshot, topology=None) -> dict[str, Prop]:
    """The fingerprint of one decoded snapshot."""
    props: dict[str, Prop] = {}
    _machine(snapshot, props)
    _gpus(snapshot, props)
    _nics(snapshot, props)
    _paths(snapshot, props, topology)
    _kernel(snapshot, props)
    return props


def findings(snapshot: model.Snapshot, topology=None) -> dict[str, Prop]:
    """The node's warning-or-worse findings from :func:`topodoc.diagnosis.run` (the pipeline every door
    calls), one property per rule, for the rules no fingerprint property stands for (a lost GPU, P2P not
    supported, NUMA node unknown ...): a rule that fires on some nodes and not others is a difference."""
    from topodoc.diagnosis import Request, run
    from topodoc.rules.engine import Severity

    shown = {rule for rule in RULE_OF.values() if rule}
    props: dict[str, Prop] = {}
    if topology is None:
        from topodoc.topology.derive import derive

        try:
            topology = derive(snapshot)
        except Exception:  # noqa: BLE001 - underivable (a bug or a LimitError): the fingerprint's paths say so
            return props
    report = run(Request(snapshot=snapshot, topology=topology, live_default=False)).report
    for f in report.findings:
        if f.rule in shown or f.severity.rank < Severity.WARNING.rank:
            continue
        key = f"finding.{f.rule}"
        old = props.get(key)
        value = f"{f.severity.value}: {f.subject}" if old is None else f"{old.value}; {f.subject}"
        props[key] = Prop("finding", f.title or f.rule, value)
    return props


def _put(
    props: dict[str, Prop],
    key: str,
    family: str,
    label: str,
    value: object,
    matters: bool = True,
    note: str = "",
) -> None:
    props[key] = Prop(family, label, "unknown" if value is None else str(value), matters, note)


def _machine(snap: model.Snapshot, props: dict[str, Prop]) -> None:
    models: dict[str, int] = {}
    for gpu in snap.gpus:
        name = gpu.name or "unknown model"
        models[name] = models.get(name, 0) + 1
    _put(props, "gpus", "gpus", "GPUs", " + ".join(f"{n} x {m}" for m, n in sorted(models.items())) or "none")
    _put(props, "driver", "driver", "NVIDIA driver", snap.driver.driver_version)
    cuda = snap.driver.cuda_driver_version
    _put(props, "cuda", "cuda", "CUDA driver API", f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None)
    release = snap.kernel.release or snap.host.kernel
    _put(props, "kernel", "kernel", "Linux kernel", release, matters=False)
    _put(props, "os", "kernel", "OS", snap.host.os_name, matters=False)
    _put(props, "cpu", "kernel", "CPU model", snap.host.cpu_model, matters=False)
    _put(props, "sockets", "numa", "CPU sockets", snap.host.sockets)
    _put(props, "numa.nodes", "numa", "NUMA nodes", len(snap.numa) or None)


def _link_of(snap: model.Snapshot, address: str | None) -> model.PciLink:
    dev = snap.pci.get(address or "")
    return dev.link if dev else model.PciLink()


def _gen(gts: float | None) -> str | None:
    from topodoc.topology.rates import gen_of

    if gts is None:
        return None
    return f"Gen{gen_of(gts) or '?'}"


def _gpus(snap: model.Snapshot, props: dict[str, Prop]) -> None:
    for gpu in snap.gpus:
        name = f"GPU{gpu.index}"
        link = _link_of(snap, gpu.pci_address)
        width = link.width or gpu.pcie_width
        max_width = link.max_width or gpu.pcie_max_width
        _put(props, f"{name}.pcie.width", "pcie.width", f"{name} PCIe width", f"x{width}" if width else None)
        max_gen = _gen(link.max_speed_gts) or (f"Gen{gpu.pcie_max_gen}" if gpu.pcie_max_gen else None)
        _put(
            props,
            f"{name}.pcie.max",
            "pcie.max",
            f"{name} PCIe max",
            f"{max_gen or '?'} x{max_width or '?'}" if max_gen or max_width else None,
        )
        gen = _gen(link.speed_gts) or (f"Gen{gpu.pcie_gen}" if gpu.pcie_gen else None)
        idle = gen == "Gen1" and max_gen not in (None, "Gen1")
        _put(
            props,
            f"{name}.pcie.gen",
            "pcie.gen",
            f"{name} PCIe speed now",
            gen,
            matters=not idle,
            note="an idle GPU drops its link to Gen1 to save power: compare under load" if idle else "",
        )
        if gpu.nvlinks:
            active = sum(1 for nv in gpu.nvlinks if nv.active)
            _put(
                props, f"{name}.nvlink", "nvlink", f"{name} NVLinks active", f"{active} of {len(gpu.nvlinks)}"
            )
        if gpu.fabric is not None and gpu.fabric.state not in (None, "not_supported"):
            _put(props, f"{name}.fabric", "fabric", f"{name} NVLink fabric", gpu.fabric.state)
        _put(props, f"{name}.numa", "numa", f"{name} NUMA node", gpu.numa_node)
        if gpu.lost:
            _put(props, f"{name}.lost", "gpus", f"{name}", "lost (fell off the bus)")


def _nics(snap: model.Snapshot, props: dict[str, Prop]) -> None:
    for nic in snap.nics:
        name = nic.name
        _put(
            props, f"{name}.present", "nic.present", f"{name} present", nic.hca_type or nic.kind or "present"
        )
        _put(
            props,
            f"{name}.fw",
            "nic.fw",
            f"{name} firmware",
            nic.fw_version,
            note="firmware differs: NCCL works across versions, but a fleet usually pins one",
        )
        for port in nic.ports:
            where = f"{name} port {port.port}"
            _put(
                props,
                f"{name}:{port.port}.state",
                "nic.port",
                f"{where} state",
                f"{port.state or '?'} / {port.link_layer or '?'}",
            )
            rate = port.rate_gbps
            _put(
                props,
                f"{name}:{port.port}.rate",
                "nic.rate",
                f"{where} rate",
                f"{rate:g} Gb/s" if rate else None,
            )
        dev = snap.pci.get(nic.pci_address or "")
        _put(props, f"{name}.numa", "numa", f"{name} NUMA node", dev.numa_node if dev else None)


def _kernel(snap: model.Snapshot, props: dict[str, Prop]) -> None:
    kernel = snap.kernel
    _put(props, "peermem", "peermem", "GPUDirect RDMA module", kernel.peermem_module or "absent")
    dmabuf = kernel.dmabuf_supported
    _put(props, "dmabuf", "dmabuf", "DMA-BUF", None if dmabuf is None else ("yes" if dmabuf else "no"))
    _put(props, "iommu", "iommu", "IOMMU mode", kernel.iommu_mode)
    _put(props, "acs", "acs", "ACS redirect on GPU/NIC paths", _acs(snap))


ACS_REDIRECT = 0x000C  # ReqRedir | CmpltRedir


def _acs(snap: model.Snapshot) -> str:
    """Which endpoints have a bridge with ACS redirect above them, named by endpoint ("GPU0, mlx5_0")."""
    ends = [(f"GPU{g.index}", g.pci_address) for g in snap.gpus]
    ends += [(n.name, n.pci_address) for n in snap.nics]
    hit = []
    for name, address in ends:
        for bridge in _parents(snap.pci, address):
            ctrl = snap.pci[bridge].acs_ctrl
            if ctrl is not None and ctrl & ACS_REDIRECT:
                hit.append(name)
                break
    return ", ".join(hit) if hit else "none"


def _parents(pci: dict[str, model.PciDevice], address: str | None) -> list[str]:
    out, seen = [], set()
    dev = pci.get(address or "")
    cur = dev.parent if dev else None
    while cur and cur in pci and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = pci[cur].parent
    return out


def _paths(snap: model.Snapshot, props: dict[str, Prop], topology=None) -> None:
    from topodoc.topology.derive import derive
    from topodoc.topology.rails import nccl_nics

    try:
        topo = topology if topology is not None else derive(snap)
    except Exception as err:  # noqa: BLE001 - a node whose snapshot cannot be derived is reported
        _put(props, "path.topology-derive", "path.gpu", "topology", f"unknown ({type(err).__name__})")
        return
    device = {nic.name: nic.device for nic in topo.nics}
    for c in topo.gpu_pairs:
        _put(props, f"path.{c.a}-{c.b}", "path.gpu", f"{c.a} <-> {c.b}", c.smi)
    for c in topo.gpu_nic:
        nic = device.get(c.b, c.b)
        _put(props, f"path.{c.a}-{nic}", "path.nic", f"{c.a} <-> {nic}", c.smi)
    for pair in nccl_nics(topo):
        name = pair.gpu.name
        _put(props, f"rail.{name}", "rail", f"{name} NIC (NCCL's choice)", pair.nic.device, note=pair.reason)


def nvlink_domain(snap: model.Snapshot) -> str | None:
    """The NVLink domain of a tray (NVL72 / GB200): ``cluster_uuid/clique`` from NVML's GPU fabric info,
    when every GPU that has it agrees; ``mixed: ...`` when its GPUs disagree; None without fabric info."""
    seen = sorted(
        {
            f"{g.fabric.cluster_uuid}/{g.fabric.clique_id}"
            for g in snap.gpus
            if g.fabric is not None
            and g.fabric.cluster_uuid
            and g.fabric.state not in (None, "not_supported")
        }
    )
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else "mixed: " + ", ".join(seen)


def digest(props: dict[str, Prop], matters_only: bool = True) -> str:
    """A short stable hash of a fingerprint (by default of the properties that matter to NCCL): the
    agent exports it as a label so that Prometheus can count nodes per fingerprint fleet-wide."""
    import hashlib

    parts = sorted(f"{k}={p.value}" for k, p in props.items() if p.matters or not matters_only)
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()
