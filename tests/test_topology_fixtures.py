"""Every host recording in fixtures/hosts: recording -> snapshot -> derived matrix == golden, and ==
nvidia-smi's own matrix where the recording holds one; the two seed shapes == the seed's matrices.

Regenerate the goldens (then review them against each README) with::

    .venv/bin/python tests/test_topology_fixtures.py --write [SHAPE ...]
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import pytest

from topodoc import codec, model
from topodoc.parsers.smi_topo import parse
from topodoc.probe.source import load_snapshot
from topodoc.report.diagram_text import render_derived
from topodoc.report.smi_matrix import render
from topodoc.topology import Topology, compare, derive, to_matrix

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "fixtures" / "hosts"
SHAPES = sorted(p.parent.name for p in HOSTS.glob("*/recording.tar.gz"))
SEEDS = {"8xgpu-2s-pcie-switches": "seed-8gpu-pcie-switch",
         "8xa100-pcie-2s-nvbridge-pairs": "seed-8xa100-pcie-nvbridge-pairs"}


@cache
def derived(shape: str) -> tuple[model.Snapshot, Topology, model.ConnectionMatrix]:
    snapshot = load_snapshot(str(HOSTS / shape / "recording.tar.gz"))
    topology = derive(snapshot)
    return snapshot, topology, to_matrix(topology)


def goldens(shape: str) -> dict[str, str]:
    """The golden files' expected contents: the matrix as `topodoc topo --json` holds it, and a
    review text (the matrix as nvidia-smi prints it plus the derived reading)."""
    snapshot, topology, matrix = derived(shape)
    diffs = compare(matrix, snapshot.smi_topo) if snapshot.smi_topo else None
    text = render(matrix) + "\n" + render_derived(topology, diffs)
    return {"expected-matrix.json": json.dumps(codec.to_data(matrix), indent=2) + "\n",
            "expected-matrix.txt": text}


def test_the_corpus_is_there():
    assert set(SEEDS) <= set(SHAPES)


@pytest.mark.parametrize("shape", SHAPES)
def test_derived_matrix_matches_golden(shape):
    for name, text in goldens(shape).items():
        path = HOSTS / shape / name
        assert path.is_file(), f"missing {path}: run python tests/test_topology_fixtures.py --write {shape}"
        assert path.read_text() == text, f"{path} differs from the derivation"


@pytest.mark.parametrize("shape", SHAPES)
def test_derived_matrix_matches_nvidia_smi_where_recorded(shape):
    snapshot, _topology, matrix = derived(shape)
    if snapshot.smi_topo is None:
        pytest.skip("recording holds no nvidia-smi topo -m output")
    assert compare(matrix, snapshot.smi_topo) == []


@pytest.mark.parametrize("shape", sorted(SEEDS))
def test_seed_shapes_reproduce_the_seed_matrices(shape):
    seed = parse((ROOT / "fixtures" / "topo" / f"{SEEDS[shape]}.txt").read_text())
    _snapshot, _topology, matrix = derived(shape)
    assert compare(matrix, seed) == []
    assert set(matrix.links) == set(seed.links)


def write(shapes: list[str]) -> None:
    for shape in shapes or SHAPES:
        for name, text in goldens(shape).items():
            (HOSTS / shape / name).write_text(text)
            print(f"wrote {HOSTS / shape / name}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"]:
        sys.exit("usage: python tests/test_topology_fixtures.py --write [SHAPE ...]")
    write(sys.argv[2:])
