"""``topodoc fabric plan`` / ``diagram``: the domain text's numbers (shared/DOMAIN.md, "Across servers";
shared/seed/ai-infra-hardware-zh.txt, the rails / one- / two- / three-tier Clos / SuperPOD sections)."""

import json
import shutil

import pytest
from conftest import run_cli, run_cli_process
from jsonschema import Draft202012Validator

from topodoc import jsonschema_gen
from topodoc.fabric.plan import PlanError, Request, plan
from topodoc.fabric.switches import SwitchError, custom, lookup, parse_speed

QM8700 = lookup("QM8700")


def test_qm8700_is_40_ports_of_200g():
    assert (QM8700.ports, QM8700.port_gbps) == (40, 200.0)
    assert lookup("mqm8700-hs2f") is QM8700  # an order code names the same switch
    assert all(s.source for s in __import__("topodoc.fabric.switches").fabric.switches.SWITCHES.values())


def test_one_tier_is_40_servers_320_gpus_on_8_rails():
    p = plan(Request(40, QM8700))
    assert (p.tiers, p.rails, p.gpus, p.max_nodes, p.max_gpus) == (1, 8, 320, 40, 320)
    assert (p.switches.leaf, p.switches.spine, p.switches.core) == (8, 0, 0)  # one switch per rail
    with pytest.raises(PlanError, match="at most 40 nodes, 320 GPUs"):
        plan(Request(41, QM8700, tiers=1))


def test_one_switch_without_rails_holds_five_dgx_a100():
    """The seed: a QM8700 takes at most 5 DGX A100 when all 8 NICs of a node go to it."""
    p = plan(Request(5, QM8700, rails=False))
    assert (p.tiers, p.max_nodes, p.switches.leaf) == (1, 5, 1)
    assert plan(Request(6, QM8700, rails=False)).tiers == 2


def test_two_tiers_32_down_8_up_is_10240_gpus_at_4_to_1():
    p = plan(Request(1280, QM8700, oversubscription=4))
    assert (p.tiers, p.gpus, p.max_gpus, p.oversubscription) == (2, 10240, 10240, "4:1")
    assert p.leaf_ports == (32, 8)
    assert p.nodes_per_unit * 8 == 256  # a rail group: 32 nodes x 8 GPUs = 2^8 GPUs, 40 of them
    assert p.scalable_units == 40
    assert p.per_gpu_nic_gbps == 200 and p.per_gpu_inter_node_gbps == 50  # 4:1 leaves a quarter
    with pytest.raises(PlanError, match="do not fit 2 tier"):
        plan(Request(1281, QM8700, oversubscription=4, tiers=2))


SUPERPOD = [  # nodes, GPUs, SUs, leaf, spine, core, tiers: the seed text's table
    (10, 80, 0.5, 8, 2, 0, 2),
    (20, 160, 1, 8, 4, 0, 2),
    (40, 320, 2, 16, 10, 0, 2),
    (80, 640, 4, 32, 20, 0, 2),
    (100, 800, 5, 40, 20, 0, 2),
    (120, 960, 6, 48, 80, 24, 3),
    (140, 1120, 7, 56, 80, 28, 3),
]


@pytest.mark.parametrize(("nodes", "gpus", "sus", "leaf", "spine", "core", "tiers"), SUPERPOD)
def test_superpod_rows(nodes, gpus, sus, leaf, spine, core, tiers):
    p = plan(Request(nodes, QM8700, reference="superpod"))
    got = (p.nodes, p.gpus, p.scalable_units, p.switches.leaf, p.switches.spine, p.switches.core, p.tiers)
    assert got == (nodes, gpus, sus, leaf, spine, core, tiers)
    assert p.oversubscription == "1:1" and p.nodes_per_unit == 20
    assert any("SuperPOD" in n and "does not state" in n for n in p.notes)  # says the rule is inferred


def test_superpod_three_tier_cables_and_bandwidth():
    p = plan(Request(140, QM8700, reference="superpod"))
    assert [(c.link, c.cables) for c in p.cables] == [("node-leaf", 1120), ("leaf-spine", 1120),
                                                      ("spine-core", 1120)]
    assert p.bisection_gbps == 140 * 8 * 200 / 2
    assert p.limits[0].tiers == 2 and p.limits[0].max_nodes == 100  # two tiers stop at 5 units


@pytest.mark.parametrize("k", [4, 8, 16, 40, 64])
def test_k_port_three_tier_fat_tree_reaches_k_cubed_over_4_hosts(k):
    p = plan(Request(1, custom(k, 200), gpus_per_node=1, nics_per_node=1, rails=False, topology="fat-tree"))
    assert p.tiers == 3 and p.max_nodes == k**3 // 4


def test_full_k4_fat_tree_has_20_switches():
    p = plan(Request(16, custom(4, 100), gpus_per_node=1, nics_per_node=1, rails=False, topology="fat-tree"))
    assert (p.switches.leaf, p.switches.spine, p.switches.core) == (8, 8, 4)
    assert p.oversubscription == "1:1"


