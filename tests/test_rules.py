"""The rule engine, the registry, the rule docs, and every rule on its firing and clean fixture.

A rule case is ``fixtures/rules/<rule-id>/{fire,clean}.{json,log}``: a snapshot (sparse model JSON),
an NCCL log, or both; a rule that needs a snapshot and has only a log case reads ``base.json``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc import catalogue, codec, model
from topodoc.facts import nccl_tests_input
from topodoc.parsers import kernel_log
from topodoc.parsers.nccl_log import analyze
from topodoc.rules import registry
from topodoc.rules.engine import (
    DOC_HEADINGS,
    Evidence,
    Facts,
    Hit,
    MissingFacts,
    Severity,
    at_or_above,
    evaluate,
    rule,
)
from topodoc.rules.gpudirect import ACS_BITS, acs_off_commands
from topodoc.text.inputs import FACT_KINDS, PARSERS, parse_text

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "rules"
RULE_IDS = [r.id for r in registry.RULES]


def load_case(rule_id: str, case: str) -> Facts:
    folder = CASES / rule_id
    item = registry.get(rule_id)
    snap_file = folder / f"{case}.json"
    if not snap_file.exists() and "snapshot" in item.needs:
        snap_file = CASES / "base.json"
    snapshot = codec.load(snap_file.read_text()) if snap_file.exists() else None
    log_file = folder / f"{case}.log"
    logs = analyze([str(log_file)], catalogue.scan_literals()) if log_file.exists() else None
    tests_file = folder / f"{case}.txt"
    runs = None
    if tests_file.exists():
        runs = nccl_tests_input(str(tests_file), tests_file.read_text(), snapshot)
    dmesg_file = folder / f"{case}.dmesg"  # a kernel log (dmesg / journalctl -k)
    kernel = None
    if dmesg_file.exists():
        kernel = tuple((str(dmesg_file), e) for e in kernel_log.parse(dmesg_file.read_text()))
    paste_file = folder / f"{case}.paste"  # a text diagnose FILE... reads (textinputs.FACT_KINDS)
    texts = None
    if paste_file.exists():  # read as diagnose FILE... does: every kind found, an NCCL log analyzed
        item = parse_text(str(paste_file), paste_file.read_text())
        found = [(item.kind, item.parsed)]
        found += [(k, PARSERS[k](item.text)) for k in item.also if k in FACT_KINDS]
        texts = tuple((item.path, k, p) for k, p in found if k in FACT_KINDS and p is not None)
        assert texts, (paste_file, item.kind, item.error)
        if logs is None and "nccl-log" in (item.kind, *item.also):
            logs = analyze([str(paste_file)], catalogue.scan_literals())
    return Facts(snapshot=snapshot, logs=logs, nccl_tests=runs, kernel=kernel, texts=texts)


def cases(kind: str) -> list[tuple[str, str]]:
    """(rule id, case name) for every ``<kind>*.json|log`` under fixtures/rules/<rule-id>/."""
    found = {(rule_id, p.stem) for rule_id in RULE_IDS for p in (CASES / rule_id).glob(f"{kind}*.*")}
    return sorted(found)


@pytest.mark.parametrize(("rule_id", "case"), cases("fire"))
def test_rule_fires_on_its_fire_case(rule_id, case):
    report = evaluate(load_case(rule_id, case), [registry.get(rule_id)])
    assert not report.errors and not report.skipped
    assert report.findings, f"{rule_id} did not fire on its fire case"
    for finding in report.findings:
        assert finding.rule == rule_id and finding.message and finding.subject
        assert finding.evidence, f"{rule_id} finding without evidence"
        assert finding.fix


@pytest.mark.parametrize(("rule_id", "case"), cases("clean"))
def test_rule_is_quiet_on_its_clean_case(rule_id, case):
    report = evaluate(load_case(rule_id, case), [registry.get(rule_id)])
    assert not report.errors and not report.skipped
    assert [f.message for f in report.findings] == []


def test_every_rule_has_cases_and_every_case_dir_a_rule():
    dirs = {p.name for p in CASES.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert dirs == set(RULE_IDS)
    for rule_id in RULE_IDS:
        names = {p.stem for p in (CASES / rule_id).iterdir()}
        assert {"fire", "clean"} <= names, rule_id


def test_healthy_base_machine_has_no_hardware_finding():
    snapshot = codec.load((CASES / "base.json").read_text())
    assert evaluate(Facts(snapshot=snapshot), registry.RULES).findings == ()


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_rule_has_a_doc_with_the_fixed_headings(rule_id):
    item = registry.get(rule_id)
    text = item.doc_path.read_text(encoding="utf-8")
    assert text.startswith(f"# {rule_id}: ")
    positions = [text.find(h) for h in DOC_HEADINGS]
    assert all(p > 0 for p in positions) and positions == sorted(positions), rule_id
    sections = re.split(r"^## .*$", text, flags=re.M)[1:]
    assert all(len(s.strip()) > 40 for s in sections), f"{rule_id} has an empty section"


def test_ids_are_unique_stable_kebab_case_and_rules_complete():
    assert len(RULE_IDS) == len(set(RULE_IDS))
    for item in registry.RULES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", item.id), item.id
        assert item.title and item.fix and item.tags and item.needs
    docs = {p.stem for p in (ROOT / "topodoc" / "rules" / "docs").glob("*.md")}
    assert docs == set(RULE_IDS)


def test_rules_never_import_the_probe():
    for path in (ROOT / "topodoc" / "rules").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.startswith("topodoc.probe") for n in names), f"{path.name} imports {names}"


def test_rules_import_no_parser():
    for path in (ROOT / "topodoc" / "rules").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad = [n for n in names if n.startswith("topodoc.parsers")]
            assert not bad, f"{path.name} imports {bad}"


def test_every_rule_is_declared_one_way_with_needs_from_its_parameters():
    sources = "".join(p.read_text() for p in (ROOT / "topodoc" / "rules").glob("*.py"))
    assert not re.search(r"\b(snapshot_rule|log_rule|joined_rule|declare)\(", sources)
    assert "needs=" not in sources
    for item in registry.RULES:
        assert set(item.needs) <= {"snapshot", "topology", "logs", "nccl_tests", "kernel", "texts"}, item.id
    with pytest.raises(ValueError, match="parameters must name facts"):
        rule("test-bad", "info", ("t",), title="t", fix="f")(lambda facts: ())


def test_unknown_rule_id_suggests_close_ones():
    with pytest.raises(registry.UnknownRule, match="nvlink-link-down"):
        registry.get("nvlink-down")


# --- the engine itself -------------------------------------------------------------------------------


@rule("test-boom", "error", ("t",), title="t", fix="f")
def _boom(snapshot):
    raise KeyError("gpu 9")


@rule("test-gap", "error", ("t",), title="t", fix="f")
def _gap(snapshot):
    raise MissingFacts("ACS not readable")


@rule("test-two", "info", ("t",), title="t", fix="default fix")
def _two(snapshot):
    yield Hit("GPU0", "minor", (Evidence("nvml", "x", "1"),), confidence=0.5)
    yield Hit("GPU1", "major", (Evidence("nvml", "x", "2"),), severity=Severity.CRITICAL, fix="own fix")


@rule("test-logs", "warning", ("t",), title="t", fix="f")
def _needs_logs(logs):
    yield Hit("job", "never", ())


def test_engine_isolates_crashes_skips_and_sorts_worst_first():
    report = evaluate(Facts(snapshot=model.Snapshot()), [_boom, _gap, _two, _needs_logs])
    assert [(e.rule, e.error) for e in report.errors] == [("test-boom", "KeyError: 'gpu 9'")]
    assert {s.rule: s.reason for s in report.skipped} == {
        "test-gap": "ACS not readable",
        "test-logs": "needs an NCCL log (--log FILE)",
    }
    assert [(f.subject, f.severity, f.fix) for f in report.findings] == [
        ("GPU1", Severity.CRITICAL, "own fix"),
        ("GPU0", Severity.INFO, "default fix"),
    ]
    assert report.rules_run == 4
    assert [f.subject for f in at_or_above(report, Severity.ERROR)] == ["GPU1"]


def test_rule_declaration_rejects_unknown_needs():
    with pytest.raises(ValueError, match="parameters must name facts"):
        rule("x-y", "info", (), title="t", fix="f")(lambda gpus: ())


def test_finding_json_has_the_documented_keys():
    report = evaluate(load_case("pcie-width-reduced", "fire"), [registry.get("pcie-width-reduced")])
    data = codec.to_data(report)
    assert set(data) >= {"findings", "skipped", "errors"}
    assert set(data["findings"][0]) >= {
        "rule",
        "severity",
        "confidence",
        "subject",
        "message",
        "evidence",
        "fix",
    }
    assert data["findings"][0]["severity"] == "error"
    assert data["findings"][0]["evidence"][0]["where"].endswith("0000:05:00.0/current_link_width")


# --- severity adjustments and robustness -------------------------------------------------------------


def test_vm_turns_gpu_nic_distance_and_acs_into_information():
    far = evaluate(load_case("gpu-nic-far", "fire-vm"), [registry.get("gpu-nic-far")]).findings
    assert [(f.severity, f.confidence) for f in far] == [(Severity.INFO, 0.6)]
    assert "NCCL_TOPO_FILE" in far[0].fix
    snap = load_case("acs-on-p2p-path", "fire").snapshot
    vm = dataclasses.replace(snap, host=dataclasses.replace(snap.host, virtualized=True))
    acs = evaluate(Facts(snapshot=vm), [registry.get("acs-on-p2p-path")]).findings
    assert [f.severity for f in acs] == [Severity.INFO] and "ATS" in acs[0].message


def test_acs_fix_names_each_bridge():
    (finding,) = evaluate(load_case("acs-on-p2p-path", "fire"), [registry.get("acs-on-p2p-path")]).findings
    assert finding.subject == "0000:02:01.0"
    assert "sudo setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000:000c" in finding.fix
    assert finding.fix.startswith("on the machine recorded in rules-case ")  # the case's snapshot source
    assert "ReqRedir+ CmpltRedir+" in finding.evidence[0].value


def test_acs_fix_clears_only_the_redirect_bits_and_names_a_recorded_machine():
    """setpci's ``value:mask``: only ReqRedir (bit 2) and CmpltRedir (bit 3) change; a recording's
    addresses are the recorded machine's."""
    live = acs_off_commands(["0000:02:01.0"])
    value, mask = (int(part, 16) for part in live.split("ECAP_ACS+0x6.w=")[1].split(":"))
    assert (value, mask) == (0, 0b1100) and [ACS_BITS[i] for i in range(7) if mask >> i & 1] == [
        "ReqRedir", "CmpltRedir"]
    recorded = acs_off_commands(["0000:02:01.0"], "node7.tar.gz")
    assert recorded.startswith("on the machine recorded in node7.tar.gz (the PCI addresses are that machine")
    assert recorded.endswith(live)


