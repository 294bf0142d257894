"""The fleet's verdicts as an operator found them wrong (issue 24 section 4, issue 21's fleet part): each
test fails on the code before the fix."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pytest

from topodoc.codec import snapshot_from_data, to_data
from topodoc.fleet.compare import compare
from topodoc.fleet.fingerprint import fingerprint
from topodoc.fleet.nodes import expand, load_all, node_names
from topodoc.fleet.plant import PLANTERS, vary_identity
from topodoc.probe.source import load_snapshot


def _fleet(paths: list[str]):
    items, errors = expand(paths)
    groups, load_errors = load_all(items, jobs=1)
    return compare(groups, errors + load_errors)


def _write(tmp_path, name: str, data: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture(scope="module")
def hgx() -> dict:
    return to_data(load_snapshot("example:hgx-h100-8x400g-ib"))


def test_a_missing_rail_nic_is_a_warning_not_eight_info_lines(tmp_path, hgx):
    paths = [_write(tmp_path, f"n{n}", vary_identity(hgx, n)) for n in range(4)]
    odd = vary_identity(hgx, 9)
    odd["nics"] = [n for n in odd["nics"] if n["name"] != "mlx5_3"]
    paths.append(_write(tmp_path, "odd", odd))
    report = _fleet(paths)
    by_key = {d.key: d for d in report.differences}
    missing = by_key["mlx5_3.present"]
    assert missing.severity == "warning" and missing.matters
    assert missing.outliers[0].value == "absent" and missing.outliers[0].nodes == ("odd",)
    # its firmware, port, NUMA node and paths are implied, not listed again
    assert not [
        k for k in by_key if k.startswith(("mlx5_3.fw", "mlx5_3:", "mlx5_3.numa")) or k.endswith("-mlx5_3")
    ]
    # the GPU that used it now gets another NIC from NCCL: that is said, at warning
    assert by_key["rail.GPU3"].severity == "warning" and by_key["rail.GPU3"].majority == "mlx5_3"
    assert not [d for d in report.differences if d.severity == "info"]


def test_fleet_differences_name_no_unrelated_rule():
    from topodoc.fleet.fingerprint import RULE_OF

    assert RULE_OF["driver"] is None  # a driver difference is not an NCCL version mismatch
    assert RULE_OF["nic.present"] is None  # a missing NIC is not "rails shared"
    assert "rail-mismatch" not in RULE_OF.values()


def _two_version_log(path) -> None:
    lines = []
    for h, (host, version) in enumerate((("node-a", "2.20.5"), ("node-b", "2.21.5"), ("node-c", "2.21.5"))):
        pid = 5000 + h
        lines += [
            f"{host}:{pid}:{pid} [0] NCCL INFO NCCL version {version}+cuda12.4",
            f"{host}:{pid}:{pid} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.{h + 1}<0>",
            f"{host}:{pid}:{pid} [0] NCCL INFO ncclCommInitRank comm 0x{h + 1}0 rank {h} nranks 3 cudaDev 0 "
            "nvmlDev 0 busId 18000 commId 0xabc - Init START",
            f"{host}:{pid}:{pid} [0] NCCL INFO Channel 00/0 : {h}[0] -> {(h + 1) % 3}[0] [send] "
            "via NET/IB/0/GDRDMA",
        ]
    path.write_text("\n".join(lines) + "\n")


def test_nccl_versions_differing_across_nodes_in_logs_are_a_finding(tmp_path):
    log = tmp_path / "job.log"
    _two_version_log(log)
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", "--logs", str(log), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr  # nccl-version-mismatch is an error
    findings = json.loads(out.stdout)["rails"]["findings"]
    (mismatch,) = [f for f in findings if f["rule"] == "nccl-version-mismatch"]
    assert "2.20.5" in mismatch["message"] and "2.21.5" in mismatch["message"]


def _tray(base: dict, n: int, clique: int | None = None, cluster: str | None = None) -> dict:
    data = vary_identity(base, n)
    for gpu in data["gpus"]:
        if clique is not None:
            gpu["fabric"]["clique_id"] = clique
        if cluster is not None:
            gpu["fabric"]["cluster_uuid"] = cluster
    return data


def test_nvl72_tray_in_another_clique_does_not_belong_to_the_rack(tmp_path):
    base = to_data(load_snapshot("example:gb200-nvl72-tray"))
    paths = [_write(tmp_path, f"tray{n}", _tray(base, n)) for n in range(1, 6)]
    paths.append(_write(tmp_path, "tray6", _tray(base, 6, clique=4)))
    report = _fleet(paths)
    assert len(report.groups) == 1  # every compared property is alike ...
    racks = report.racks  # ... but one tray is in another NVLink clique
    assert racks is not None and racks.rack_domain.endswith("/32766")
    (out,) = racks.outsiders
    assert out.node == "tray6" and out.severity == "error" and "clique 4 of the same cluster" in out.message
    cli = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", *paths], capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 1, cli.stderr
    assert (
        "NVLink domains" in cli.stdout and "tray6" in cli.stdout and "not in the rack's domain" in cli.stdout
    )
    assert "all alike" in cli.stdout.splitlines()[0] and "tray6" in cli.stdout.splitlines()[0]
    rows = subprocess.run(
        [sys.executable, "-m", "topodoc", "fleet", *paths, "--csv"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    assert [r.split(",")[:2] for r in rows[1:]] == [["tray6", "NVLink domain"]]


def test_two_whole_racks_are_listed_not_called_out(tmp_path):
    base = to_data(load_snapshot("example:gb200-nvl72-tray"))
    paths = [_write(tmp_path, f"a{n}", _tray(base, n)) for n in range(3)]
    paths += [
        _write(tmp_path, f"b{n}", _tray(base, 10 + n, cluster="0b0b0b0b-0000-4000-8000-000000000000"))
        for n in range(3)
    ]
    racks = _fleet(paths).racks
    assert racks.rack_domain is None and racks.outsiders == () and len(racks.trays) == 6


@pytest.mark.parametrize(
    "example",
    ["dgx-a100", "gb200-nvl72-tray", "aws-p4d-24xlarge", "hgx-h100-8x400g-ib", "dgx1-v100-hybrid-cube-mesh"],
)
def test_one_nic_per_gpu_in_topo_diagram_rules_and_fleet(example):
    """topo's reading, the diagram's path, the rail code the rules use and the fleet's property agree."""
    from topodoc.report.diagram_text import nearest_nic
    from topodoc.topology import derive, to_matrix
    from topodoc.topology.rails import rail_pairs
    from topodoc.topology.reading import read

    snapshot = load_snapshot(f"example:{example}")
    topo = derive(snapshot)
    rails = {p.gpu.name: p.nic.device for p in rail_pairs(topo)}
    device = {n.name: n.device for n in topo.nics}
    diagram = {g.name: device[c.b] for g in topo.gpus if (c := nearest_nic(topo, g.name))}
    matrix = to_matrix(topo)
    legend = {n.name: n.device or n.name for n in matrix.nics}
    shown = {n.gpu: legend[n.nccl_nic] for n in read(matrix).nearest_nics}
    fleet = {k[len("rail.") :]: p.value for k, p in fingerprint(snapshot).items() if k.startswith("rail.")}
    assert rails == diagram == fleet
    assert shown == rails or (not matrix.nics and example == "aws-p4d-24xlarge")  # nvidia-smi lists no EFA
    if example in ("dgx-a100", "gb200-nvl72-tray"):
        assert rails["GPU1"] == "mlx5_1"  # two NICs tie; NCCL gives CUDA device 1 the second


