"""Small hand-built snapshots for the bandwidth tests (no recording needed)."""

from __future__ import annotations

from topodoc import model as m


def _dev(addr, cls, parent, hb, numa, gen, width, port, vendor=0x10de):
    speed = {3: 8.0, 4: 16.0, 5: 32.0}[gen]
    return m.PciDevice(
        address=addr,
        class_code=cls,
        vendor_id=vendor,
        parent=parent,
        host_bridge=hb,
        numa_node=numa,
        port_type=port,
        link=m.PciLink(speed_gts=speed, width=width, max_speed_gts=speed, max_width=width),
    )


def two_socket(vendor="AuthenticAMD", cpu="AMD EPYC 7742 64-Core Processor", gen=4, name="NVIDIA A10G",
               cc="8.6", nvswitch_links=0, per_socket=1, nics=()):
    """``per_socket`` GPUs on their own root ports under each of two sockets."""
    pci, gpus = {}, []
    for index in range(2 * per_socket):
        numa, slot = divmod(index, per_socket)
        bus = 0x80 * numa
        hb, rp = f"pci0000:{bus:02x}", f"0000:{bus:02x}:{slot + 1:02x}.1"
        addr = f"0000:{bus + slot + 1:02x}:00.0"
        pci[rp] = _dev(rp, 0x060400, None, hb, numa, gen, 16, "root_port", vendor=0x1022)
        pci[addr] = _dev(addr, 0x030200, rp, hb, numa, gen, 16, "endpoint")
        links = tuple(m.NvLink(link=n, active=True, version=6, remote_pci_address="0000:ff:00.0",
                               remote_type="switch") for n in range(nvswitch_links))
        gpus.append(m.Gpu(index=index, name=name, pci_address=addr, numa_node=numa, compute_capability=cc,
                          pcie_gen=gen, pcie_width=16, nvlinks=links))
    placed = []
    for i, nic in enumerate(nics):
        numa = i * 2 // max(len(nics), 1)
        bus = 0x80 * numa + 0x40 + i
        hb, rp = f"pci0000:{0x80 * numa:02x}", f"0000:{0x80 * numa:02x}:{0x10 + i:02x}.1"
        addr = f"0000:{bus:02x}:00.0"
        pci[rp] = _dev(rp, 0x060400, None, hb, numa, gen, 16, "root_port", vendor=0x1022)
        pci[addr] = _dev(addr, 0x020700, rp, hb, numa, gen, 16, "endpoint", vendor=0x15b3)
        placed.append(m.Nic(name=nic.name, kind=nic.kind, pci_address=addr, ports=nic.ports))
    return m.Snapshot(source="hand-built", host=m.HostInfo(cpu_vendor=vendor, cpu_model=cpu, sockets=2),
                      pci=pci, gpus=tuple(gpus), nics=tuple(placed))


def ib_nics(count, rate_gbps, text):
    port = m.NicPort(port=1, state="ACTIVE", phys_state="LinkUp", rate_gbps=rate_gbps, rate_text=text,
                     link_layer="InfiniBand")
    return tuple(m.Nic(name=f"mlx5_{i}", kind="ib", ports=(port,)) for i in range(count))