BASE = codec.load((CASES / "base.json").read_text())
_unknown = st.none()


@st.composite
def damaged_snapshots(draw):
    """The base machine with values a probe may fail to read (None), or odd ones (-1, 0, DOWN, ...)."""
    pci = dict(BASE.pci)
    for address in draw(st.lists(st.sampled_from(sorted(pci)), max_size=6)):
        link = model.PciLink(**{
            name: draw(st.one_of(_unknown, st.sampled_from([0, 2.5, 8.0, 16.0, 32.0])))
            for name in ("speed_gts", "width", "max_speed_gts", "max_width")
        })
        pci[address] = dataclasses.replace(
            pci[address],
            link=link,
            numa_node=draw(st.sampled_from([None, -1, 0, 1])),
            acs_ctrl=draw(st.one_of(_unknown, st.integers(0, 0x7F))),
            parent=draw(st.sampled_from([pci[address].parent, None, "0000:ff:1f.7"])),
        )
    gpus = tuple(
        dataclasses.replace(
            g,
            nvlinks=g.nvlinks[: draw(st.integers(0, 18))],
            lost=draw(st.booleans()),
            pcie_max_gen=draw(st.one_of(_unknown, st.integers(1, 5))),
        )
        for g in BASE.gpus
    )
    nics = tuple(
        dataclasses.replace(
            n,
            ports=tuple(
                dataclasses.replace(
                    p,
                    state=draw(st.sampled_from([None, "DOWN", "ACTIVE"])),
                    rate_gbps=draw(st.one_of(_unknown, st.just(200.0))),
                )
                for p in n.ports
            ),
        )
        for n in BASE.nics
    )
    return dataclasses.replace(
        BASE, pci=pci, gpus=gpus, nics=nics, process_cpuset=draw(st.sampled_from([None, "", "0-3", "0-63"]))
    )


