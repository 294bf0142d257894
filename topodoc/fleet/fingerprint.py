"""One node's fingerprint: the properties that should be identical across a fleet of like servers.

A fingerprint is a flat, ordered mapping ``key -> Prop`` built from a snapshot in its JSON form
(``codec.to_data``), so the same function serves recordings, ``probe --json`` files and agents'
documents. Identity (host name, serials, UUIDs, MACs, GUIDs, boot id, timestamps) is left out by
construction: only the fields listed here are read.

Path classes (which GPUs and NICs share a switch, a root port, a socket) are the derived topology's
answer (:func:`topodoc.topology.derive`), never re-derived here. Deriving is the expensive step, so
it is cached per process by the layout it depends on (the PCIe parent chains of the GPUs and NICs
and the NVLink ends): ten thousand nodes of a few distinct layouts derive a few times.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a property's consequence is explained: the rule a difference maps to.
RULE_OF = {
    "gpus": None,
    "driver": "nccl-version-mismatch",
    "cuda": None,
    "kernel": None,
    "pcie.width": "pcie-width-reduced",
    "pcie.max": "pcie-speed-reduced",
    "pcie.gen": "pcie-speed-reduced",
    "nvlink": "nvlink-link-down",
    "fabric": "nvswitch-fabric-incomplete",
    "path.gpu": "gpu-p2p-via-cpu",
    "path.nic": "gpu-nic-far",
    "nic.port": "ib-port-down",
    "nic.rate": "ib-rate-below-peers",
    "nic.fw": None,
    "nic.present": "rails-shared",
    "numa": "gpu-nic-numa-mismatch",
    "peermem": "gdr-prereq-missing",
    "dmabuf": "gdr-prereq-missing",
    "iommu": "iommu-translated",
    "acs": "acs-on-p2p-path",
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


def fingerprint(data: dict, cache: dict | None = None) -> dict[str, Prop]:
    """The fingerprint of one snapshot in JSON form. ``cache`` (layout key -> path cells) is shared
    between calls to derive each distinct layout once."""
    props: dict[str, Prop] = {}
    _machine(data, props)
    _gpus(data, props)
    _nics(data, props)
    _paths(data, props, {} if cache is None else cache)
    _kernel(data, props)
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


def _machine(data: dict, props: dict[str, Prop]) -> None:
    gpus = data.get("gpus") or []
    models: dict[str, int] = {}
    for gpu in gpus:
        name = gpu.get("name") or "unknown model"
        models[name] = models.get(name, 0) + 1
    _put(props, "gpus", "gpus", "GPUs", " + ".join(f"{n} x {m}" for m, n in sorted(models.items())) or "none")
    driver = data.get("driver") or {}
    _put(props, "driver", "driver", "NVIDIA driver", driver.get("driver_version"))
    cuda = driver.get("cuda_driver_version")
    _put(props, "cuda", "cuda", "CUDA driver API", f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None)
    host = data.get("host") or {}
    kernel = data.get("kernel") or {}
    _put(
        props, "kernel", "kernel", "Linux kernel", kernel.get("release") or host.get("kernel"), matters=False
    )
    _put(props, "os", "kernel", "OS", host.get("os_name"), matters=False)
    _put(props, "cpu", "kernel", "CPU model", host.get("cpu_model"), matters=False)
    _put(props, "sockets", "numa", "CPU sockets", host.get("sockets"))
    _put(props, "numa.nodes", "numa", "NUMA nodes", len(data.get("numa") or ()) or None)


def _link_of(data: dict, address: str | None) -> dict:
    dev = (data.get("pci") or {}).get(address or "") or {}
    return dev.get("link") or {}


def _gen(gts: float | None) -> str | None:
    from topodoc.topology.rates import gen_of

    if not isinstance(gts, (int, float)):
        return None
    return f"Gen{gen_of(gts) or '?'}"


def _gpus(data: dict, props: dict[str, Prop]) -> None:
    for gpu in data.get("gpus") or ():
        name = f"GPU{gpu.get('index')}"
        link = _link_of(data, gpu.get("pci_address"))
        width = link.get("width") or gpu.get("pcie_width")
        max_width = link.get("max_width") or gpu.get("pcie_max_width")
        _put(props, f"{name}.pcie.width", "pcie.width", f"{name} PCIe width", f"x{width}" if width else None)
        max_gen = _gen(link.get("max_speed_gts")) or (
            f"Gen{gpu['pcie_max_gen']}" if gpu.get("pcie_max_gen") else None
        )
        _put(
            props,
            f"{name}.pcie.max",
            "pcie.max",
            f"{name} PCIe max",
            f"{max_gen or '?'} x{max_width or '?'}" if max_gen or max_width else None,
        )
        gen = _gen(link.get("speed_gts")) or (f"Gen{gpu['pcie_gen']}" if gpu.get("pcie_gen") else None)
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
        links = gpu.get("nvlinks") or ()
        if links:
            active = sum(1 for nv in links if nv.get("active"))
            _put(props, f"{name}.nvlink", "nvlink", f"{name} NVLinks active", f"{active} of {len(links)}")
        fabric = gpu.get("fabric") or {}
        if fabric.get("state") not in (None, "not_supported"):
            _put(props, f"{name}.fabric", "fabric", f"{name} NVLink fabric", fabric.get("state"))
        _put(props, f"{name}.numa", "numa", f"{name} NUMA node", gpu.get("numa_node"))
        if gpu.get("lost"):
            _put(props, f"{name}.lost", "gpus", f"{name}", "lost (fell off the bus)")


def _nics(data: dict, props: dict[str, Prop]) -> None:
    for nic in data.get("nics") or ():
        name = nic.get("name") or "?"
        _put(
            props,
            f"{name}.present",
            "nic.present",
            f"{name}",
            nic.get("hca_type") or nic.get("kind") or "present",
        )
        _put(
            props,
            f"{name}.fw",
            "nic.fw",
            f"{name} firmware",
            nic.get("fw_version"),
            note="firmware differs: NCCL works across versions, but a fleet usually pins one",
        )
        for port in nic.get("ports") or ():
            where = f"{name} port {port.get('port')}"
            _put(
                props,
                f"{name}:{port.get('port')}.state",
                "nic.port",
                f"{where} state",
                f"{port.get('state') or '?'} / {port.get('link_layer') or '?'}",
            )
            rate = port.get("rate_gbps")
            _put(
                props,
                f"{name}:{port.get('port')}.rate",
                "nic.rate",
                f"{where} rate",
                f"{rate:g} Gb/s" if isinstance(rate, (int, float)) else None,
            )
        numa = _numa_of(data, nic.get("pci_address"))
        _put(props, f"{name}.numa", "numa", f"{name} NUMA node", numa)


def _numa_of(data: dict, address: str | None) -> int | None:
    dev = (data.get("pci") or {}).get(address or "") or {}
    return dev.get("numa_node")


def _kernel(data: dict, props: dict[str, Prop]) -> None:
    kernel = data.get("kernel") or {}
    _put(props, "peermem", "peermem", "GPUDirect RDMA module", kernel.get("peermem_module") or "absent")
    dmabuf = kernel.get("dmabuf_supported")
    _put(props, "dmabuf", "dmabuf", "DMA-BUF", None if dmabuf is None else ("yes" if dmabuf else "no"))
    _put(props, "iommu", "iommu", "IOMMU mode", kernel.get("iommu_mode"))
    _put(props, "acs", "acs", "ACS redirect on GPU/NIC paths", _acs(data))


ACS_REDIRECT = 0x000C  # ReqRedir | CmpltRedir


def _acs(data: dict) -> str:
    """Which endpoints have a bridge with ACS redirect above them, named by endpoint ("GPU0, mlx5_0")."""
    pci = data.get("pci") or {}
    ends = [(f"GPU{g.get('index')}", g.get("pci_address")) for g in data.get("gpus") or ()]
    ends += [(n.get("name"), n.get("pci_address")) for n in data.get("nics") or ()]
    hit, unknown = [], False
    for name, address in ends:
        for bridge in _parents(pci, address):
            ctrl = pci[bridge].get("acs_ctrl")
            if ctrl is not None and ctrl & ACS_REDIRECT:
                hit.append(str(name))
                break
    return ", ".join(hit) if hit else ("unknown" if unknown else "none")


def _parents(pci: dict, address: str | None) -> list[str]:
    out, seen = [], set()
    cur = (pci.get(address or "") or {}).get("parent")
    while cur and cur in pci and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = pci[cur].get("parent")
    return out


def layout_key(data: dict) -> tuple:
    """What the path classes depend on: each endpoint's PCIe chain (with the port kinds and NUMA of
    its host bridge), and every NVLink's ends. Two snapshots with the same key derive the same cells."""
    pci = data.get("pci") or {}
    parts: list[tuple] = []
    for gpu in data.get("gpus") or ():
        nv = tuple(
            (n.get("active"), n.get("remote_type"), n.get("remote_pci_address"))
            for n in gpu.get("nvlinks") or ()
        )
        parts.append(
            (
                "g",
                gpu.get("index"),
                _chain_key(pci, gpu.get("pci_address")),
                nv,
                gpu.get("numa_node"),
                gpu.get("gpu_numa_id"),
                gpu.get("c2c_links", None),
            )
        )
    for nic in data.get("nics") or ():
        parts.append(("n", nic.get("name"), nic.get("kind"), _chain_key(pci, nic.get("pci_address"))))
    return tuple(parts)