def test_topo_prints_nccls_choice_with_the_reason():
    out = subprocess.run(
        [sys.executable, "-m", "topodoc", "topo", "--from", "example:dgx-a100"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("GPU1:"))
    assert "NIC1 (mlx5_1)" in line and "NIC0 (mlx5_0)" not in line and "tie" in line


def test_example_inputs_are_accepted_and_named():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "topodoc",
            "fleet",
            "example:dgx-a100",
            "example:dgx-a100-degraded-gpu-x8",
            "example:hgx-h100-8x400g-ib",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    data = json.loads(out.stdout)
    assert data["nodes"] == 3 and data["errors"] == []
    names = {n for g in data["groups"] for n in g["nodes"]}
    assert names == {"dgx-a100", "dgx-a100-degraded-gpu-x8", "hgx-h100-8x400g-ib"}


def test_nodes_are_named_by_the_shortest_distinct_part_of_their_path():
    items = [f"/shared/recs/gpu{n:03d}/recording.tar.gz" for n in range(8)]
    assert sorted(node_names(items).values()) == [f"gpu{n:03d}" for n in range(8)]
    mixed = ["/a/x/run1/snap.json", "/a/y/run1/snap.json", "/a/lone.json", "http://n1:9400/"]
    assert node_names(mixed) == {
        "/a/x/run1/snap.json": "x",
        "/a/y/run1/snap.json": "y",
        "/a/lone.json": "lone",
        "http://n1:9400/": "http://n1:9400",
    }


def test_recordings_in_host_folders_are_told_apart(tmp_path):
    from topodoc.examples_index import example_path

    for host in ("gpu001", "gpu002", "gpu003"):
        (tmp_path / host).mkdir()
        shutil.copy(example_path("dgx-a100"), tmp_path / host / "recording.tar.gz")
    report = _fleet([str(tmp_path)])
    assert report.groups[0].nodes == ("gpu001", "gpu002", "gpu003")


def test_identical_recordings_are_unpacked_once(tmp_path, monkeypatch):
    """Byte-identical recordings are folded by content before anything is unpacked or decoded."""
    from topodoc.examples_index import example_path
    from topodoc.probe import source

    calls = []
    real = source.load_snapshot
    monkeypatch.setattr(
        source, "load_snapshot", lambda spec, *a, **k: calls.append(spec) or real(spec, *a, **k)
    )
    for n in range(30):
        shutil.copy(example_path("dgx-a100"), tmp_path / f"node{n:02d}.tar.gz")
    shutil.copy(example_path("dgx-a100-degraded-gpu-x8"), tmp_path / "odd.tar.gz")
    report = _fleet([str(tmp_path)])
    assert report.nodes == 31 and len(calls) == 2


def _switch_ends_unnamed(data: dict) -> dict:
    """NVLinks whose far end NVML did not type (remote_type None): derive tells a switch by its PCI
    function."""
    for gpu in data["gpus"]:
        for link in gpu["nvlinks"]:
            link["remote_type"] = None
    return data


def test_no_node_is_served_another_nodes_path_class(tmp_path):
    """Issue 21: the layout cache keyed on a hand-kept field list served NV12 where a fresh derive of the
    node says otherwise. Two nodes alike in every field that list held; in the second, the NVLinks' far
    end is not an NVSwitch function (an NVIDIA bridge class 0x0680 vs another class)."""
    from topodoc.topology import derive

    base = to_data(load_snapshot("example:dgx-a100"))
    good = _switch_ends_unnamed(vary_identity(base, 1))
    odd = _switch_ends_unnamed(vary_identity(base, 2))
    switches = {link["remote_pci_address"] for g in odd["gpus"] for link in g["nvlinks"]}
    for address in switches:
        odd["pci"][address]["class_code"] = 0x020000  # not an NVSwitch: derive must not count these links
    fresh = {
        k: p.value for k, p in fingerprint(snapshot_from_data(odd)).items() if k.startswith("path.GPU0-GPU")
    }
    assert fresh["path.GPU0-GPU1"] == derive(snapshot_from_data(odd)).gpu_pairs[0].smi != "NV12"
    report = _fleet([_write(tmp_path, "good", good), _write(tmp_path, "odd", odd)])
    served = {d.key: v for d in report.differences for o in d.outliers for v in [o.value] if "odd" in o.nodes}
    for key, value in fresh.items():
        assert served.get(key, value) == value, key  # the odd node's cells are its own, never good's
    assert "path.GPU0-GPU1" in {d.key for d in report.differences}


def test_planted_differences_still_found_on_the_typed_model(tmp_path, hgx):
    paths = [_write(tmp_path, f"n{n}", vary_identity(hgx, n)) for n in range(3)]
    odd = vary_identity(hgx, 7)
    key = PLANTERS["width"](odd, random.Random(1))
    paths.append(_write(tmp_path, "odd", odd))
    assert key in {d.key for d in _fleet(paths).differences}
