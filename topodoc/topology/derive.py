"""From a snapshot to a :class:`Topology`: every GPU pair, GPU x NIC pair and NIC pair derived.

Pure: reads only the snapshot. nvidia-smi's class: NVLink wins over the PCIe level (``NV<links>``,
through NVSwitch the links each GPU has into the switches). NCCL's path type: NVL for NVLink and
NVSwitch, NVB when an intermediate GPU bridges two NVLink bonds and the PCIe path is longer, else
the PCIe level (PIX/PXB/PHB/SYS); GPU -> NIC becomes PXN when NCCL would relay through the GPU
nearest that NIC over NVLink (``ncclTopoComputePaths``: the relay reaches the NIC at PXB or better
and either has more bandwidth to it or spares us the CPU), and P2C when a Grace GPU reaches the NIC's
CPU over NVLink-C2C (:mod:`topodoc.topology.c2c`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import combinations

from topodoc import model, pciaddr
from topodoc.numbers import check_count
from topodoc.topology import c2c, graph, nvlink, pcitree, rates, shape
from topodoc.topology.nccl_policy import SMI_TO_NCCL
from topodoc.topology.types import (
    GPU,
    NCCL_PATHS,
    NIC,
    PCIE,
    Connection,
    GpuEnd,
    Hop,
    Link,
    NicEnd,
    Route,
    Topology,
)

SMI_NIC_KINDS = ("ib", "roce")  # nvidia-smi's NIC legend lists Mellanox/NVIDIA RDMA devices


@dataclass(frozen=True)
class _Ctx:
    snapshot: model.Snapshot
    links: dict[int, nvlink.GpuLinks]
    builder: pcitree.RouteBuilder
    gpu_hops: dict[int, Hop]


MAX_GPUS = 128  # one OS instance: 8-20 GPUs today (GB200 NVL72 trays show 4 each)
MAX_NICS = 1024  # network devices with SR-IOV functions; the widest real topo -m has 76 RDMA NICs


def derive(snapshot: model.Snapshot) -> Topology:
    """Derive paths, classes and the machine's shape from one snapshot (:class:`topodoc.numbers.LimitError`
    for more GPUs or NICs than one machine has: the pairs below are quadratic, the relays cubic)."""
    check_count("GPUs", len(snapshot.gpus), MAX_GPUS)
    check_count("network devices", len(snapshot.nics), MAX_NICS)
    links = nvlink.gpu_links(snapshot)
    gpus = tuple(_gpu_end(snapshot, gpu, links[gpu.index]) for gpu in snapshot.gpus)
    nics = _nic_ends(snapshot)
    names = {g.pci_address: Hop(GPU, g.name, g.pci_address) for g in gpus if g.pci_address}
    names.update({n.pci_address: Hop(NIC, n.name, f"{n.device} {n.pci_address}") for n in nics
                  if n.pci_address})
    ctx = _Ctx(snapshot, links, pcitree.RouteBuilder(snapshot, names),
               {g.index: Hop(GPU, g.name, g.pci_address or "") for g in gpus})
    gpu_pairs = tuple(_gpu_pair(ctx, a, b) for a, b in combinations(gpus, 2))
    gpu_nic = _apply_pxn(ctx, gpus, nics, [_gpu_nic(ctx, g, n) for g in gpus for n in nics])
    nic_pairs = tuple(_nic_pair(ctx, a, b) for a, b in combinations(nics, 2))
    printed = _printed_cells(snapshot, nics)
    if printed is not None:
        gpu_pairs, gpu_nic, nic_pairs = (tuple(_as_printed(c, printed) for c in conns)
                                         for conns in (gpu_pairs, gpu_nic, nic_pairs))
    return Topology(
        source=snapshot.source,
        shape=shape.classify(snapshot, gpus, gpu_pairs, links),
        gpus=gpus, nics=nics, gpu_pairs=gpu_pairs, gpu_nic=gpu_nic, nic_pairs=nic_pairs,
        graph=graph.build(snapshot, gpus, nics, gpu_pairs, links),
        notes=_notes(snapshot, gpus, nics),
    )


STAND_IN = "fffe:"  # the PCI domain of the stand-in tree a pasted topo -m is placed on (textplacement)


def _printed_cells(snapshot: model.Snapshot, nics: tuple[NicEnd, ...]) -> dict[tuple[str, str], str] | None:
    """On a machine placed from a pasted ``nvidia-smi topo -m`` alone (the stand-in tree), the cell the paste
    printed for each pair, in topology names; None elsewhere. The paste is the evidence: a pair it did not
    print (a paste cut mid-row) is unknown, and a printed class no tree can give back (two GPUs of one NUMA
    node printed NODE to one NIC and SYS to the other) is taken as printed."""
    matrix = snapshot.smi_topo
    if matrix is None or matrix.kind != "topo":
        return None
    if not snapshot.gpus or not all((g.pci_address or "").startswith(STAND_IN) for g in snapshot.gpus):
        return None
    counts: dict[str, int] = {}
    for n in matrix.nics:
        if n.device:
            counts[n.device] = counts.get(n.device, 0) + 1
    column = {(n.device if n.device and counts[n.device] == 1 else n.name): n.name for n in matrix.nics}
    ours = {end.name: column.get(end.device, end.device) for end in nics}  # NIC0 (ours) -> NIC3 (printed)
    seen: dict[tuple[str, str], str] = {}
    for row, cells in matrix.links.items():
        for col, cell in cells.items():
            seen.setdefault((row, col), cell)
            seen.setdefault((col, row), cell)
    out = dict(seen)
    out.update({(x, y): seen[ours[x], ours[y]] for x in ours for y in ours if (ours[x], ours[y]) in seen})
    gpus = [f"GPU{gpu.index}" for gpu in snapshot.gpus]
    out.update({(g, x): seen[g, ours[x]] for g in gpus for x in ours if (g, ours[x]) in seen})
    return out


def _as_printed(conn: Connection, printed: dict[tuple[str, str], str]) -> Connection:
    cell = printed.get((conn.a, conn.b))
    if cell is None:
        return Connection(a=conn.a, b=conn.b, smi="N/A", pci_level=None)
    if cell not in SMI_TO_NCCL or conn.pci_level == cell:
        return conn
    nccl = conn.nccl if conn.nccl in ("NVL", "NVB", "PXN", "P2C", "C2C") else SMI_TO_NCCL[cell]
    smi = conn.smi if conn.smi.startswith("NV") else cell
    return replace(conn, smi=smi, pci_level=cell, nccl=nccl)


def _gpu_end(snapshot: model.Snapshot, gpu: model.Gpu, links: nvlink.GpuLinks) -> GpuEnd:
    address = pciaddr.try_normalize(gpu.pci_address)
    dev = snapshot.pci.get(address or "")
    numa = gpu.numa_node if gpu.numa_node is not None else (dev.numa_node if dev else None)
    fabric = gpu.fabric
    clique = None
    if fabric and fabric.state == "completed" and fabric.cluster_uuid:
        clique = f"{fabric.cluster_uuid}/{fabric.clique_id}"
    end = GpuEnd(
        name=f"GPU{gpu.index}", index=gpu.index, model=gpu.name, pci_address=address, numa_node=numa,
        cpu_affinity=gpu.cpu_affinity or (dev.local_cpulist if dev else None),
        nvlinks_active=links.active, nvlinks_down=links.down, nvswitch_links=links.switch_links,
        clique=clique, gpu_numa_id=gpu.gpu_numa_id, c2c_links=gpu.c2c_links or 0,
        c2c_gbps=gpu.c2c_bandwidth_gbps,
    )
    return replace(end, cpu_path=c2c.cpu_path(end))


def _natural(name: str) -> list:
    """mlx5_2 < mlx5_10; rdmap16s27 < rdmap144s27."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _nic_ends(snapshot: model.Snapshot) -> tuple[NicEnd, ...]:
    found = [n for n in snapshot.nics if pciaddr.try_normalize(n.pci_address)]
    found.sort(key=lambda n: (n.kind not in SMI_NIC_KINDS, _natural(n.name)))
    return tuple(_nic_end(snapshot, i, nic) for i, nic in enumerate(found))