@settings(max_examples=60, deadline=None)
@given(damaged_snapshots())
def test_no_rule_crashes_on_partial_or_odd_snapshots(snapshot):
    report = evaluate(Facts(snapshot=snapshot), registry.RULES)
    assert report.errors == ()


# --- fixes found in review ---------------------------------------------------------------------------


def test_rail_mismatch_leaves_out_pxn_connections(tmp_path):
    """``via NET/IB/3(3)`` is PXN: the data crosses NVLink to rank 3's GPU and leaves through its NIC."""
    fire = (CASES / "rail-mismatch" / "fire.log").read_text()
    pxn_log = tmp_path / "pxn.log"
    pxn_log.write_text(fire.replace("via NET/IB/3/GDRDMA", "via NET/IB/3(3)/GDRDMA"))
    facts = load_case("rail-mismatch", "fire")
    pxn = dataclasses.replace(facts, logs=analyze([str(pxn_log)]))
    assert {c.proxy_rank for c in pxn.logs.connections if c.transport.startswith("NET")} == {3}
    check = [registry.get("rail-mismatch")]
    assert [f.subject for f in evaluate(facts, check).findings] == ["rank 1 (GPU1)"]
    assert evaluate(pxn, check).findings == ()


def test_fabric_registration_completed_with_an_error_status_is_reported():
    snapshot = load_case("nvswitch-fabric-incomplete", "clean").snapshot
    check = [registry.get("nvswitch-fabric-incomplete")]

    def with_fabric(status):
        fabric = model.GpuFabric(state="completed", status=status)
        gpus = (dataclasses.replace(snapshot.gpus[0], fabric=fabric), *snapshot.gpus[1:])
        return evaluate(Facts(snapshot=dataclasses.replace(snapshot, gpus=gpus)), check).findings

    assert with_fabric(0) == () and with_fabric(None) == ()
    (finding,) = with_fabric(29)  # NVML_ERROR_INVALID_STATE
    assert finding.subject.startswith("GPU0") and finding.severity == Severity.ERROR
    assert "error status 29" in finding.message
    assert [e.where for e in finding.evidence][-1].endswith(".status") and finding.evidence[-1].value == "29"


