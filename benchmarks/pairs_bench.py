"""Time derive + every rule + the text diagram on hand-built NVSwitch machines of 8 to 72 GPUs.

    python benchmarks/pairs_bench.py [--gpus 8,32,64,72]

Each machine: NVML's view of every GPU pair (P2P OK over NVLink), two sockets, half the GPUs under
each, every GPU and one ConnectX-7 NDR NIC behind their own PCIe switch on a root port, 18 NVLinks
per GPU into the NVSwitch fabric (an NVL72-sized NVLink domain seen from one OS image, or a large
HGX). Pairs grow as N², so work linear in pairs grows 4x from 32 to 64 GPUs; anything faster is a
scan per pair. Prints CPU seconds per stage.
"""

from __future__ import annotations

import argparse
import time

from topodoc import model as m


def _dev(addr, cls, parent, hb, numa, port, vendor):
    return m.PciDevice(
        address=addr,
        class_code=cls,
        vendor_id=vendor,
        parent=parent,
        host_bridge=hb,
        numa_node=numa,
        port_type=port,
        link=m.PciLink(speed_gts=32.0, width=16, max_speed_gts=32.0, max_width=16),
    )


def machine(count: int) -> m.Snapshot:
    pci, gpus, nics = {}, [], []
    per_socket = (count + 1) // 2
    port = m.NicPort(port=1, state="ACTIVE", phys_state="LinkUp", rate_gbps=400,
                     rate_text="400 Gb/sec (4X NDR)", link_layer="InfiniBand")
    for index in range(count):
        numa, slot = divmod(index, per_socket)
        hb = f"pci{numa:04x}:00"
        rp, usp = f"{numa:04x}:00:{slot + 1:02x}.0", f"{numa:04x}:{2 * slot + 1:02x}:00.0"
        gpu_dsp, nic_dsp = f"{numa:04x}:{2 * slot + 2:02x}:00.0", f"{numa:04x}:{2 * slot + 2:02x}:01.0"
        gpu_addr = f"{numa:04x}:{0x80 + 2 * slot:02x}:00.0"
        nic_addr = f"{numa:04x}:{0x81 + 2 * slot:02x}:00.0"
        pci[rp] = _dev(rp, 0x060400, None, hb, numa, "root_port", 0x8086)
        pci[usp] = _dev(usp, 0x060400, rp, hb, numa, "upstream", 0x1000)
        pci[gpu_dsp] = _dev(gpu_dsp, 0x060400, usp, hb, numa, "downstream", 0x1000)
        pci[nic_dsp] = _dev(nic_dsp, 0x060400, usp, hb, numa, "downstream", 0x1000)
        pci[gpu_addr] = _dev(gpu_addr, 0x030200, gpu_dsp, hb, numa, "endpoint", 0x10DE)
        pci[nic_addr] = _dev(nic_addr, 0x020700, nic_dsp, hb, numa, "endpoint", 0x15B3)
        links = tuple(m.NvLink(link=n, active=True, version=7, remote_pci_address="0000:ff:00.0",
                               remote_type="switch") for n in range(18))
        gpus.append(m.Gpu(index=index, name="NVIDIA B200", pci_address=gpu_addr, numa_node=numa,
                          compute_capability="10.0", pcie_gen=5, pcie_width=16, nvlinks=links))
        nics.append(m.Nic(name=f"mlx5_{index}", kind="ib", pci_address=nic_addr, ports=(port,)))
    pairs = tuple(m.GpuPair(a=a, b=b, p2p_read="OK", p2p_write="OK", p2p_nvlink="OK", p2p_atomics="OK",
                            common_ancestor="SYS" if a < per_socket <= b else "PHB")
                  for a in range(count) for b in range(a + 1, count))
    return m.Snapshot(source=f"hand-built-{count}", host=m.HostInfo(cpu_vendor="GenuineIntel",
                      cpu_model="Intel Xeon Platinum 8480+", sockets=2), pci=pci, gpus=tuple(gpus),
                      gpu_pairs=pairs, nics=tuple(nics))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="8,32,64,72")
    args = parser.parse_args()
    from topodoc.report.diagram_text import render_derived
    from topodoc.rules.engine import Facts, evaluate
    from topodoc.rules.registry import RULES
    from topodoc.topology import derive

    print(f"{'GPUs':>5} {'pairs':>6} {'derive s':>9} {'rules s':>8} {'diagram s':>10} {'findings':>9}")
    for count in (int(n) for n in args.gpus.split(",")):
        snapshot = machine(count)
        start = time.process_time()
        topology = derive(snapshot)
        derived = time.process_time()
        report = evaluate(Facts(snapshot=snapshot, topology=topology), RULES)
        ruled = time.process_time()
        render_derived(topology, None)
        drawn = time.process_time()
        errors = getattr(report, "errors", ())
        assert not errors, errors
        print(f"{count:5d} {len(topology.gpu_pairs):6d} {derived - start:9.3f} {ruled - derived:8.3f} "
              f"{drawn - ruled:10.3f} {len(report.findings):9d}")


if __name__ == "__main__":
    main()