def test_twin_port_cages_halve_switch_side_transceivers():
    p = plan(Request(64, lookup("QM9700")))
    node_leaf = p.cables[0]
    assert node_leaf.cables == 512 and node_leaf.transceivers == 512 + 256


@pytest.mark.parametrize("kwargs", [
    {"oversubscription": 3},
    {"reference": "superpod", "oversubscription": 4},
    {"topology": "fat-tree", "oversubscription": 2},
    {"topology": "fat-tree", "tiers": 2},
    {"nodes": 0},
])
def test_requests_no_plan_answers(kwargs):
    args = {"nodes": 10, "switch": QM8700, **kwargs}
    with pytest.raises(PlanError):
        plan(Request(**args))


def test_beyond_three_tiers_is_refused():
    with pytest.raises(PlanError, match="more than three tiers"):
        plan(Request(10**6, QM8700))


@pytest.mark.parametrize("text", ["200x", "", "-5", "1e9"])
def test_bad_port_speeds(text):
    with pytest.raises(SwitchError):
        parse_speed(text)


def test_port_speed_spellings():
    assert [parse_speed(t) for t in ("200G", "400", "800GbE", "200 Gb/s")] == [200, 400, 800, 200]


# -- the command ------------------------------------------------------------------------------------------

def _validator(name):
    schema = json.loads((jsonschema_gen.SCHEMAS_DIR / f"{name}.json").read_text())
    return Draft202012Validator(schema)


def test_plan_json_in_a_real_process_has_the_keys_and_validates():
    out = run_cli_process("fabric", "plan", "--gpus", "10240", "--switch-radix", "40", "--port-speed", "200G",
                          "--oversubscription", "4:1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert not list(_validator("topodoc.fabric").iter_errors(data))
    for key in ("tiers", "nodes", "gpus", "rails", "switches", "scalable_units", "max_gpus",
                "oversubscription", "bisection_gbps", "per_gpu_inter_node_gbps", "cables"):
        assert key in data
    assert set(data["switches"]) == {"leaf", "spine", "core"}
    assert (data["tiers"], data["max_gpus"], data["oversubscription"]) == (2, 10240, "4:1")


def test_plan_text_says_rails_counts_limits_and_structure():
    out = run_cli("fabric", "plan", "--nodes", "140", "--reference", "superpod")
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    for words in ("8 rails", "56 leaf, 80 spine, 28 core", "2 tier(s): 100 nodes, 800 GPUs",
                  "one node of the core tier", "SuperPOD"):
        assert words in flat


@pytest.mark.parametrize(("args", "says"), [
    ((), "give --nodes N or --gpus N"),
    (("--nodes", "4", "--gpus", "32"), "give --nodes N or --gpus N"),
    (("--nodes", "4", "--switch", "QM1234"), "unknown switch"),
    (("--nodes", "4", "--switch-radix", "40"), "go together"),
    (("--nodes", "4", "--switch", "QM8700", "--switch-radix", "40", "--port-speed", "200"), "not both"),
    (("--nodes", "4", "--switch-radix", "40", "--port-speed", "fast"), "not a port speed"),
    (("--nodes", "50", "--tiers", "1"), "do not fit 1 tier"),
    (("--nodes", "4", "--reference", "superpod", "--oversubscription", "4:1"), "superpod"),
])
def test_plan_usage_errors_exit_2_in_one_line(args, says):
    out = run_cli("fabric", "plan", *args)
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_diagram_dot_and_mermaid_from_options_and_from_a_saved_plan(tmp_path):
    dot = run_cli("fabric", "diagram", "--nodes", "140", "--reference", "superpod")
    assert dot.returncode == 0 and dot.stdout.startswith("graph topology {")
    assert "spines x10" in dot.stdout and "cores x28" in dot.stdout and "rail 7 leaf" in dot.stdout
    saved = tmp_path / "plan.json"
    saved.write_text(run_cli("fabric", "plan", "--nodes", "40", "--reference", "superpod", "--json").stdout)
    mermaid = run_cli_process("fabric", "diagram", "--plan", str(saved), "--format", "mermaid")
    assert mermaid.returncode == 0, mermaid.stderr
    assert "flowchart TB" in mermaid.stdout and "nodes 21-40" in mermaid.stdout
    big = run_cli("fabric", "diagram", "--gpus", "10240", "--oversubscription", "4:1")
    assert big.returncode == 0 and big.stdout.count("\n") < 200  # drawn per rail, not per leaf


def test_diagram_of_a_non_plan_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "topodoc.fleet"}')
    out = run_cli("fabric", "diagram", "--plan", str(bad))
    assert out.returncode == 2 and "not a `topodoc fabric plan --json`" in out.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_diagram_svg():
    out = run_cli("fabric", "diagram", "--nodes", "20", "--reference", "superpod", "--format", "svg")
    assert out.returncode == 0 and "<svg" in out.stdout
