import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.inputs import decode
from topodoc.model import ConnectionMatrix, MatrixGpu, MatrixNic
from topodoc.parsers.smi_topo import SmiTopoParseError, parse
from topodoc.report.smi_matrix import render
from topodoc.report.topo import json_data
from topodoc.topology.reading import read

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "topo").glob("*.txt"))


def load(name: str) -> ConnectionMatrix:
    return parse(decode((FIXTURES[0].parent / f"{name}.txt").read_bytes()))


def test_at_least_fourteen_golden_pairs():
    assert len(FIXTURES) >= 14
    assert all(path.with_suffix(".json").is_file() for path in FIXTURES)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_golden(path):
    matrix = parse(decode(path.read_bytes()))
    expected = json.loads(path.with_suffix(".json").read_text())
    assert json_data(matrix, read(matrix)) == expected


@pytest.mark.parametrize("path", [p for p in FIXTURES if "truncated" not in p.stem], ids=lambda p: p.stem)
def test_render_parses_back_to_the_same_model(path):
    matrix = parse(decode(path.read_bytes()))
    # the render holds what was read; a value the paste cut was left out, so the render is not cut there
    cut = tuple(w for w in matrix.warnings if not w.startswith("the paste ends inside"))
    assert parse(render(matrix)) == dataclasses.replace(matrix, warnings=cut)


def test_seed_pcie_switch_matrix():
    matrix = load("seed-8gpu-pcie-switch")
    assert matrix.links["GPU0"]["GPU1"] == "PIX"
    assert matrix.links["GPU0"]["GPU2"] == "PXB"
    assert matrix.links["GPU3"]["GPU7"] == "SYS"
    assert matrix.gpus[7] == MatrixGpu(name="GPU7", cpu_affinity="32-63")
    reading = read(matrix)
    assert reading.nvlink_shape == "none"
    assert len(reading.cross_socket_pairs) == 16
    assert {(p.a, p.b) for p in reading.pcie_switch_pairs if p.link == "PIX"} == {
        ("GPU0", "GPU1"), ("GPU2", "GPU3"), ("GPU4", "GPU5"), ("GPU6", "GPU7")
    }


def test_seed_nvlink_bridge_pairs():
    reading = read(load("seed-8xa100-pcie-nvbridge-pairs"))
    assert reading.nvlink_shape == "pairs"
    assert [(p.a, p.b, p.links) for p in reading.nvlink_pairs] == [
        ("GPU0", "GPU1", 3), ("GPU2", "GPU3", 3), ("GPU4", "GPU5", 3), ("GPU6", "GPU7", 3)
    ]
    assert [(g.cpu_affinity, g.numa_affinity, len(g.gpus)) for g in reading.affinity] == [
        ("0-31", "0", 4), ("32-63", "1", 4)
    ]


def test_dgx1_hybrid_cube_mesh_is_a_partial_mesh_with_mixed_link_counts():
    reading = read(load("dgx1-v100-hybrid-cube-mesh"))
    assert reading.nvlink_shape == "partial-mesh"
    assert reading.nvlink_counts == (1, 2)
    pairs = reading.nvlink_pairs
    links_per_gpu = {gpu: sum(p.links for p in pairs if gpu in (p.a, p.b)) for gpu in reading.gpus}
    assert set(links_per_gpu.values()) == {6}  # V100 SXM2: six NVLinks per GPU
    assert reading.nvlink_groups == (tuple(f"GPU{i}" for i in range(8)),)


def test_dgx_a100_nearest_nics_keep_ties_and_legend_names():
    reading = read(load("dgx-a100-nv12-mlx5"))
    assert reading.nvlink_shape == "all-to-all"
    first = reading.nearest_nics[0]
    assert (first.gpu, first.nics, first.devices, first.distance) == (
        "GPU0", ("NIC0", "NIC1"), ("mlx5_0", "mlx5_1"), "PXB"
    )


def test_old_soc_is_normalised_to_sys():
    matrix = load("dgx1-p100-soc-old-driver")
    cells = {cell for row in matrix.links.values() for cell in row.values()}
    assert "SOC" not in cells and "SYS" in cells


