"""Derivation on machines built in Python, one per shape (desktop, root ports, switches, bridge pairs,
NVSwitch, DGX-1 hybrid cube mesh, flattened VM, NVL72 clique). The builders are reused by the other
topology and diagram tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topodoc import model
from topodoc.topology import derive

GEN_GTS = {3: 8.0, 4: 16.0, 5: 32.0}
BRIDGE, GPU_3D, IB, ETH, NVSW = 0x060400, 0x030200, 0x020700, 0x020000, 0x068000


class Box:
    """A tiny declarative machine: PCI functions hung off host bridges, GPUs, NICs, NVLinks."""

    def __init__(self, cpus=("0-31", "32-63")):
        self.pci: dict[str, model.PciDevice] = {}
        self.gpus: list[model.Gpu] = []
        self.nics: list[model.Nic] = []
        self.cpus = cpus
        self.links: dict[int, list[model.NvLink]] = {}

    def dev(self, addr, parent, numa, cls, gen=4, width=16, vendor=0x10B5, port=None, max_gen=None):
        hb = self.pci[parent].host_bridge if parent else f"pci{addr[:7]}"
        link = model.PciLink(
            speed_gts=GEN_GTS.get(gen),
            width=width,
            max_speed_gts=GEN_GTS.get(max_gen or gen),
            max_width=16 if width else None,
        )
        cpus = self.cpus[numa] if numa is not None and numa >= 0 else None
        self.pci[addr] = model.PciDevice(
            address=addr,
            class_code=cls,
            vendor_id=vendor,
            device_id=0x1234,
            numa_node=numa,
            local_cpulist=cpus,
            link=link,
            parent=parent,
            host_bridge=hb,
            port_type=port,
        )
        return addr

    def root_port(self, addr, numa):
        return self.dev(addr, None, numa, BRIDGE, vendor=0x8086, port="root_port")

    def switch(self, parent, usp, dsps, numa):
        self.dev(usp, parent, numa, BRIDGE, port="upstream")
        return [self.dev(d, usp, numa, BRIDGE, port="downstream") for d in dsps]

    def gpu(self, index, addr, parent, numa, gen=4, width=16, max_gen=None, fabric=None):
        self.dev(addr, parent, numa, GPU_3D, gen, width, vendor=0x10DE, port="endpoint", max_gen=max_gen)
        cpus = self.cpus[numa] if numa is not None and numa >= 0 else None
        self.gpus.append(
            model.Gpu(
                index=index,
                name="NVIDIA A100-SXM4-80GB",
                pci_address=addr,
                numa_node=numa,
                cpu_affinity=cpus,
                compute_capability="8.0",
                fabric=fabric,
            )
        )

    def nic(self, name, addr, parent, numa, kind="ib"):
        self.dev(addr, parent, numa, IB if kind == "ib" else ETH, vendor=0x15B3, port="endpoint")
        self.nics.append(model.Nic(name=name, kind=kind, pci_address=addr,
                                   ports=(model.NicPort(port=1, state="ACTIVE", rate_gbps=200.0),)))

    def nvlink(self, a, b, count):
        addr = {g.index: g.pci_address for g in self.gpus}
        for x, y in ((a, b), (b, a)):
            have = self.links.setdefault(x, [])
            have += [
                model.NvLink(
                    link=len(have) + i, active=True, version=4, remote_pci_address=addr[y], remote_type="gpu"
                )
                for i in range(count)
            ]

    def to_switch(self, index, switches, per_switch, down=0):
        have = self.links.setdefault(index, [])
        for sw in switches:
            have += [model.NvLink(link=len(have) + i, active=True, version=4, remote_pci_address=sw,
                                  remote_type="switch") for i in range(per_switch)]
        for link in have[len(have) - down:] if down else ():
            have[have.index(link)] = replace(link, active=False)

    def snapshot(self, **kw) -> model.Snapshot:
        gpus = tuple(replace(g, nvlinks=tuple(self.links.get(g.index, ()))) for g in self.gpus)
        numa = tuple(model.NumaNode(node=i, cpulist=c) for i, c in enumerate(self.cpus))
        return model.Snapshot(source="test", pci=dict(self.pci), gpus=gpus, nics=tuple(self.nics),
                              numa=numa, **kw)


def ports_of(bus: int, devices) -> list[str]:
    return [f"0000:{bus:02x}:{d:02x}.0" for d in devices]


def desktop() -> model.Snapshot:
    box = Box(cpus=("0-15",))
    box.gpu(0, "0000:01:00.0", box.root_port("0000:00:01.0", 0), 0)
    box.gpu(1, "0000:02:00.0", box.root_port("0000:00:01.1", 0), 0, width=8)
    return box.snapshot()


def root_ports() -> model.Snapshot:
    box = Box()
    for i in range(8):
        numa = i // 4
        rp = box.root_port(f"0000:{numa * 0x80:02x}:{i + 1:02x}.0", numa)
        box.gpu(i, f"0000:{numa * 0x80 + 0x10 + i:02x}:00.0", rp, numa)
    return box.snapshot()


def switches() -> model.Snapshot:
    """Seed matrix 1: per socket a top switch with two leaf switches of two GPUs each."""
    box = Box()
    for s in range(2):
        base = s * 0x80
        rp = box.root_port(f"0000:{base:02x}:01.0", s)
        top = box.switch(rp, f"0000:{base + 1:02x}:00.0", [f"0000:{base + 2:02x}:0{k}.0" for k in (1, 2)], s)
        for leaf, dsp in enumerate(top):
            bus = base + 3 + leaf * 3
            ports = box.switch(dsp, f"0000:{bus:02x}:00.0", [f"0000:{bus + 1:02x}:0{k}.0" for k in (1, 2)], s)
            for k, port in enumerate(ports):
                box.gpu(s * 4 + leaf * 2 + k, f"0000:{bus + 2 + k * 0x10:02x}:00.0", port, s)
    return box.snapshot()


def bridge_pairs() -> model.Snapshot:
    """Seed matrix 2: 8x A100 PCIe, one switch of four GPUs per socket, NVLink bridges in pairs."""
    box = Box()
    for s in range(2):
        base = s * 0x80
        rp = box.root_port(f"0000:{base:02x}:01.0", s)
        ports = box.switch(rp, f"0000:{base + 1:02x}:00.0", ports_of(base + 2, range(4)), s)
        for k, port in enumerate(ports):
            box.gpu(s * 4 + k, f"0000:{base + 3 + k:02x}:00.0", port, s)
    for a in (0, 2, 4, 6):
        box.nvlink(a, a + 1, 3)
    return box.snapshot()


NVSWITCHES = [f"0000:{b:02x}:00.0" for b in (0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9)]


def nvswitch(down_gpu: int | None = None) -> model.Snapshot:
    """DGX A100-like: per socket two complexes; each a top switch over a GPU switch and a NIC switch."""
    box = Box()
    for c in range(4):
        s, base = c // 2, 0x10 + c * 0x30
        rp = box.root_port(f"0001:{c * 0x40:02x}:01.0", s)  # one host bridge per complex, as on AMD
        top = box.switch(rp, f"0000:{base:02x}:00.0", ports_of(base + 1, (1, 2)), s)
        gsw = box.switch(top[0], f"0000:{base + 2:02x}:00.0", ports_of(base + 3, (1, 2)), s)
        nsw = box.switch(top[1], f"0000:{base + 8:02x}:00.0", ports_of(base + 9, (1, 2)), s)
        for k in range(2):
            box.gpu(c * 2 + k, f"0000:{base + 4 + k:02x}:00.0", gsw[k], s)
            box.nic(f"mlx5_{c * 2 + k}", f"0000:{base + 0xA + k:02x}:00.0", nsw[k], s)
    for i in range(8):
        box.to_switch(i, NVSWITCHES, 2, down=1 if i == down_gpu else 0)
    for sw in NVSWITCHES:
        box.dev(sw, None, 1, NVSW, vendor=0x10DE)
    return box.snapshot()


HYBRID_CUBE = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
               (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}


def hybrid_cube_mesh() -> model.Snapshot:
    """DGX-1 (V100): PLX switches of two GPUs, two per socket, NVLink hybrid cube mesh."""
    box = Box(cpus=("0-19,40-59", "20-39,60-79"))
    for sw in range(4):
        s, base = sw // 2, sw * 0x20 + 0x04
        rp = box.root_port(f"0000:{s * 0x80:02x}:0{sw + 1}.0", s)
        ports = box.switch(rp, f"0000:{base:02x}:00.0", ports_of(base + 1, (8, 10, 16)), s)
        for k, port in enumerate(ports[:2]):
            box.gpu(sw * 2 + k, f"0000:{base + 2 + k:02x}:00.0", port, s, gen=3)
        box.nic(f"mlx5_{sw}", f"0000:{base + 4:02x}:00.0", ports[2], s)
    for (a, b), n in HYBRID_CUBE.items():
        box.nvlink(a, b, n)
    return box.snapshot()


def vm_flat() -> model.Snapshot:
    box = Box(cpus=("0-47",))
    for i in range(4):
        box.gpu(i, f"0000:00:{0x10 + i:02x}.0", None, -1)
    box.nic("mlx5_0", "0000:00:0a.0", None, -1)
    return box.snapshot()


def nvl72_tray() -> model.Snapshot:
    """A GB200 compute tray: 4 GPUs, 18 links each into NVLink switch trays no PCI tree here shows."""
    box = Box(cpus=("0-71", "72-143"))
    fabric = model.GpuFabric(state="completed", cluster_uuid="5e5f2a1c-0000-4000-8000-00000000c1a0",
                             clique_id=7, status=0, health_mask=0)
    for i in range(4):
        s = i // 2
        rp = box.root_port(f"000{s * 8}:00:0{i % 2 + 1}.0", s)
        box.gpu(i, f"000{s * 8}:{1 + i % 2:02x}:00.0", rp, s, gen=5, fabric=fabric)
        box.to_switch(i, [f"0000:{0x40 + k:02x}:00.0" for k in range(18)], 1)
    return box.snapshot()


def cells(snapshot: model.Snapshot) -> dict[tuple[str, str], str]:
    topo = derive(snapshot)
    return {(c.a, c.b): c.smi for c in topo.gpu_pairs + topo.gpu_nic}


def test_desktop_goes_through_the_host_bridge_and_names_the_narrow_link():
    topo = derive(desktop())
    (pair,) = topo.gpu_pairs
    assert (pair.smi, pair.nccl) == ("PHB", "PHB")
    assert [h.kind for h in pair.route.hops] == ["gpu", "root_port", "host_bridge", "root_port", "gpu"]
    assert (pair.route.bottleneck.gen, pair.route.bottleneck.width) == (4, 8)
    assert topo.shape.nvlink == "none" and topo.shape.pcie == "root-ports" and topo.shape.sockets == 1


def test_root_ports_two_sockets_cross_the_smp_link():
    topo = derive(root_ports())
    assert topo.connection("GPU0", "GPU3").smi == "PHB"
    cross = topo.connection("GPU0", "GPU4")
    assert (cross.smi, cross.nccl) == ("SYS", "SYS")
    kinds = [h.kind for h in cross.route.hops]
    assert kinds == ["gpu", "root_port", "host_bridge", "numa", "numa", "host_bridge", "root_port", "gpu"]
    assert any(link.kind == "smp" for link in cross.route.links)
    assert topo.shape.pcie == "root-ports" and topo.shape.sockets == 2


def test_switch_levels_count_each_switch_once():
    topo = derive(switches())
    assert topo.connection("GPU0", "GPU1").smi == "PIX"
    far = topo.connection("GPU0", "GPU2")
    assert (far.smi, far.nccl) == ("PXB", "PXB")
    assert sum(h.kind == "switch_upstream" for h in far.route.hops) == 3
    assert topo.shape.pcie == "switches"


def test_bridge_pairs_are_named_and_nvlink_wins():
    topo = derive(bridge_pairs())
    pair = topo.connection("GPU2", "GPU3")
    assert (pair.smi, pair.nccl, pair.pci_level) == ("NV3", "NVL", "PIX")
    assert pair.route.bottleneck.kind == "nvlink" and pair.route.bottleneck.nvlinks == 3
    assert pair.route.bottleneck.bandwidth_gbps == 75.0
    assert topo.connection("GPU1", "GPU2").nccl == "PIX"
    assert topo.shape.nvlink == "bridge-pairs"
    assert "0-1, 2-3, 4-5, 6-7" in topo.shape.name


def test_nvswitch_all_pairs_nv12_and_pxn_to_far_nics():
    topo = derive(nvswitch())
    assert {c.smi for c in topo.gpu_pairs} == {"NV12"}
    assert all(c.through_nvswitch and c.nccl == "NVL" for c in topo.gpu_pairs)
    own = topo.connection("GPU0", "NIC0")
    assert (own.smi, own.nccl) == ("PXB", "PXB")
    assert topo.connection("GPU1", "NIC0").nccl == "PXB"  # as close as GPU0: no relay
    far = topo.connection("GPU2", "NIC0")
    assert (far.smi, far.nccl, far.via) == ("NODE", "PXN", "GPU0")
    assert [h.id for h in far.route.hops][:3] == ["GPU2", "nvswitch", "GPU0"]
    assert topo.connection("GPU7", "NIC0").smi == "SYS"
    assert topo.shape.nvlink == "nvswitch" and "NV12" in topo.shape.name


def test_nvswitch_with_a_link_down_drops_that_gpu_to_nv11():
    topo = derive(nvswitch(down_gpu=3))
    assert topo.connection("GPU3", "GPU5").smi == "NV11"
    assert topo.connection("GPU0", "GPU5").smi == "NV12"
    assert any("GPU3: 1 NVLink(s) down" in n for n in topo.shape.notes)


def test_hybrid_cube_mesh_relays_unlinked_pairs_through_a_peer():
    topo = derive(hybrid_cube_mesh())
    assert topo.connection("GPU0", "GPU3").smi == "NV2"
    relay = topo.connection("GPU0", "GPU5")
    assert (relay.smi, relay.nccl, relay.via) == ("SYS", "NVB", "GPU1")
    assert sum(c.nccl == "NVB" for c in topo.gpu_pairs) == 12
    assert topo.shape.nvlink == "hybrid-cube-mesh"


def test_flat_vm_is_phb_everywhere_and_named():
    topo = derive(vm_flat())
    assert {c.smi for c in topo.gpu_pairs + topo.gpu_nic} == {"PHB"}
    assert topo.shape.pcie == "flat-vm"
    assert "no NUMA node" in topo.shape.name


def test_nvl72_tray_is_a_fabric_clique():
    topo = derive(nvl72_tray())
    assert {c.smi for c in topo.gpu_pairs} == {"NV18"}
    assert topo.shape.nvlink == "fabric-clique"
    assert "/7" in topo.shape.name


def test_degraded_gpu_link_is_the_bottleneck():
    box = Box(cpus=("0-15",))
    box.gpu(0, "0000:01:00.0", box.root_port("0000:00:01.0", 0), 0, gen=3, max_gen=4)
    box.gpu(1, "0000:02:00.0", box.root_port("0000:00:01.1", 0), 0)
    (pair,) = derive(box.snapshot()).gpu_pairs
    neck = pair.route.bottleneck
    assert (neck.gen, neck.max_gen, neck.degraded, neck.b) == (3, 4, True, "GPU0")


def test_missing_pci_device_is_noted_not_fatal():
    snap = desktop()
    snap = replace(snap, pci={k: v for k, v in snap.pci.items() if k != "0000:02:00.0"})
    topo = derive(snap)
    assert topo.gpu_pairs[0].smi == "N/A"
    assert any("GPU1" in n for n in topo.notes)


@pytest.mark.parametrize("build", [desktop, root_ports, switches, bridge_pairs, nvswitch, hybrid_cube_mesh,
                                   vm_flat, nvl72_tray])
def test_every_pair_is_derived_once(build):
    snap = build()
    topo = derive(snap)
    n, m = len(snap.gpus), len(topo.nics)
    assert len(topo.gpu_pairs) == n * (n - 1) // 2 and len(topo.gpu_nic) == n * m
    for conn in topo.gpu_pairs:
        assert conn.route.hops[0].id == conn.a and conn.route.hops[-1].id == conn.b


def test_nvlink_relay_is_the_lowest_common_neighbour_and_needs_no_scan_of_every_gpu():
    from topodoc.topology import nvlink

    links = {i: nvlink.GpuLinks(i) for i in range(6)}
    links[0] = nvlink.GpuLinks(0, {3: 2, 4: 1})
    links[2] = nvlink.GpuLinks(2, {4: 1, 1: 2})
    links[5] = nvlink.GpuLinks(5, {2: 1, 0: 1})  # 5 reports the bonds; 0 and 2 do not list 5
    assert nvlink.relay(links, 0, 2) == 4
    assert nvlink.relay(links, 0, 1) is None and nvlink.relay(links, 3, 4) == 0
    links[4] = nvlink.GpuLinks(4)
    links = dict(links)  # a new machine: its own index
    del links[4]
    assert nvlink.relay(links, 0, 2) == 5  # 4 is no GPU of this machine any more
    assert nvlink.relay(links, 7, 8) is None
