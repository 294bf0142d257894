"""issue 11: every statement topodoc made that was false, each pinned by a test that failed before.

Hardware cases are the rule fixtures (fixtures/rules/, built by tools/fixtures/rules/build.py) and the bundled
host recordings; text cases go through the real CLI.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import re
from pathlib import Path

from conftest import run_cli

from topodoc import codec
from topodoc.bandwidth.model import build
from topodoc.logmodel import LogAnalysis
from topodoc.model import PciLink
from topodoc.parsers.nccl_log import analyze
from topodoc.probe.source import load_snapshot
from topodoc.report.color import use_color
from topodoc.report.diagram import render_mermaid
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate
from topodoc.topology import derive

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "rules"


def case(rule_id: str, name: str):
    return codec.load((CASES / rule_id / f"{name}.json").read_text())


def base():
    return codec.load((CASES / "base.json").read_text())


@functools.cache
def example(name: str):
    return load_snapshot(f"example:{name}")


def run_rule(rule_id: str, snapshot, logs=None):
    return evaluate(Facts(snapshot=snapshot, logs=logs), [registry.get(rule_id)])


# --- acs-on-p2p-path: a switch upstream port has no ACS capability; that is not "unreadable" ---------


def test_healthy_two_level_switch_box_is_reported_acs_clean():
    report = run_rule("acs-on-p2p-path", example("dgx-a100"))
    assert report.skipped == () and report.findings == ()


def test_acs_redirect_is_still_found_behind_upstream_ports():
    (finding,) = run_rule("acs-on-p2p-path", example("dgx-a100-degraded-acs")).findings
    assert finding.evidence and "setpci" in (finding.fix or "")


def test_rule_fixtures_give_no_upstream_port_an_acs_value():
    upstream = [d for d in base().pci.values() if d.port_type == "upstream"]
    assert upstream and all(d.acs_ctrl is None for d in upstream)


# --- NCCL's P2P default depends on the CPU and the GPU count --------------------------------------------

PHB_2GPU = """\
\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPHB\t0-15\t0
GPU1\tPHB\t X \t0-15\t0
"""


def test_topo_does_not_claim_pxb_default_for_two_gpus_on_an_unknown_cpu():
    out = run_cli("topo", "-", input=PHB_2GPU).stdout
    assert "excludes these pairs" not in out
    assert "depends on the CPU" in out and "AMD" in out


def test_topo_keeps_the_pxb_statement_with_more_than_two_gpus():
    text = (ROOT / "fixtures" / "topo" / "real-5gpu-node-phb-then-p2p-p-aikitoria.txt").read_text()
    out = run_cli("topo", "-", input=text).stdout
    assert "host bridge only" in out and "more than two GPUs" in out


# --- topo -p2p n / a: NS means no NVLink / no atomics, not no P2P -----------------------------------------

P2P = """\
$ nvidia-smi topo -p2p {mode}
 \tGPU0\tGPU1\t
 GPU0\tX\tNS\t
 GPU1\tNS\tX\t

Legend:

  X    = Self
  OK   = Status Ok
  NS   = Not supported
