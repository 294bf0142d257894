"""Log error findings: one finding per error, not per repeated line; consequences folded into causes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze
from topodoc.parsers.nccl_log.errors import completion_status, lookup
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "logs"


def findings(rule_id: str, path: Path) -> list:
    report = evaluate(Facts(logs=analyze([str(path)], catalogue.scan_literals())), [registry.get(rule_id)])
    assert not report.errors
    return list(report.findings)


def test_flush_after_local_protection_error_is_folded_into_it_with_the_acs_fix():
    path = LOGS / "ib-local-protection-acs.log"
    (finding,) = findings("nccl-ib-completion-error", path)
    assert "LOC_PROT_ERR (4)" in finding.message and "a consequence of this error" in finding.message
    # the WARN, the flushed request it caused, then the return-code chain NCCL printed with the WARN
    assert [e.where for e in finding.evidence] == [f"{path}:11", f"{path}:14", f"{path}:12"]
    assert "ACS" in finding.fix and "nvidia_peermem" in finding.fix


def test_retry_exceeded_then_flush_is_one_finding_with_the_link_fix():
    (finding,) = findings("nccl-ib-completion-error", LOGS / "ibext-roce-completion-12-then-5.log")
    assert "RETRY_EXC_ERR (12)" in finding.message and "WR_FLUSH_ERR" in finding.message
    assert "port error counters" in finding.fix


def test_flush_errors_alone_are_reported_and_point_at_the_first_failure(tmp_path):
    lines = (LOGS / "ib-local-protection-acs.log").read_text().splitlines()
    log = tmp_path / "flush_only.log"
    log.write_text("\n".join(line for line in lines if "with error 4" not in line) + "\n")
    (finding,) = findings("nccl-ib-completion-error", log)
    assert "WR_FLUSH_ERR (5)" in finding.message and "only follows an earlier failure" in finding.fix


def _with_version(tmp_path: Path, version: str) -> Path:
    text = (LOGS / "roce-retry-exceeded-mpirun.log").read_text().replace("2.19.3", version)
    path = tmp_path / "roce.log"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("version", "says"), [("2.19.3", "check with show_gids"), ("2.21.5", "unset it")])
def test_retry_exceeded_on_roce_with_a_forced_gid_index_says_what_to_check_by_version(
    tmp_path, version, says
):
    (finding,) = findings("nccl-ib-completion-error", _with_version(tmp_path, version))
    assert "NCCL_IB_GID_INDEX=3" in finding.message and says in finding.message


def test_gid_note_needs_roce(tmp_path):
    (finding,) = findings("nccl-ib-completion-error", LOGS / "ib-loc-prot-err4-vendor81.log")
    assert "NCCL_IB_GID_INDEX" not in finding.message  # IB link layer, status 4: the GID is not the story


def test_repeated_plugin_warnings_of_one_process_are_one_finding():
    path = LOGS / "ofi-init-failed-socket-fallback-p4d.log"
    # the catalogue explains the endpoint failure on its own line, as a second, more specific finding
    generic, endpoint = findings("nccl-net-plugin-failed", path)
    assert "(4 times)" in generic.message and len(generic.evidence) == 3
    # the fallback is claimed from the line that shows it (the chosen network), not from the plugin's failure
    assert generic.message.endswith("The log shows the fallback: NCCL's network is Socket "
                                    f"({path}:24).")
    assert "creating an endpoint failed" in endpoint.message


@pytest.mark.parametrize(
    ("message", "category", "phrase"),
    [
        ("socketStartConnect: Connect to fe80::966d:ae03:a2:8cf0%ib1<17943> failed : Software caused "
         "connection abort", "socket_error", "link-local"),
        ("Connect to 10.38.99.112<21724> failed : Connection refused", "socket_error", "nothing listens"),
        ("Call to connect returned Connection refused, retrying", "socket_error", "nothing listens"),
        ("Call to ibv_reg_mr failed with error Cannot allocate memory", "system_error", "ulimit -l"),
        ("Call to ibv_modify_qp failed with 22 Invalid argument, local GID ::", "system_error", "GID index"),
        ("Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes", "system_error", "--shm-size"),
        ("Could not find real path of /sys/class/pci_bus/0000:07/../../0000:07:00.0", "system_error",
         "NCCL_TOPO_FILE"),
        ("unhandled system error (run with NCCL_DEBUG=INFO for details)", "system_error", "names the call"),
    ],
)
def test_each_failure_gets_its_own_explanation(message, category, phrase):
    verdict = lookup(message)  # the explanation, or the fix of the catalogue signature that matched
    assert verdict.category == category and phrase in verdict.explanation + (verdict.fix or "")


def test_completion_status_reads_every_format():
    assert completion_status("Got completion from peer 10.0.0.1<1> with error 12, opcode 0, len 0") == 12
    assert completion_status("Got completion from peer x with status=IBV_WC_RETRY_EXC_ERR(12) opcode=") == 12
    assert completion_status("Got completion from peer x with status=5 opcode=32656 len=1") == 5
    assert completion_status("socketProgress: Connection closed by remote peer") is None


def test_cli_diagnose_explains_a_link_local_bootstrap_failure():
    done = subprocess.run(
        [sys.executable, "-m", "topodoc", "diagnose", "--log",
         str(LOGS / "bootstrap-connect-abort-ipv6-linklocal.log")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "link-local" in done.stdout and "NCCL_SOCKET_IFNAME" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "lines"),
    [("pytorch-watchdog-timeout-torchrun.log", [25, 28]), ("pytorch-last-error-reset-by-peer.log", [4, 7])],
)
def test_pytorch_last_error_is_folded_into_the_error_line_it_explains(name, lines):
    path = LOGS / name
    (finding,) = findings("nccl-remote-error", path)
    assert [e.where for e in finding.evidence] == [f"{path}:{n}" for n in lines]
    # the reason PyTorch gave (a socket the peer closed or reset) explains the finding
    assert "A TCP socket between ranks failed" in finding.message or \
        "TCP connection (bootstrap or proxy) was closed by the other side" in finding.message
    assert "one failure, not two" in finding.message


def test_last_error_repeating_a_warn_is_folded_into_that_warn_with_its_chain():
    path = LOGS / "bootstrap-connect-abort-ipv6-linklocal.log"
    # the interface line itself (catalogue socket-iface-link-local) is nccl-socket-interface's, an error
    # because a connection to a link-local address failed on another process
    (link_local,) = findings("nccl-socket-interface", path)
    assert "socket-iface-link-local" in link_local.message and link_local.subject == "gpu-k07:12246"
    assert link_local.severity.value == "error" and f"{path}:11" in link_local.message
    (finding,) = findings("nccl-remote-error", path)
    assert finding.subject == "gpu-k07:12251"
    assert [e.where for e in finding.evidence] == [f"{path}:11", f"{path}:25", f"{path}:12"]
    assert finding.message.startswith("A rank could not connect to a peer's IPv6 link-local address")


def test_a_last_error_far_from_the_error_line_stays_its_own_finding(tmp_path):
    lines = (LOGS / "pytorch-last-error-reset-by-peer.log").read_text().splitlines()
    log = tmp_path / "apart.log"
    log.write_text("\n".join(lines[:5] + [f"step {n} loss 2.0" for n in range(6)] + lines[5:]) + "\n")
    assert len(findings("nccl-remote-error", log)) == 2