def test_old_driver_nic_columns_are_their_own_device():
    matrix = load("dgx1-v100-hybrid-cube-mesh")
    assert matrix.nics[0] == MatrixNic("mlx5_0", "mlx5_0")
    assert matrix.links["mlx5_3"]["GPU7"] == "PIX"


def test_run_together_header_and_cells():
    matrix = load("vllm-collect-env-h100-run-together")
    assert [nic.name for nic in matrix.nics] == [f"NIC{i}" for i in range(12)]
    assert matrix.links["GPU4"]["NIC8"] == "NODE" and matrix.links["GPU4"]["NIC9"] == "NODE"
    assert matrix.links["GPU6"]["NIC10"] == "PXB"
    assert matrix.gpus[6].cpu_affinity == "56-111,168-223"
    assert matrix.warnings == ()


def test_crlf_blank_lines_and_unindented_header():
    matrix = load("consumer-4x-rtx3090-nvlink-pairs-crlf")
    assert len(matrix.links) == 4 and matrix.warnings == ()
    assert read(matrix).nvlink_shape == "pairs"


def test_truncated_paste_keeps_what_is_there_and_says_what_is_missing():
    matrix = load("truncated-8xh100-cut-mid-row")
    assert set(matrix.links) == {f"GPU{i}" for i in range(6)}
    assert len(matrix.links["GPU5"]) == 6
    assert matrix.gpus[5].cpu_affinity is None
    assert any("no row for GPU6, GPU7" in w for w in matrix.warnings)
    assert any("row GPU5 is cut short" in w for w in matrix.warnings)


def test_p2p_matrix_kind_and_mode():
    matrix = load("p2p-read-4gpu-cns")
    assert (matrix.kind, matrix.p2p_mode) == ("p2p", "r")
    assert [p.link for p in read(matrix).p2p_blocked] == ["CNS"] * 4
    assert load("p2p-2x-rtx5090-gns").p2p_mode is None


def test_gpu_numa_id_and_numa_lists():
    assert [g.gpu_numa_id for g in load("gb200-tray-4gpu-gpu-numa-id").gpus] == ["2", "10", "18", "26"]
    assert load("cloud-vm-8xa100-vnuma-lists").gpus[4].numa_affinity == "2-3"
    assert load("cloud-aws-g5-12xlarge-4xa10g").gpus[0].numa_affinity is None


def test_command_pasted_on_the_header_line_is_dropped():
    matrix = load("real-2x-rtx5070-command-on-header-line-aikitoria")
    assert [g.name for g in matrix.gpus] == ["GPU0", "GPU1"]
    assert matrix.links["GPU1"]["GPU0"] == "PHB" and matrix.gpus[1].cpu_affinity == "0-23"
    assert matrix.warnings == ()


def test_p2p_mode_on_the_header_line_and_after_a_failed_command():
    text = "$ nvidia-smi topo -p2p w   GPU0\tGPU1\t\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n"
    assert (parse(text).kind, parse(text).p2p_mode) == ("p2p", "w")
    matrix = load("real-p2p-p-5gpu-after-failed-command-aikitoria")
    assert (matrix.kind, matrix.p2p_mode, len(matrix.gpus)) == ("p2p", "p", 5)


def test_a_word_before_gpu0_without_the_command_is_not_a_header():
    with pytest.raises(SmiTopoParseError):
        parse("result GPU0 GPU1\nGPU0 X PHB\nGPU1 PHB X\n")


def test_nic_columns_capped_by_nvidia_smi_are_reported():
    matrix = load("real-truncated-8xh100-56-of-76-nics-vllm")
    assert len(matrix.nics) == 56 and matrix.links["GPU1"]["NIC3"] == "PXB"
    assert "nvidia-smi found 76 NICs but shows only 56: the others are not in the matrix" in matrix.warnings


