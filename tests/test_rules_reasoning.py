"""The reasoning families of issue 26 on their real cases: the interface choice weighed by the node count,
P2P blocked on a PCIe node named only with its evidence, and a hang inside one node read from the log."""

from __future__ import annotations

from pathlib import Path

from test_rules import load_case

from topodoc import catalogue
from topodoc.logmodel import Connection, Evidence, Inference, LogAnalysis, LogSummary
from topodoc.parsers.nccl_log import analyze
from topodoc.rules import registry
from topodoc.rules.engine import Facts, Severity, evaluate

ROOT = Path(__file__).resolve().parent.parent


def _findings(rule_id: str, facts: Facts):
    report = evaluate(facts, [registry.get(rule_id)])
    assert not report.errors and not report.skipped
    return report.findings


def test_interface_choice_is_an_error_only_across_nodes():
    rule = "nccl-socket-interface"
    across = _findings(rule, load_case(rule, "fire"))
    assert {f.severity for f in across} == {Severity.ERROR}  # two hosts proven
    assert any("lo (loopback) for bootstrap" in f.message for f in across)
    (unknown,) = _findings(rule, load_case(rule, "fire-node-count-unknown"))
    assert unknown.severity == Severity.WARNING and "1. the job's node count" in unknown.message
    (unused,) = _findings(rule, load_case(rule, "fire-unused-socket-list"))
    assert unused.severity == Severity.INFO and "network is IB" in unused.message


def test_an_interface_line_is_reported_by_its_rule_alone():
    log = ROOT / "fixtures/logs/real/veth-linklocal-socket-list.log"
    facts = Facts(logs=analyze([str(log)], catalogue.scan_literals()))
    assert not _findings("nccl-remote-error", facts)
    assert len(_findings("nccl-socket-interface", facts)) == 1


def test_p2p_cause_is_named_only_with_evidence_on_the_gpus():
    (named,) = _findings("p2p-blocked-pcie", load_case("p2p-blocked-pcie", "fire-dmar-on-gpu"))
    assert named.severity == Severity.ERROR and "IOMMU fault" in named.message
    assert any(e.source == "kernel-log" for e in named.evidence)
    (other,) = _findings("p2p-blocked-pcie", load_case("p2p-blocked-pcie", "fire-dmar-on-other-device"))
    assert other.severity == Severity.WARNING and "IOMMU fault" not in other.message
    assert "1. `sudo lspci -vvv | grep -i acsctl`" in other.message and "A800 80GB PCIe" in other.message


def test_a_hang_inside_one_node_with_p2p_connections_is_read_from_the_log():
    ev = Evidence("x.log", 7, "node-a:1:1 [0] NCCL INFO Channel 00 : 0[4f000] -> 1[52000] via P2P/IPC")
    hang = Inference(kind="hang", statement="the log looks like a hang", evidence=(ev,))
    conn = Connection(rank=0, peer=1, transport="P2P/IPC", direction=None, host="node-a", evidence=ev)
    logs = LogAnalysis(summary=LogSummary(), connections=(conn,), inferences=(hang,))
    (finding,) = _findings("p2p-blocked-pcie", Facts(logs=logs))
    assert "hangs inside one node" in finding.message and "nvidia-smi topo -m" in finding.message
    net = Connection(rank=0, peer=2, transport="NET/IB", direction="send", host="node-a", evidence=ev)
    assert not _findings("p2p-blocked-pcie", Facts(logs=LogAnalysis(
        summary=LogSummary(), connections=(conn, net), inferences=(hang,))))  # it may be the network


def _plugin_findings(name: str):
    log = ROOT / "fixtures/logs/real" / name
    facts = Facts(logs=analyze([str(log)], catalogue.scan_literals()))
    return _findings("nccl-net-plugin-failed", facts) + _findings("nccl-no-net-device", facts), facts


def test_a_plugin_failure_claims_the_fallback_only_when_the_log_shows_it():
    # found and failed, and no line says which network NCCL used next (aws/aws-ofi-nccl#1020)
    unknown, facts = _plugin_findings("efa-fi-getinfo-no-devices-2-27.log")
    assert unknown and all("not in this log" in f.message for f in unknown)
    assert not _findings("nccl-socket-fallback", facts)  # no fallback claimed without its line
    # the same kind of failure where NCCL went on with another network: no fallback to sockets
    (other,), _facts = _plugin_findings("ofi-standalone-test-couldnt-open-av.log")
    assert "went on with EFA" in other.message and "no fallback to sockets" in other.message
    # and where the log shows the socket network
    shown, facts = _plugin_findings("shm-extend-same-hostname-2-18.log")
    assert shown and all("The log shows the fallback: NCCL's network is Socket" in f.message for f in shown)


def test_no_multi_host_log_of_the_corpus_is_said_to_bootstrap_over_two_networks():
    """Every multi-host log of the corpus bootstraps inside one private block (different /24s, different
    interface names): none gets nccl-socket-networks-differ; its fire case is the one that does."""
    logs = sorted((ROOT / "fixtures/logs").rglob("*.log"))
    rule = [registry.get("nccl-socket-networks-differ")]
    literals = catalogue.scan_literals()
    hit = [p.name for p in logs if evaluate(Facts(logs=analyze([str(p)], literals)), rule).findings]
    assert hit == []
    (finding,) = _findings("nccl-socket-networks-differ", load_case("nccl-socket-networks-differ", "fire"))
    assert "192.168.0.0/16" in finding.message and "10.0.0.0/8" in finding.message