def _chain_key(pci: dict, address: str | None) -> tuple:
    out = []
    for addr in [address, *_parents(pci, address)]:
        dev = pci.get(addr or "") or {}
        out.append(
            (addr, dev.get("class_code"), dev.get("port_type"), dev.get("host_bridge"), dev.get("numa_node"))
        )
    return tuple(out)


def _paths(data: dict, props: dict[str, Prop], cache: dict) -> None:
    key = layout_key(data)
    cells = cache.get(key)
    if cells is None:
        cells = cache[key] = _derive_cells(data)
    for a, b, value in cells:
        family = "path.gpu" if b.startswith("GPU") else "path.nic"
        _put(props, f"path.{a}-{b}", family, f"{a} <-> {b}", value)


def _derive_cells(data: dict) -> tuple[tuple[str, str, str], ...]:
    """The derived nvidia-smi class of every GPU pair and GPU-NIC pair (NIC named by device)."""
    from topodoc import codec, model
    from topodoc.topology.derive import derive

    try:
        topo = derive(codec.from_data(model.Snapshot, data))
    except Exception as err:  # noqa: BLE001 - a node whose snapshot cannot be derived is reported
        return (("topology", "derive", f"unknown ({type(err).__name__})"),)
    device = {nic.name: nic.device for nic in topo.nics}
    cells = [(c.a, c.b, c.smi) for c in topo.gpu_pairs]
    cells += [(c.a, device.get(c.b, c.b), c.smi) for c in topo.gpu_nic]
    return tuple(cells)


def digest(props: dict[str, Prop], matters_only: bool = True) -> str:
    """A short stable hash of a fingerprint (by default of the properties that matter to NCCL): the
    agent exports it as a label so that Prometheus can count nodes per fingerprint fleet-wide."""
    import hashlib

    parts = sorted(f"{k}={p.value}" for k, p in props.items() if p.matters or not matters_only)
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()