def test_real_pastes_read_as_their_threads_describe():
    l40s = read(load("real-8xl40s-node-sys-1nic-no-legend-nccl-tests"))
    assert l40s.nvlink_shape == "none" and len(l40s.cross_socket_pairs) == 16
    bridged = read(load("real-3gpu-nv4-pair-2nic-phb-nccl-tests"))
    assert [(p.a, p.b, p.links) for p in bridged.nvlink_pairs] == [("GPU0", "GPU1", 4)]
    assert [g.numa_affinity for g in load("real-2xl4-sys-numa-0-2-cuda-samples").gpus] == ["0", "2"]


def test_ansi_and_quoted_lines():
    text = "> \x1b[1m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\n> GPU0\t X \tSOC\t0-7\n> GPU1\tSOC\t X \t8-15\n"
    matrix = parse(text)
    assert matrix.links["GPU1"]["GPU0"] == "SYS"
    assert matrix.gpus[1].cpu_affinity == "8-15"


def test_utf16_capture_is_decoded():
    text = "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n"
    assert parse(decode(text.encode("utf-16"))) == parse(text)


@pytest.mark.parametrize("text", ["", "hello\nGPU 0: NVIDIA H100\n", "GPU0 is fine\nGPU1 too\n"])
def test_no_matrix_raises_the_parse_error(text):
    with pytest.raises(SmiTopoParseError, match="no nvidia-smi topo matrix found"):
        parse(text)


TOKENS = ["GPU0", "GPU1", "NIC0", "mlx5_0", " X ", "NV12", "PIX", "SYS", "SOC", "OK", "0-31", "N/A",
          "CPU Affinity", "NIC Legend:", "  NIC0: mlx5_0", "\t", " ", "\n", "\r\n", "\x1b[4m", "GPU0GPU1"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)))
def test_parser_raises_only_its_own_error(text):
    try:
        matrix = parse(text)
    except SmiTopoParseError:
        return
    assert isinstance(matrix, ConnectionMatrix)
    read(matrix)


TOPO_CELLS = st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS", "NV1", "NV4", "NV12", "NV18", "N/A"])
P2P_CELLS = st.sampled_from(["OK", "NS", "CNS", "GNS", "TNS", "DR", "U"])
CPULIST = st.sampled_from(["0-31", "32-63", "0-55,112-167", "0,2,4,6", "7"])
NUMA = st.sampled_from(["0", "1", "0-1", "0,2"])


@st.composite
def matrices(draw):
    kind = draw(st.sampled_from(["topo", "p2p"]))
    gpu_count = draw(st.integers(2 if kind == "p2p" else 1, 8))
    if kind == "p2p":
        gpus = tuple(MatrixGpu(name=f"GPU{i}") for i in range(gpu_count))
        nics: tuple[MatrixNic, ...] = ()
    else:
        gpus = tuple(
            MatrixGpu(
                name=f"GPU{i}",
                cpu_affinity=draw(st.none() | CPULIST),
                numa_affinity=draw(st.none() | NUMA),
                gpu_numa_id=draw(st.none() | NUMA),
            )
            for i in range(gpu_count)
        )
        old_style = draw(st.booleans())
        nics = tuple(
            MatrixNic(f"mlx5_{i}", f"mlx5_{i}") if old_style else MatrixNic(f"NIC{i}", f"mlx5_bond_{i}")
            for i in range(draw(st.integers(0, 5)))
        )
    names = [g.name for g in gpus] + [n.name for n in nics]
    cells = P2P_CELLS if kind == "p2p" else TOPO_CELLS
    links: dict[str, dict[str, str]] = {name: {} for name in names}
    for i, a in enumerate(names):
        links[a][a] = "X"
        for b in names[i + 1 :]:
            links[a][b] = links[b][a] = draw(cells)
    links = {a: {b: links[a][b] for b in names} for a in names}
    mode = draw(st.sampled_from(["r", "w", "n", "a", "p", None])) if kind == "p2p" else None
    return ConnectionMatrix(kind=kind, gpus=gpus, nics=nics, links=links, p2p_mode=mode)


@settings(max_examples=200, deadline=None)
@given(matrices())
def test_rendered_matrix_parses_back(matrix):
    assert parse(render(matrix)) == matrix