"""


def test_p2p_nvlink_matrix_reads_ns_as_no_nvlink():
    out = run_cli("topo", "-", input=P2P.format(mode="n")).stdout
    assert "host memory" not in out and "no NVLink" in out


def test_p2p_atomics_matrix_reads_ns_as_no_atomics():
    out = run_cli("topo", "-", input=P2P.format(mode="a")).stdout
    assert "host memory" not in out and "no atomics" in out


def test_p2p_read_matrix_still_means_no_p2p():
    out = run_cli("topo", "-", input=P2P.format(mode="r")).stdout
    assert "host memory" in out


# --- gpu-nic-far: C2C paths keep GDR; an NCCL_NET_GDR_LEVEL the log shows is honoured ---------------------


def test_gb200_c2c_nics_are_not_reported_as_gdr_off():
    report = run_rule("gpu-nic-far", example("gb200-nvl72-tray"))
    assert not report.findings and not report.skipped


def _log(tmp_path: Path, lines: list[str]) -> LogAnalysis:
    # line format: NCCL src/graph/paths.cc ncclGetLevel: INFO(NCCL_ALL, "%s set by environment to %s", ...)
    path = tmp_path / "job.log"
    path.write_text("".join(f"node1:4242:4242 [0] NCCL INFO {line}\n" for line in lines))
    return analyze([str(path)])


def test_gdr_level_override_in_the_log_lifts_the_warning(tmp_path):
    logs = _log(tmp_path, ["NCCL version 2.21.5+cuda12.4", "NCCL_NET_GDR_LEVEL set by environment to SYS"])
    assert run_rule("gpu-nic-far", case("gpu-nic-far", "fire"), logs).findings == ()
    assert run_rule("gpu-nic-far", case("gpu-nic-far", "fire")).findings


def test_gdr_level_override_narrower_than_pxb_is_named(tmp_path):
    logs = _log(tmp_path, ["NCCL version 2.21.5+cuda12.4", "NCCL_NET_GDR_LEVEL set by environment to PIX"])
    findings = run_rule("gpu-nic-far", case("gpu-nic-far", "fire"), logs).findings
    assert findings and all("NCCL_NET_GDR_LEVEL=PIX" in f.message for f in findings)


# --- the bandwidth model prices a link at the speed it trains to, not an idle GPU's Gen1 ---------------


def test_idle_gen1_gpu_is_priced_at_its_max_speed():
    snapshot = case("pcie-speed-reduced", "clean")  # GPU2 idles at 2.5 GT/s of 32
    model = build(derive(snapshot), snapshot)
    pair = next(p for p in model.gpu_nic if p.a == "GPU2" and p.nccl in ("PIX", "PXB"))
    assert "Gen1" not in (pair.limiter or "").split("(")[0]
    idle = [p for p in (*model.pairs, *model.gpu_nic) if "max speed" in (p.limiter or "")]
    assert idle and all("Gen5" in p.limiter for p in idle)


# --- downtrained switch uplinks; every GPU capped at the same lower generation --------------------------


def _uplink(snapshot, **link):
    usp = "0000:01:00.0"
    dev = snapshot.pci[usp]
    pci = {**snapshot.pci, usp: dataclasses.replace(dev, link=dataclasses.replace(dev.link, **link))}
    return dataclasses.replace(snapshot, pci=pci)


def test_switch_uplink_trained_x4_is_found():
    (finding,) = run_rule("pcie-width-reduced", _uplink(base(), width=4)).findings
    assert "uplink" in finding.message and "x4 of x16" in finding.message
    assert "GPU0" in finding.message and "mlx5_0" in finding.message


def test_switch_uplink_trained_gen3_is_found():
    findings = run_rule("pcie-speed-reduced", _uplink(base(), speed_gts=8.0)).findings
    assert [f.subject for f in findings] == ["0000:01:00.0 (switch uplink)"]


def test_every_gpu_capped_at_the_same_lower_gen_is_found():
    snapshot = base()
    gpus = {g.pci_address for g in snapshot.gpus}
    gen4 = PciLink(speed_gts=16.0, width=16, max_speed_gts=32.0, max_width=16)
    pci = {a: dataclasses.replace(d, link=gen4) if a in gpus or any(
        a == snapshot.pci[g].parent for g in gpus) else d for a, d in snapshot.pci.items()}
    findings = run_rule("pcie-speed-reduced", dataclasses.replace(snapshot, pci=pci)).findings
    assert len(findings) == len(gpus) and all("every GPU" in f.message for f in findings)


# --- Mermaid output parses: quoted title, escaped edge labels ------------------------------------------

EDGE = re.compile(r'^\s+n_\w+ (---|===|-\.-)(\|"[^"()\[\]{}|]*"\|)? n_\w+$')


def test_mermaid_quotes_the_title_and_escapes_edge_labels():
    text = render_mermaid(derive(example("dgx-a100-degraded-gpu-x8")).graph, "dgx: A100 (x8 GPU)")
    front = text.split("---\n")[1]
    assert front == 'title: "dgx: A100 (x8 GPU)"\n'
    edges = [line for line in text.splitlines() if re.match(r"^\s+n_\w+ (---|===|-\.-)", line)]
    assert edges and all(EDGE.match(line) for line in edges), [e for e in edges if not EDGE.match(e)][:3]
    assert any("#40;" in line for line in edges)  # a label with parentheses was escaped


# --- the smaller ones ------------------------------------------------------------------------------------


def test_pcie5_figures_are_not_quoted_on_a_gen4_machine():
    text = " ".join(f.message for f in run_rule("gpu-p2p-via-cpu", example("8xgpu-2s-rootports")).findings)
    assert "PHB" in text or "NODE" in text
    assert "PCIe 5.0" not in text


def test_rails_shared_says_how_gpus_spread_over_rails():
    snapshot = base()
    extra = dataclasses.replace(snapshot.gpus[0], index=4, pci_address=None)
    snapshot = dataclasses.replace(snapshot, gpus=(*snapshot.gpus, extra), nics=snapshot.nics[:3])
    (finding,) = run_rule("rails-shared", snapshot).findings
    assert re.search(r"\d\.\d{3}", finding.message) is None
    assert "some rails serve 2 GPUs, others 1" in finding.message


def test_rail_mismatch_says_receives_for_a_receive_line(tmp_path):
    # the fire case's [send] lines turned into the [receive] lines NCCL prints on the other side
    # (transport/net.cc: "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s": peer -> self)
    text = (CASES / "rail-mismatch" / "fire.log").read_text()
    assert "1[1] -> 5[1] [send]" in text
    path = tmp_path / "receive.log"
    path.write_text(text.replace("1[1] -> 5[1] [send]", "5[1] -> 1[1] [receive]"))
    findings = run_rule("rail-mismatch", base(), analyze([str(path)])).findings
    assert findings and all(" receives over " in f.message for f in findings)


def test_lost_gpu_evidence_names_the_call_that_failed():
    (finding,) = run_rule("gpu-lost", case("gpu-lost", "fire")).findings
    assert finding.evidence[0].where == "nvmlDeviceGetName(2)"


def test_shape_is_not_all_to_all_with_a_gpu_off_the_fabric():
    shape = derive(case("nvswitch-fabric-incomplete", "fire")).shape
    assert "all-to-all" not in shape.name and "GPU3" in shape.name


def test_partial_cpuset_overlap_is_one_grouped_finding():
    partial = case("cpuset-excludes-gpu-cpus", "fire-partial")
    (finding,) = run_rule("cpuset-excludes-gpu-cpus", partial).findings
    assert finding.subject == "GPU0, GPU1, GPU2, GPU3" and "some of the local CPUs" in finding.message
    findings = run_rule("cpuset-excludes-gpu-cpus", case("cpuset-excludes-gpu-cpus", "fire")).findings
    assert sorted(f.subject for f in findings) == ["GPU0, GPU1", "GPU2, GPU3"]  # partial, none


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_color_is_honoured(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(_Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(_Tty())


def test_examples_say_which_recordings_are_synthetic():
    out = run_cli("examples").stdout
    kinds = dict(re.findall(r"^(\S+)\s+(synthetic|real)\s", out, flags=re.M))
    assert kinds["vm-1s-virtio-nogpu"] == "real" and kinds["dgx-a100"] == "synthetic"
    readme = (ROOT / "README.md").read_text()
    assert "real and published machine shapes" not in readme and "synthetic" in readme


def test_diagnose_reports_a_recorded_matrix_that_disagrees():
    (finding,) = run_rule("smi-matrix-disagrees", case("smi-matrix-disagrees", "fire")).findings
    assert "GPU0/GPU1" in finding.subject and "nvidia-smi PHB" in finding.message
    assert run_rule("smi-matrix-disagrees", case("smi-matrix-disagrees", "clean")).findings == ()