# --- rule logic found weak in expert review ----------------------------------------------------------


def findings(rule_id: str, facts: Facts):
    return evaluate(facts, [registry.get(rule_id)]).findings


def test_spare_port_of_a_dual_port_nic_is_a_warning_and_a_dead_adapter_an_error():
    (spare,) = findings("ib-port-down", load_case("ib-port-down", "fire-dual-port-spare"))
    assert (spare.subject, spare.severity) == ("mlx5_5 port 1", Severity.WARNING)
    assert "mlx5_4 port 1 on the same adapter is ACTIVE" in spare.message and "Socket" not in spare.message
    assert [(e.where, e.value) for e in spare.evidence][-1] == (
        "/sys/class/infiniband/mlx5_4/ports/1/state",
        "ACTIVE",
    )
    both = findings("ib-port-down", load_case("ib-port-down", "fire-dual-port-both-down"))
    assert [f.subject for f in both] == ["mlx5_4 port 1", "mlx5_5 port 1"]
    assert all("no other port of this adapter is ACTIVE" in f.message for f in both)
    (rail,) = findings("ib-port-down", load_case("ib-port-down", "fire"))
    assert (rail.subject, rail.severity) == ("mlx5_2 port 1", Severity.ERROR)


def test_numa_mismatch_message_says_what_the_gpus_own_node_offers():
    (shared,) = findings("gpu-nic-numa-mismatch", load_case("gpu-nic-numa-mismatch", "fire-unbalanced"))
    assert shared.subject == "GPU1->mlx5_1"
    assert "GPU1 on node 0 gets mlx5_1 on node 1 (SYS)" in shared.message
    assert "mlx5_0 (paired with GPU0)" in shared.message and "no RDMA NIC" not in shared.message
    snapshot = BASE
    lonely = dataclasses.replace(snapshot, nics=snapshot.nics[:2])  # both NICs on socket 0
    (none,) = findings("gpu-nic-numa-mismatch", Facts(snapshot=lonely))
    # both NICs tie at SYS for GPU2 and GPU3: NCCL's ncclTopoGetLocalNet gives CUDA device 2 the first and
    # device 3 the second (topodoc.topology.rails.nccl_pick), the rail pairs follow it
    assert none.subject == "GPU2->mlx5_0, GPU3->mlx5_1"
    assert "node 1 has no RDMA NIC at all" in none.message