def _nic_end(snapshot: model.Snapshot, i: int, nic: model.Nic) -> NicEnd:
    address = pciaddr.try_normalize(nic.pci_address)
    dev = snapshot.pci.get(address or "")
    rates_gbps = [p.rate_gbps for p in nic.ports if p.rate_gbps is not None] or _netdev_rates(snapshot, nic)
    return NicEnd(
        name=f"NIC{i}", device=nic.name, kind=nic.kind, pci_address=address,
        numa_node=dev.numa_node if dev else None, in_smi_matrix=nic.kind in SMI_NIC_KINDS,
        rate_gbps=max(rates_gbps) if rates_gbps else None,
        ports_down=sum(1 for p in nic.ports if p.state is not None and p.state != "ACTIVE"),
    )


def _netdev_rates(snapshot: model.Snapshot, nic: model.Nic) -> list[float]:
    """Link speeds (Gb/s) of the NIC's netdevs, for NICs without RDMA ports (gVNIC, ENA, plain
    Ethernet); ``/sys/class/net/<if>/speed`` is -1 or unreadable when down or virtual."""
    names = set(nic.netdevs)
    speeds = [i.speed_mbps for i in snapshot.net if i.name in names and i.speed_mbps]
    return [mbps / 1000 for mbps in speeds if mbps > 0]


