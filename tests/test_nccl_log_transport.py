"""Transport naming and node-count edge cases taken from the real-log corpus (fixtures/logs/real): old NCCL
without a ``Using network`` line, RoCE proven by a GID, a single node's missing network device, and the
lines the analyzer does not read yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from topodoc import catalogue
from topodoc.parsers.nccl_log import analyze, analyze_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"

# NCCL 2.4.7, nv_peer_memory#56: the bootstrap's NET/Socket line, then the NET/IB device line; no
# "Using network" line
IB_2_4 = """\
node-a:11715:11984 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.11.1<0>
node-a:11715:11984 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).
node-a:11715:11984 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.11.1<0>
NCCL version 2.4.7+cuda10.0
node-b:11791:12057 [2] NCCL INFO NET/Socket : Using [0]ib0:10.0.11.2<0>
"""


def test_nccl_2_4_ib_device_line_names_the_transport():
    s = analyze_text(IB_2_4, "ib.log").summary
    assert (s.transport, s.net_plugin, s.nnodes, s.nnodes_min) == ("IB", "IB", None, 2)
    assert [ev.line for ev in s.evidence["transport"]] == [3]


def test_a_roce_device_line_without_using_network_is_roce():
    s = analyze_text(IB_2_4.replace("mlx5_0:1/IB", "mlx5_0:1/RoCE")).summary
    assert s.transport == "RoCE"


def test_a_plugin_of_its_own_leaves_the_old_device_line_undecided():
    """aws-ofi-nccl's own lines beside NET/IB: the plugin may have won; the IB line alone proves nothing."""
    text = IB_2_4 + "node-a:11715:11984 [0] NCCL INFO NET/OFI Selected Provider is efa\n"
    assert analyze_text(text).summary.transport is None


def test_sharp_device_line_is_ibext():
    s = analyze([str(REAL / "cuda-init-error-hpcx-pdsh.log")], catalogue.scan_literals()).summary
    assert s.transport == "IBext"


# NVIDIA/nccl#1710 (IPv4-mapped GIDs) and #1524 (MAC-derived link-local GIDs): only WARN lines, no device line
@pytest.mark.parametrize("case", ["roce-lav-cx7-ipv4-gids", "roce-lav-mtu-2-20-fe80-gids"])
def test_a_roce_only_gid_in_a_completion_error_proves_roce(case):
    s = analyze([str(REAL / f"{case}.log")], catalogue.scan_literals()).summary
    assert s.transport == "RoCE"
    assert all("Got completion" in ev.text for ev in s.evidence["transport"])


def test_an_ib_shaped_gid_proves_nothing():
    """An IB GID is the subnet prefix and the port GUID (no ff:fe in its middle): not RoCE, nor proven IB."""
    line = ("node-a:94639:94652 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            "10.0.1.2<57888> with status=5 opcode=1 len=0 vendor err 249 (Recv) "
            "localGid fe80::c42:a103:12:3456 remoteGidsfe80::c42:a103:12:3457\n")
    assert analyze_text(line).summary.transport is None
    mapped = line.replace("fe80::c42:a103:12:3456", "::ffff:10.0.1.23")
    assert analyze_text(mapped).summary.transport == "RoCE"


def test_a_missing_network_device_is_benign_on_a_proven_single_node():
    """NVIDIA/nccl#428: one process, 2 T4s, no libibverbs: nothing needed a network."""
    s = analyze([str(REAL / "t4-calico-tunl0-socket-2-8.log")], catalogue.scan_literals()).summary
    assert (s.nnodes, s.transport) == (1, "none")
    assert not s.errors
    assert any(e.signature == "ibverbs-open-failed" for e in s.benign)


def test_a_missing_network_device_stays_an_error_when_the_node_count_is_unknown():
    text = ("node-a:93569:93569 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
            "node-a:93569:93569 [0] NCCL INFO Using network Socket\n")
    s = analyze_text(text).summary
    assert [e.signature for e in s.errors] == ["ibverbs-open-failed"]


def test_aws_ofi_nccl_standalone_test_lines_are_read():
    """aws-ofi-nccl#22: the plugin's nccl_message_transfer test prints its own prefix, not NCCL's."""
    s = analyze([str(REAL / "ofi-standalone-test-couldnt-open-av.log")], catalogue.scan_literals()).summary
    assert s.transport == "EFA"


def test_nccl_2_4_nic_distance_line_names_the_network():
    """NVIDIA/nccl#268: NCCL 2.4 prints '<net> NIC distance' for the network it uses."""
    log = REAL / "socket-message-truncated-2-4-horovod-tf.log"
    assert analyze([str(log)], catalogue.scan_literals()).summary.transport == "Socket"


def test_a_completion_error_whose_peer_the_user_blanked_is_still_decoded():
    """NVIDIA/nccl#1052: 'Got completion from peer with error 4' (address removed by the reporter)."""
    s = analyze([str(REAL / "roce-completion-err4-2-18-nccl-tests.log")], catalogue.scan_literals()).summary
    (err,) = [e for e in s.errors if e.category == "ib_completion_error"]
    assert err.ib_status == 4 and err.signature == "ib-completion-other"
    assert s.transport == "RoCE"


def test_a_blanked_ipv4_mapped_gid_in_a_2_27_modify_qp_line_proves_roce():
    """NVIDIA/nccl#2013: 'local GID ::ffff:xxx.xx.xx.xx' (octets blanked by the reporter), pid blanked too."""
    log = REAL / "modify-qp-timeout-2-27-timestamp-redacted-pid.log"
    s = analyze([str(log)], catalogue.scan_literals()).summary
    assert s.transport == "RoCE" and [e.category for e in s.errors] == ["system_error"]


def test_a_mistyped_bootstrap_address_is_no_second_machine():
    """NVIDIA/nccl#333: one host printed '10.10.10..2' in one line and '10.10.10.2' in the next."""
    s = analyze([str(REAL / "opa-hfi1-verbs-2-5-device-line.log")], catalogue.scan_literals()).summary
    assert (s.nnodes_min, s.transport, s.nccl_version) == (1, "IB", "2.5.6")


def test_a_warn_from_the_tcpx_data_path_names_the_transport():
    """google/nccl-plugin-gpudirecttcpx#1: 'tcpxCommProgress ... rx ctrl timeout' WARNs, nothing else."""
    s = analyze([str(REAL / "tcpx-rx-ctrl-timeout-a3.log")], catalogue.scan_literals()).summary
    assert s.transport == "TCPX" and {e.signature for e in s.errors} == {"tcpx-ctrl-timeout"}


def test_hosts_come_from_every_prefixed_line():
    s = analyze([str(REAL / "ray-vllm-2-21-topology.log")], catalogue.scan_literals()).summary
    assert s.hosts == ("node-a",)