def _bridged(snapshot, compute_capability, version, links):
    """The bridge-pair case with each bond reset to ``links`` NVLinks of NVML ``version``."""
    gpus = tuple(
        dataclasses.replace(
            g,
            compute_capability=compute_capability,
            nvlinks=tuple(
                dataclasses.replace(g.nvlinks[0], link=n, version=version) for n in range(links)
            ),
        )
        for g in snapshot.gpus
    )
    return Facts(snapshot=dataclasses.replace(snapshot, gpus=gpus))


def test_bridge_bandwidth_follows_link_count_and_nvlink_generation():
    fire = load_case("nvlink-bridge-pairs-only", "fire").snapshot
    (h100,) = findings("nvlink-bridge-pairs-only", Facts(snapshot=fire))
    assert "the bridge's 75 GB/s per direction (3x NVLink4)" in h100.message
    assert h100.evidence[-1].where == "nvmlDeviceGetNvLinkVersion(0, 0)" and h100.evidence[-1].value == "6"
    (by_version,) = findings("nvlink-bridge-pairs-only", _bridged(fire, None, 5, 12))  # NVML 5 = NVLink 3.1
    assert "300 GB/s per direction (12x NVLink3)" in by_version.message
    (ga10x,) = findings("nvlink-bridge-pairs-only", _bridged(fire, "8.6", 5, 4))
    assert "56.25 GB/s per direction" in ga10x.message


def test_aer_evidence_quotes_the_kernels_counter_lines():
    (finding,) = findings("pcie-aer-errors", load_case("pcie-aer-errors", "fire"))
    assert [(e.where.rsplit("/", 1)[1], e.value) for e in finding.evidence] == [
        ("aer_dev_correctable", "TOTAL_ERR_COR 14"),
        ("aer_dev_fatal", "TOTAL_ERR_FATAL 0"),
        ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 2"),
    ]


def test_gdr_unused_cites_peermem_or_what_proved_dmabuf():
    facts = load_case("gdr-unused-but-possible", "fire")
    (peermem,) = findings("gdr-unused-but-possible", facts)
    assert peermem.evidence[-1] == Evidence("sysfs", "/sys/module/nvidia_peermem/version", "550.54.15")
    kernel = dataclasses.replace(facts.snapshot.kernel, peermem_module=None, peermem_version=None)
    dmabuf = dataclasses.replace(facts, snapshot=dataclasses.replace(facts.snapshot, kernel=kernel))
    (finding,) = findings("gdr-unused-but-possible", dmabuf)
    cited = {e.where: e.value for e in finding.evidence if e.source != "log"}
    assert cited == {
        "/proc/sys/kernel/osrelease": "5.15.0-105-generic",
        "/proc/driver/nvidia/version": "Open Kernel Module 550.54.15",
    }
    assert "DMA-BUF is available" in finding.message


