"""`topodoc diagram`: DOT and Mermaid drawings of derived topologies, SVG through Graphviz when it is
installed and a clear exit 2 when it is not, and one real CLI run per bundled host recording."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_cli, run_cli_process
from test_topology_shapes import Box, bridge_pairs, nvswitch, vm_flat

from topodoc.report.diagram import render_dot, render_mermaid
from topodoc.topology import derive

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
SHAPES = sorted(p.parent.name for p in HOSTS.glob("*/recording.tar.gz"))


def run(*args: str, env: dict | None = None, real: bool = False):
    """``topodoc diagram ARGS``: a real subprocess when ``real`` or given an environment, else in-process."""
    if real or env is not None:
        return run_cli_process("diagram", *args, env=env)
    return run_cli("diagram", *args)


def test_dot_draws_sockets_switches_gpus_nics_and_the_nvswitch():
    graph = derive(nvswitch()).graph
    dot = render_dot(graph, "dgx")
    names = [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(8)] + ["nvswitch", "numa0", "numa1"]
    for name in names:
        assert f'"{name}" [' in dot
    assert len(re.findall(r'-- "nvswitch" \[label="NV12"', dot)) == 8
    assert dot.count("subgraph \"cluster_numa") == 2
    assert sum(n.kind == "switch" for n in graph.nodes) == 12
    assert 'label="CPU interconnect"' in dot


def test_bridge_pairs_draw_nvlink_between_gpus():
    dot = render_dot(derive(bridge_pairs()).graph)
    assert len(re.findall(r'"GPU\d" -- "GPU\d" \[label="NV3"', dot)) == 4


def test_degraded_link_is_drawn_red_with_its_maximum():
    box = Box(cpus=("0-15",))
    box.gpu(0, "0000:01:00.0", box.root_port("0000:00:01.0", 0), 0, gen=3, max_gen=4)
    dot = render_dot(derive(box.snapshot()).graph)
    assert re.search(r'"0000:00:01.0" -- "GPU0" \[label="Gen3 x16 \(max Gen4 x16\)", color="#c0392b"', dot)


def test_mermaid_has_valid_ids_and_one_subgraph_per_socket():
    text = render_mermaid(derive(nvswitch()).graph, "dgx")
    assert text.splitlines()[3] == "flowchart TB"
    assert text.count("subgraph ") == 2 and text.count("\n  end") == 2
    for line in text.splitlines()[4:]:
        if "---" in line or "===" in line or "-.-" in line:
            ends = re.sub(r"\|[^|]*\|", "", line).split()
            assert all(re.fullmatch(r"n_[A-Za-z0-9_]+", x) for x in (ends[0], ends[-1])), line
    assert text.count("===|\"NV12\"|") == 8


def test_flat_vm_hangs_devices_straight_off_the_host_bridge():
    graph = derive(vm_flat()).graph
    assert {(e.a, e.b) for e in graph.edges if e.b == "GPU0"} == {("pci0000:00", "GPU0")}
    assert any(n.id == "numa?" for n in graph.nodes)


@pytest.mark.parametrize("shape", SHAPES)
def test_cli_draws_every_bundled_recording(shape):
    done = run("--from", str(HOSTS / shape / "recording.tar.gz"), "--format", "dot")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("graph topology {") and done.stdout.rstrip().endswith("}")
    mermaid = run("--from", f"example:{shape}", "--format", "mermaid")
    assert mermaid.returncode == 0, mermaid.stderr
    assert "flowchart TB" in mermaid.stdout


def test_cli_svg_without_graphviz_says_so_and_exits_2():
    env = {**os.environ, "PATH": "/nonexistent"}
    done = run("--from", f"example:{SHAPES[0]}", "--format", "svg", env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Graphviz" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed here")
def test_cli_svg_with_graphviz(tmp_path):
    out = tmp_path / "box.svg"
    done = run("--from", f"example:{SHAPES[0]}", "--format", "svg", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "<svg" in out.read_text()


def test_cli_bad_source_is_one_line_and_exit_2(tmp_path):
    done = run("--from", str(tmp_path / "missing.tar.gz"), real=True)
    assert done.returncode == 2
    assert done.stderr.startswith("topodoc diagram: ") and done.stderr.count("\n") == 1