def _gpu_pair(ctx: _Ctx, a: GpuEnd, b: GpuEnd) -> Connection:
    pci = ctx.snapshot.pci
    level = pcitree.smi_level(pci, a.pci_address, b.pci_address) if a.pci_address and b.pci_address else None
    count, switched = nvlink.bond(ctx.links, a.index, b.index)
    pcie = ctx.builder.route(a.pci_address, b.pci_address) if a.pci_address and b.pci_address else None
    nv_route = nvlink.route(ctx.links, ctx.gpu_hops, a.index, b.index)
    conn = Connection(
        a=a.name,
        b=b.name,
        smi=f"NV{count}" if count else level or "N/A",
        pci_level=level,
        nvlinks=count,
        pcie=pcie,
        route=pcie or Route(),
        through_nvswitch=switched,
    )
    if count:
        return replace(conn, nccl="NVL", route=nv_route)
    long_pcie = pcie is None or pcitree.nccl_hops(pci, a.pci_address, b.pci_address) > 2
    if nv_route is not None and long_pcie:
        return replace(conn, nccl="NVB", via=nv_route.hops[1].id, route=nv_route)
    nccl = pcitree.nccl_level(pci, a.pci_address, b.pci_address) if pcie else None
    return replace(conn, nccl=nccl or "SYS")


def _pci_conn(ctx: _Ctx, a_name: str, a_addr: str | None, b_name: str, b_addr: str | None) -> Connection:
    pci = ctx.snapshot.pci
    if not a_addr or not b_addr or a_addr not in pci or b_addr not in pci:
        return Connection(a=a_name, b=b_name, smi="N/A", pci_level=None)
    level = pcitree.smi_level(pci, a_addr, b_addr)
    route = ctx.builder.route(a_addr, b_addr) or Route()
    return Connection(
        a=a_name,
        b=b_name,
        smi=level or "N/A",
        pci_level=level,
        nccl=pcitree.nccl_level(pci, a_addr, b_addr) or "SYS",
        pcie=route,
        route=route,
    )


