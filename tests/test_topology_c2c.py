"""Grace derivation: GPU NUMA ID column, NCCL's C2C (GPU-CPU) and P2C (GPU-C2C-CPU-PCIe-NIC) path
types, the C2C link on the route and in the bandwidth model; on Python-built machines and the GB200
tray fixture (whose GPU NUMA IDs come from a public nvidia-smi topo -m paste)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import run_cli_process
from test_topology_shapes import Box

from topodoc.bandwidth.model import build
from topodoc.parsers.smi_topo import parse
from topodoc.probe.source import load_snapshot
from topodoc.topology import compare, derive, to_matrix
from topodoc.topology.types import C2C

PASTE = Path(__file__).resolve().parent.parent / "fixtures" / "topo" / "gb200-tray-4gpu-gpu-numa-id.txt"


def grace_box(c2c_links: int = 5, c2c_gbps: float | None = 225.0, same_host_bridge: bool = False):
    """Two Grace sockets, one GPU each on its own root port; NICs on socket 0 and socket 1. GPU 0 has
    NVLink-C2C (``c2c_links``), GPU 1 is PCIe only."""
    box = Box(cpus=("0-71", "72-143"))
    box.gpu(0, "0008:01:00.0", box.root_port("0008:00:00.0", 0), 0, gen=5)
    box.gpu(1, "0018:01:00.0", box.root_port("0018:00:00.0", 1), 1, gen=5)
    nic0_port = "0008:00:01.0" if same_host_bridge else box.root_port("0000:00:00.0", 0)
    if same_host_bridge:
        box.dev(nic0_port, None, 0, 0x060400, vendor=0x10DE, port="root_port")
    box.nic("mlx5_0", "0000:01:00.0" if not same_host_bridge else "0008:02:00.0", nic0_port, 0)
    box.nic("mlx5_1", "0010:01:00.0", box.root_port("0010:00:00.0", 1), 1)
    box.gpus[0] = replace(box.gpus[0], c2c_links=c2c_links, c2c_bandwidth_gbps=c2c_gbps, gpu_numa_id=2)
    box.gpus[1] = replace(box.gpus[1], c2c_links=0)
    return box.snapshot()


def test_gpu_with_c2c_reaches_its_cpu_over_c2c_and_its_nic_by_p2c():
    topo = derive(grace_box())
    gpu0, gpu1 = topo.gpus
    assert (gpu0.cpu_path, gpu0.c2c_links, gpu0.c2c_gbps, gpu0.gpu_numa_id) == ("C2C", 5, 225.0, 2)
    assert (gpu1.cpu_path, gpu1.c2c_links) == ("PHB", 0)
    near = topo.connection("GPU0", "NIC0")
    assert (near.smi, near.nccl) == ("NODE", "P2C")
    assert [h.id for h in near.route.hops] == ["GPU0", "numa0", "pci0000:00", "0000:00:00.0", "NIC0"]
    assert near.route.links[0].kind == C2C and near.route.links[0].bandwidth_gbps == 225.0
    assert near.pcie.hops[1].id == "0008:00:00.0"  # the PCIe route is kept beside it
    assert topo.connection("GPU0", "NIC1").nccl == "SYS"  # the other socket: C2C does not help
    assert topo.connection("GPU1", "NIC1").nccl == "PHB"  # no C2C: the PCIe path as before


def test_p2c_when_gpu_and_nic_share_a_host_bridge():
    conn = derive(grace_box(same_host_bridge=True)).connection("GPU0", "NIC0")
    assert (conn.smi, conn.nccl) == ("PHB", "P2C")
    assert [h.id for h in conn.route.hops][:3] == ["GPU0", "numa0", "pci0008:00"]


def test_no_c2c_link_up_means_no_c2c_path():
    topo = derive(grace_box(c2c_links=0, c2c_gbps=None))
    assert topo.gpus[0].cpu_path == "PHB" and topo.connection("GPU0", "NIC0").nccl == "PHB"


def test_a_slow_c2c_link_is_the_priced_bottleneck():
    snapshot = grace_box(c2c_links=2, c2c_gbps=20.0)
    model = build(derive(snapshot), snapshot)
    pair = next(p for p in model.gpu_nic if (p.a, p.b) == ("GPU0", "NIC0"))
    assert (pair.nccl, pair.limiter, pair.nccl_gbps) == ("P2C", "NVLink-C2C (2 links)", 20.0)
    assert "P2C" in pair.reason


def test_gpu_numa_id_column_comes_from_the_gpu_numa_id():
    matrix = to_matrix(derive(grace_box()))
    assert [(g.name, g.numa_affinity, g.gpu_numa_id) for g in matrix.gpus] == [("GPU0", "0", "2"),
                                                                               ("GPU1", "1", None)]


def test_gb200_fixture_matches_the_public_paste_including_gpu_numa_ids():
    snapshot = load_snapshot("example:gb200-nvl72-tray")
    topo = derive(snapshot)
    assert compare(to_matrix(topo), parse(PASTE.read_text())) == []
    assert [g.gpu_numa_id for g in topo.gpus] == [2, 10, 18, 26]
    assert {(g.cpu_path, g.c2c_links, g.c2c_gbps) for g in topo.gpus} == {("C2C", 5, 225.0)}
    paths = {(c.a, c.b): c.nccl for c in topo.gpu_nic}
    assert paths[("GPU0", "NIC0")] == "P2C" and paths[("GPU0", "NIC2")] == "SYS"
    assert paths[("GPU3", "NIC3")] == "P2C" and paths[("GPU3", "NIC1")] == "SYS"


def test_pcie_fixtures_keep_their_paths_and_have_no_gpu_numa_id():
    topo = derive(load_snapshot("example:hgx-h100-8x400g-ib"))
    assert {(g.cpu_path, g.c2c_links, g.gpu_numa_id) for g in topo.gpus} == {("PHB", 0, None)}
    assert "P2C" not in {c.nccl for c in topo.gpu_nic}


def test_topo_command_prints_p2c_and_gpu_numa_ids():
    result = run_cli_process("topo", "--from", "example:gb200-nvl72-tray")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if "NV18" in line]
    assert [row[-1] for row in rows[:4]] == ["2", "10", "18", "26"] and "P2C" in result.stdout


def test_a_c2c_bottleneck_is_named_as_such():
    from topodoc.report.diagram_text import link_text
    from topodoc.topology.types import Link

    text = link_text(Link(kind="c2c", a="GPU0", b="numa0", c2c_links=5, bandwidth_gbps=225.0))
    assert text == "NVLink-C2C x5 GPU0 - numa0, 225 GB/s per direction"


def test_the_diagram_draws_each_gpus_c2c_link_to_its_cpu():
    from topodoc.probe.source import load_snapshot
    from topodoc.report.diagram import render_dot
    from topodoc.topology import derive

    dot = render_dot(derive(load_snapshot("example:gb200-nvl72-tray")).graph)
    assert dot.count("NVLink-C2C x5") == 4  # four GB200 GPUs, each coupled to its Grace
