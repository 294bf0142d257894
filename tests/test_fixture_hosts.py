"""The bundled host recordings: each synthetic shape has its description, README and an up-to-date
recording, and replaying the recording through the real collectors gives back the facts its
``machine.json`` declares (GPU/NIC/NUMA counts, links, NVLink counts, degraded facts)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
TOOLS = HOSTS.parent.parent / "tools" / "fixtures" / "hosts"  # build.py, regen.py, builder/
sys.path.insert(0, str(TOOLS))

from topodoc.probe.collect import collect  # noqa: E402
from topodoc.probe.record import open_recording  # noqa: E402

# by module name from tools/fixtures/hosts (a plain `import build` sorts differently wherever the
# PyPA `build` package is installed)
build = importlib.import_module("build")
load = importlib.import_module("builder.machine").load

NAMES = build.machine_names()


@cache
def snapshot(name: str):
    return collect(open_recording(HOSTS / name / "recording.tar.gz"), name)


def test_the_corpus_covers_the_issue_list():
    assert len(NAMES) >= 16
    assert {
        "8xgpu-2s-pcie-switches",
        "8xa100-pcie-2s-nvbridge-pairs",
        "dgx-a100",
        "hgx-h100-8x400g-ib",
        "aws-p4d-24xlarge",
        "gcp-a3-highgpu-8g",
        "8xgpu-roce-2s",
        "cloud-vm-flat-pcie",
    } <= set(NAMES)
    assert len([n for n in NAMES if n.startswith("dgx-a100-degraded-")]) >= 6


@pytest.mark.parametrize("name", NAMES)
def test_folder_has_description_readme_and_expected_matrix(name):
    folder = HOSTS / name
    readme = (folder / "README.md").read_text()
    assert json.loads((folder / "machine.json").read_text())["why"] in readme
    assert "## Sources" in readme
    block = readme.split("<!-- expected-matrix:begin -->")[1].split("<!-- expected-matrix:end -->")[0]
    header = block.split("```")[1].lstrip("\n").split("\n", 1)[0]
    assert header.split("\t")[:2] == ["", "GPU0"]


@pytest.mark.parametrize("name", NAMES)
def test_recording_is_up_to_date_with_its_description(name):
    assert build.check(name) is None


@pytest.mark.parametrize("name", NAMES)
def test_replay_gives_the_declared_machine(name):
    machine, snap = load(name), snapshot(name)
    gpus = machine.by_kind("gpu")
    assert [g.pci_address for g in snap.gpus] == [f.bdf for f in gpus]
    assert [g.name for g in snap.gpus] == [f.model["name"] for f in gpus]
    assert [(g.pcie_gen, g.pcie_width) for g in snap.gpus] == [f.link for f in gpus]
    assert [(g.pcie_gpu_max_gen, g.pcie_max_width) for g in snap.gpus] == [
        (f.model["pcie_gen"], f.max_link[1]) for f in gpus
    ]
    assert len(snap.numa) == len(machine.desc["numa"])
    assert {f.bdf for f in machine.functions} <= set(snap.pci)
    rdma = {f.spec["ib"]: f.bdf for f in machine.by_kind("nic") if "ib" in f.spec}
    assert {n.name: n.pci_address for n in snap.nics if n.name in rdma} == rdma
    assert (snap.smi_topo is not None) == bool(machine.desc.get("smi_topo"))


@pytest.mark.parametrize("name", NAMES)
def test_gpu_locality_follows_the_host_bridge(name):
    machine, snap = load(name), snapshot(name)
    for fn, gpu in zip(machine.by_kind("gpu"), snap.gpus, strict=True):
        assert snap.pci[gpu.pci_address].numa_node == fn.numa
        assert gpu.numa_node == (fn.numa if fn.numa >= 0 else None)
        node_cpus = machine.desc["numa"][max(fn.numa, 0)]["cpus"]
        assert gpu.cpu_affinity == (node_cpus if fn.numa >= 0 else f"0-{_cpu_count(machine) - 1}")


def _cpu_count(machine) -> int:
    from builder.cpus import parse_cpulist

    return sum(len(parse_cpulist(n["cpus"])) for n in machine.desc["numa"])


@pytest.mark.parametrize("name", NAMES)
def test_active_nvlinks_match_the_declared_fabric(name):
    machine, snap = load(name), snapshot(name)
    spec = machine.desc.get("nvlink", {})
    for fn, gpu in zip(machine.by_kind("gpu"), snap.gpus, strict=True):
        declared = spec.get("nvswitch", {}).get("links_per_gpu", 0)
        declared += sum(c for a, b, c in spec.get("pairs", []) if gpu.index in (a, b))
        active = [link for link in gpu.nvlinks if link.active]
        assert len(active) == declared - len(fn.spec.get("nvlinks_down", []))
        assert len(gpu.nvlinks) == fn.model.get("nvlinks", 0)
        switch_links = [link for link in active if link.remote_type == "switch"]
        assert bool(switch_links) == ("nvswitch" in spec and bool(active))


def test_seed_switch_machine_pairs_and_legacy_speed_strings():
    snap = snapshot("8xgpu-2s-pcie-switches")
    ancestors = {(p.a, p.b): p.common_ancestor for p in snap.gpu_pairs}
    assert (ancestors[(0, 1)], ancestors[(0, 2)], ancestors[(0, 4)]) == ("PIX", "PXB", "SYS")
    assert snap.pci[snap.gpus[0].pci_address].link.speed_gts == 8.0  # "8 GT/s" on kernel 4.15


def test_flat_vm_has_no_locality_and_no_bridges():
    snap = snapshot("cloud-vm-flat-pcie")
    assert snap.host.virtualized is True
    assert {d.numa_node for d in snap.pci.values()} == {-1}
    assert all(d.parent is None for d in snap.pci.values())
    assert {p.common_ancestor for p in snap.gpu_pairs} == {"PHB"}


def test_roce_ports_carry_v2_gids_on_their_netdev():
    snap = snapshot("8xgpu-roce-2s")
    nic = next(n for n in snap.nics if n.name == "mlx5_0")
    port = nic.ports[0]
    assert (nic.kind, port.link_layer) == ("roce", "Ethernet")
    v2 = [g for g in port.gids if g.type == "RoCE v2"]
    assert any(g.gid.endswith("ffff:0a64:0011") for g in v2)  # ::ffff:10.100.0.17
    assert {g.netdev for g in v2} == set(nic.netdevs)


def test_cloud_nics_are_named_by_kind():
    kinds = {n.name: n.kind for n in snapshot("aws-p4d-24xlarge").nics}
    assert [k for name, k in kinds.items() if name.startswith("rdmap")] == ["efa"] * 4
    assert {n.kind for n in snapshot("gcp-a3-highgpu-8g").nics} == {"gvnic"}


@pytest.mark.parametrize(
    ("variant", "fact"),
    [
        ("gpu-x8", lambda s: s.gpus[3].pcie_width == 8 and s.gpus[3].pcie_max_width == 16),
        ("gpu-gen3", lambda s: s.gpus[5].pcie_gen == 3 and s.gpus[5].pcie_gpu_max_gen == 4),
        ("nvlink-down", lambda s: sum(link.active for link in s.gpus[2].nvlinks) == 11),
        ("no-peermem", lambda s: s.kernel.peermem_module is None),
        ("acs", lambda s: s.pci["0000:02:01.0"].acs_ctrl == 0x1D),
        ("ib-port-down", lambda s: next(n for n in s.nics if n.name == "mlx5_3").ports[0].state == "DOWN"),
        (
            "nic-other-socket",
            lambda s: s.pci[next(n for n in s.nics if n.name == "mlx5_0").pci_address].numa_node == 4,
        ),
    ],
)
def test_degraded_variant_differs_from_the_base_in_its_fact(variant, fact):
    assert fact(snapshot(f"dgx-a100-degraded-{variant}"))
    assert not fact(snapshot("dgx-a100"))


@pytest.mark.parametrize(
    ("variant", "fact"),
    [
        ("nic-rate", lambda s: next(n for n in s.nics if n.name == "mlx5_3").ports[0].rate_gbps == 200),
        ("nvswitch-incomplete", lambda s: not any(link.active for link in s.gpus[6].nvlinks)),
    ],
)
def test_degraded_hgx_differs_from_the_base_in_its_fact(variant, fact):
    assert fact(snapshot(f"hgx-h100-degraded-{variant}"))
    assert not fact(snapshot("hgx-h100-8x400g-ib"))


def test_gb200_tray_is_one_fabric_clique_with_off_host_switches():
    snap = snapshot("gb200-nvl72-tray")
    assert {(g.fabric.state, g.fabric.clique_id) for g in snap.gpus} == {("completed", 32766)}
    assert len({g.fabric.cluster_uuid for g in snap.gpus}) == 1
    for gpu in snap.gpus:
        assert [(link.active, link.remote_type, link.remote_pci_address) for link in gpu.nvlinks] == [
            (True, "switch", None)
        ] * 18
    assert snap.host.cpu_vendor == "0x41" and snap.host.logical_cpus == 144


def test_dgx1_mesh_gives_each_v100_six_links_to_four_peers():
    snap = snapshot("dgx1-v100-hybrid-cube-mesh")
    at = {g.pci_address: g.index for g in snap.gpus}
    for gpu in snap.gpus:
        peers = [at[link.remote_pci_address] for link in gpu.nvlinks if link.active]
        assert len(peers) == 6 and len(set(peers)) == 4


def test_regen_describes_each_kind_of_change():
    import regen

    assert regen.describe("expected-matrix.txt", "a\nb\n", "a\nb\n") == ""
    assert regen.describe("expected-matrix.txt", None, "a\n") == "expected-matrix.txt: new"
    assert regen.describe("expected-matrix.txt", "a\nb\nc\n", "a\nB\n") == "expected-matrix.txt: +1 -2 lines"
    before = json.dumps({"findings": {"ib-port-down": "error", "rails-shared": "info"}})
    after = json.dumps({"findings": {"ib-port-down": "warning", "acs-on-p2p-path": "error"}})
    assert regen.describe("expected-findings.json", before, after) == (
        "expected-findings.json: +acs-on-p2p-path (error) +ib-port-down (warning) -rails-shared"
    )


def test_regen_check_passes_on_a_current_host_and_flags_a_stale_golden(tmp_path):
    import regen

    assert regen.check("hgx-h100-degraded-nic-rate") == []
    folder = tmp_path / "dgx1-v100-hybrid-cube-mesh"
    folder.mkdir()
    for name in ("recording.tar.gz", "README.md", "expected-matrix.json", "expected-matrix.txt",
                 "expected-bandwidth.json"):
        (folder / name).write_bytes((HOSTS / folder.name / name).read_bytes())
    (folder / "expected-findings.json").write_text('{"findings": {}}\n')
    stale = regen.stale_goldens(folder)
    assert list(stale) == ["expected-findings.json"]
    assert stale["expected-findings.json"][0] == (
        "expected-findings.json: +rails-shared (info)"
    )


def test_regen_cli_check_on_one_host():
    run = subprocess.run(
        [sys.executable, str(TOOLS / "regen.py"), "--check", "gb200-nvl72-tray"],
        capture_output=True, text=True, check=False,
    )
    assert (run.returncode, run.stdout) == (0, "every golden is up to date\n"), run.stderr
    bad = subprocess.run(
        [sys.executable, str(TOOLS / "regen.py"), "--check", "no-such-host"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "no host named no-such-host" in bad.stderr


def test_examples_command_lists_every_recording_with_its_why():
    run = subprocess.run(
        [sys.executable, "-m", "topodoc", "examples", "--json"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    listed = {e["name"]: e for e in json.loads(run.stdout)["examples"]}
    for name in NAMES:
        assert listed[name]["why"] == json.loads((HOSTS / name / "machine.json").read_text())["why"]
        assert listed[name]["source"] == f"example:{name}"
    text = subprocess.run(
        [sys.executable, "-m", "topodoc", "examples"], capture_output=True, text=True, check=False
    )
    assert text.returncode == 0 and "dgx-a100-degraded-acs" in text.stdout