def _gpu_nic(ctx: _Ctx, gpu: GpuEnd, nic: NicEnd) -> Connection:
    conn = _pci_conn(ctx, gpu.name, gpu.pci_address, nic.name, nic.pci_address)
    return c2c.apply_p2c(conn, gpu, ctx.gpu_hops[gpu.index], ctx.builder.numa_hop(gpu.numa_node))


def _nic_pair(ctx: _Ctx, a: NicEnd, b: NicEnd) -> Connection:
    return _pci_conn(ctx, a.name, a.pci_address, b.name, b.pci_address)


def _rank(conn: Connection) -> int:
    return NCCL_PATHS.index(conn.nccl)


def _nccl_bw(conn: Connection, gpu_ids: set[str]) -> float:
    """NCCL's bandwidth for a PCIe route: GPUs at their trained width and speed (NVML's current values, read
    inside a running job, where an idle GPU's Gen1 has retrained: a Gen1 reading counts at max speed),
    other devices at max speed and width."""
    bws = [rates.nccl_pcie_gbps(*((_active_gen(ln), ln.width) if ln.b in gpu_ids or ln.a in gpu_ids
                                  else (ln.max_gen or ln.gen, ln.max_width or ln.width)))
           for ln in (conn.pcie.links if conn.pcie else ()) if ln.kind == PCIE]
    return min(bws) if bws else 0.0


def _active_gen(link: Link) -> int | None:
    """The generation a GPU link runs at under load: Gen1 is the idle floor, it retrains to the max."""
    return link.max_gen if link.gen == 1 and (link.max_gen or 0) > 1 else link.gen


def _apply_pxn(ctx: _Ctx, gpus: tuple[GpuEnd, ...], nics: tuple[NicEnd, ...],
               conns: list[Connection]) -> tuple[Connection, ...]:
    gpu_ids = {g.name for g in gpus}
    by_pair = {(c.a, c.b): c for c in conns}
    index_of = {g.name: g.index for g in gpus}
    for nic in nics:
        column = [by_pair[(g.name, nic.name)] for g in gpus]
        if not column:
            continue
        local = min(column, key=lambda c: (_rank(c), -_nccl_bw(c, gpu_ids)))
        if _rank(local) > NCCL_PATHS.index("PXB"):
            continue
        for conn in column:
            if conn is local or not nvlink.bond(ctx.links, index_of[conn.a], index_of[local.a])[0]:
                continue
            if _nccl_bw(local, gpu_ids) > _nccl_bw(conn, gpu_ids) or _rank(conn) > NCCL_PATHS.index("PXB"):
                by_pair[(conn.a, nic.name)] = _pxn(ctx, conn, local, index_of)
    return tuple(by_pair[(c.a, c.b)] for c in conns)


def _pxn(ctx: _Ctx, conn: Connection, local: Connection, index_of: dict[str, int]) -> Connection:
    nv = nvlink.route(ctx.links, ctx.gpu_hops, index_of[conn.a], index_of[local.a])
    pcie = local.pcie or Route()
    hops = nv.hops + pcie.hops[1:]
    links = nv.links + pcie.links
    return replace(conn, nccl="PXN", via=local.a,
                   route=Route(hops, links, pcitree.bottleneck(links)))


def _notes(snapshot: model.Snapshot, gpus: tuple[GpuEnd, ...], nics: tuple[NicEnd, ...]) -> tuple[str, ...]:
    notes = [f"{g.name}: no PCI device recorded for it, PCIe paths unknown" for g in gpus
             if not g.pci_address or g.pci_address not in snapshot.pci]
    notes += [f"GPU{g.index}: NVML reports the GPU as lost" for g in snapshot.gpus if g.lost]
    notes += [f"{n.name} ({n.device}): PCI device not recorded, paths unknown" for n in nics
              if n.pci_address not in snapshot.pci]
    skipped = [n.name for n in snapshot.nics if not pciaddr.try_normalize(n.pci_address)]
    if skipped:
        notes.append("NICs without a PCI function (virtual): " + ", ".join(sorted(skipped)))
    return tuple(notes)
