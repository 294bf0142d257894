"""The derived matrix against nvidia-smi's own: the seed's two matrices and DGX-1 cell for cell, the
comparison itself, and properties over random PCIe trees."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_topology_shapes import Box, bridge_pairs, hybrid_cube_mesh, nvswitch, switches, vm_flat

from topodoc import model
from topodoc.parsers.smi_topo import parse
from topodoc.report.smi_matrix import render
from topodoc.topology import CellDiff, compare, derive, to_matrix

TOPO = Path(__file__).resolve().parent.parent / "fixtures" / "topo"


def printed(case: str) -> model.ConnectionMatrix:
    return parse((TOPO / f"{case}.txt").read_text())


def test_seed_matrix_with_pcie_switches_cell_for_cell():
    assert compare(to_matrix(derive(switches())), printed("seed-8gpu-pcie-switch")) == []


def test_seed_matrix_with_nvlink_bridge_pairs_cell_for_cell():
    assert compare(to_matrix(derive(bridge_pairs())), printed("seed-8xa100-pcie-nvbridge-pairs")) == []


def test_dgx1_hybrid_cube_mesh_with_old_driver_nic_columns():
    assert compare(to_matrix(derive(hybrid_cube_mesh())), printed("dgx1-v100-hybrid-cube-mesh")) == []


def test_compare_names_every_differing_cell():
    snap = bridge_pairs()
    gpus = tuple(replace(g, nvlinks=()) if g.index in (6, 7) else g for g in snap.gpus)
    unbridged = replace(snap, gpus=gpus)
    diffs = compare(to_matrix(derive(unbridged)), printed("seed-8xa100-pcie-nvbridge-pairs"))
    assert sorted(diffs, key=lambda d: d.row) == [
        CellDiff(row="GPU6", column="GPU7", derived="PIX", printed="NV3"),
        CellDiff(row="GPU7", column="GPU6", derived="PIX", printed="NV3")]


def test_compare_reports_affinity_columns_the_printed_matrix_has():
    derived = to_matrix(derive(switches()))
    moved = replace(derived, gpus=tuple(replace(g, cpu_affinity="0-15") if g.name == "GPU0" else g
                                        for g in derived.gpus))
    expected = [CellDiff(row="GPU0", column="CPU Affinity", derived="0-15", printed="0-31")]
    assert compare(moved, printed("seed-8gpu-pcie-switch")) == expected


def test_matrix_shape_matches_topo_json():
    matrix = to_matrix(derive(nvswitch()))
    assert [n.name for n in matrix.nics] == [f"NIC{i}" for i in range(8)]
    assert matrix.nics[0].device == "mlx5_0"
    assert matrix.links["NIC0"]["GPU0"] == matrix.links["GPU0"]["NIC0"] == "PXB"
    assert matrix.gpus[4] == model.MatrixGpu(
        name="GPU4", cpu_affinity="32-63", numa_affinity="1", gpu_numa_id=None
    )
    assert to_matrix(derive(vm_flat())).gpus[0].numa_affinity is None


def test_rendered_matrix_parses_back():
    matrix = to_matrix(derive(nvswitch()))
    assert parse(render(matrix)).links == matrix.links


@st.composite
def trees(draw):
    """Random machines: 1-2 sockets, GPUs on root ports or under one or two levels of switches."""
    box = Box(cpus=("0-7", "8-15"))
    sockets = draw(st.integers(1, 2))
    gpu = 0
    for rp_n in range(draw(st.integers(1, 4))):
        s = rp_n % sockets
        rp = box.root_port(f"000{s}:{rp_n:02x}:01.0", s)
        depth = draw(st.integers(0, 2))
        parents = [rp]
        for level in range(depth):
            usp = f"000{s}:{0x20 + rp_n * 8 + level * 3:02x}:00.0"
            parents = box.switch(parents[0], usp, [f"{usp[:8]}{0x10 + k:02x}.{level}" for k in range(2)], s)
        for k in range(draw(st.integers(1, 2)) if depth else 1):  # a root port has one link
            box.gpu(gpu, f"000{s}:{0x80 + gpu:02x}:00.0", parents[k % len(parents)], s)
            gpu += 1
    return box.snapshot()


@settings(max_examples=60, deadline=None)
@given(trees())
def test_random_trees_give_symmetric_consistent_matrices(snap):
    topo = derive(snap)
    matrix = to_matrix(topo)
    for row, cols in matrix.links.items():
        assert cols[row] == "X"
        assert all(matrix.links[col][row] == cell for col, cell in cols.items())
    nccl_for = {"PIX": {"PIX"}, "PXB": {"PXB"}, "PHB": {"PHB"}, "NODE": {"PHB"}, "SYS": {"SYS"}}
    for conn in topo.gpu_pairs:
        assert conn.nccl in nccl_for[conn.pci_level]
        assert conn.route.hops[0].id == conn.a and conn.route.hops[-1].id == conn.b