def test_cpuset_finding_says_whose_cpuset_and_trusts_a_recording_less():
    facts = load_case("cpuset-excludes-gpu-cpus", "fire")
    recorded = findings("cpuset-excludes-gpu-cpus", facts)
    assert {f.confidence for f in recorded} == {0.5}
    assert "the recording does not say whether that process ran inside a job" in recorded[0].message
    live = Facts(snapshot=dataclasses.replace(facts.snapshot, source="live"))
    now = findings("cpuset-excludes-gpu-cpus", live)
    assert {f.confidence for f in now} == {1.0} and [f.subject for f in now] == [f.subject for f in recorded]
    assert "topodoc's own cpuset" in now[0].message
    assert "inside the job's cgroup or container" in now[0].message


def test_gdr_prereq_leaves_efa_to_the_log_rules():
    efa = load_case("gdr-prereq-missing", "clean-efa").snapshot
    assert {n.kind for n in efa.nics} == {"efa"} and not findings("gdr-prereq-missing", Facts(snapshot=efa))
    as_ib = dataclasses.replace(efa, nics=tuple(dataclasses.replace(n, kind="ib") for n in efa.nics))
    assert [f.severity for f in findings("gdr-prereq-missing", Facts(snapshot=as_ib))] == [Severity.ERROR]
    assert "EFA" in registry.get("gdr-prereq-missing").doc_path.read_text()


@pytest.mark.parametrize(
    ("log", "line", "detail"),
    [
        ("ofi-init-failed-socket-fallback-p4d.log", 10, "failed to initialize:"),
        ("efa-devices-hidden-in-container-2-27.log", 7, "(OFI fi_getinfo() call failed: No data available)"),
    ],
)
def test_socket_fallback_names_the_net_plugin_nccl_passed_over(log, line, detail):
    path = ROOT / "fixtures" / "logs" / log
    (finding,) = findings("nccl-socket-fallback", Facts(logs=analyze([str(path)])))
    assert (finding.severity, finding.confidence) == (Severity.ERROR, 1.0)
    assert "the net plugin aws-ofi-nccl" in finding.message and detail in finding.message
    assert f"{path}:{line}" in [e.where for e in finding.evidence]
    assert finding.evidence[-1].value.endswith("via NET/Socket/0")
    assert finding.fix.startswith("make aws-ofi-nccl usable")


def test_socket_fallback_without_a_passed_over_plugin_keeps_the_ethernet_only_reading():
    (finding,) = findings("nccl-socket-fallback", load_case("nccl-socket-fallback", "fire-ethernet-only"))
    assert (finding.severity, finding.confidence) == (Severity.INFO, 0.5)


def _host_facts(name: str, log: str | None = None) -> Facts:
    from topodoc.probe.source import load_snapshot
    from topodoc.topology import derive

    snapshot = load_snapshot(f"example:{name}")
    logs = analyze([f"fixtures/logs/{log}"]) if log else None
    return Facts(snapshot=snapshot, topology=derive(snapshot), logs=logs)


def test_pairs_nccl_relays_over_nvlink_are_not_reported_as_pcie_p2p():
    # DGX-1: GPU0-GPU5 has no direct NVLink, but GPU1 (or GPU4) relays it over NVLink (NCCL's NVB)
    assert not findings("gpu-p2p-via-cpu", _host_facts("dgx1-v100-hybrid-cube-mesh"))
    assert findings("gpu-p2p-via-cpu", _host_facts("8xgpu-2s-pcie-switches"))


def test_asymmetric_gdr_is_left_to_its_own_rule():
    facts = _host_facts("dgx-a100", "asymmetric-gdr-peermem.log")
    assert not findings("gdr-unused-but-possible", facts)
    assert findings("nccl-gdr-asymmetric", facts)


def test_far_rail_nic_names_the_nearer_nic_another_gpu_already_uses():
    (hit,) = findings("gpu-nic-far", _host_facts("dgx-a100-degraded-nic-other-socket"))
    assert "own rail NIC only through SYS" in hit.message
    assert "mlx5_1 within PXB, shared with GPU1" in hit.message
