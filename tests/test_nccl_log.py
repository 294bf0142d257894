"""Behaviour of the NCCL log analyzer on realistic snippets: traps, prefixes, streaming, evidence."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from topodoc.parsers.nccl_log import LogInputError, NoNcclLinesError, analyze, analyze_text
from topodoc.parsers.nccl_log import scan as nccl_log_scan
from topodoc.parsers.nccl_log.errors import classify

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
TWO_NODE_IB = """\
nodeA:100:100 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>
nodeA:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
nodeA:100:150 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>
nodeA:100:150 [0] NCCL INFO Using network IB
nodeB:200:200 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>
nodeB:200:250 [0] NCCL INFO Using network IB
nodeA:100:150 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1a000 \
commId 0x9 - Init START
nodeA:100:155 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA
nodeA:100:155 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA
nodeB:200:255 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA
"""


def test_two_node_ib_summary_connections_and_evidence():
    a = analyze_text(TWO_NODE_IB, "job.log")
    s = a.summary
    assert (s.transport, s.gdr, s.gdr_mode, s.nccl_version, s.nnodes) == ("IB", True, "used", "2.21.5", 2)
    assert s.hcas == ("mlx5_0:1/IB", "mlx5_1:1/IB")
    send = [c for c in a.connections if c.direction == "send"]
    assert len(send) == 1 and send[0].channels == 2 and send[0].nic == 1
    assert (send[0].evidence.file, send[0].evidence.line) == ("job.log", 8)
    recv = next(c for c in a.connections if c.direction == "receive")
    assert (recv.rank, recv.peer, recv.host) == (1, 0, "nodeB")  # the receive line names the peer first
    assert a.ranks[0].bus_id == "0000:1a:00.0"


def test_single_process_using_ib_is_not_an_inter_node_transport():
    text = """\
solo:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.1.1<0>
solo:1:1 [0] NCCL INFO Using network IB
solo:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
solo:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer
"""
    s = analyze_text(text).summary
    assert s.transport == "none" and s.net_plugin == "IB" and s.gdr is None
    assert s.intra_node == ("P2P/direct",)


def test_no_ib_device_is_an_info_fallback_and_socket_is_the_transport():
    text = """\
h1:5:5 [0] NCCL INFO NET/IB : No device found.
h1:5:5 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.0.1<0>
h1:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
h2:6:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0
"""
    s = analyze_text(text).summary
    assert s.transport == "Socket" and s.gdr is False
    # benign on one node (the catalogue's ib-no-device-found), but two hosts ended on sockets: the reason
    (error,) = s.errors
    assert (error.category, error.level, error.line, error.signature) == ("no_net_device", "INFO", 1,
                                                                          "ib-no-device-found")
    assert not s.benign
    single = analyze_text("".join(text.splitlines(keepends=True)[:2])).summary  # no network connection
    assert not single.errors and [e.signature for e in single.benign] == ["ib-no-device-found"]


@pytest.mark.parametrize("decoration", [
    "", "[rank3]:", "3: ", "[1,3]<stdout>:", "nodeX: ", "(RayWorkerWrapper pid=7, ip=10.9.9.9) ",
    "  | 2025-05-16T16:39:51.208-07:00 | ", "2024-05-01T10:00:00.123456789Z ", "\x1b[32m",
])
def test_launcher_decorations_do_not_change_what_is_read(decoration):
    text = "".join(decoration + line + "\n" for line in TWO_NODE_IB.splitlines())
    a = analyze_text(text)
    assert a.summary.hosts == ("nodeA", "nodeB")
    assert a.summary.transport == "IB" and len(a.connections) == 2


def test_asymmetric_gdr_is_reported_per_host():
    text = TWO_NODE_IB.replace("[receive] via NET/IB/0/GDRDMA", "[receive] via NET/IB/0")
    a = analyze_text(text)
    assert (a.summary.gdr, a.summary.gdr_mode) == (False, "asymmetric")
    assert {h.name: h.gdr for h in a.hosts} == {"nodeA": True, "nodeB": False}


@pytest.mark.parametrize(("line", "status_name"), [
    ("NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129", "RETRY_EXC_ERR"),
    ("NET/IB : Got completion from peer 10.0.0.2<1> with error 4, opcode 1, len 0, vendor err 81",
     "LOC_PROT_ERR"),
    ("NET/IB: Got completion from peer 10.0.0.2<1> with status=5 opcode=0 len=0 vendor err 249 (Recv) hca x",
     "WR_FLUSH_ERR"),
    ("NET/IB: Got completion from peer 1.2.3.4<5> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) "
     "vendor_err=129 hca mlx5_0", "RETRY_EXC_ERR"),
])
def test_completion_errors_across_versions_are_decoded(line, status_name):
    category, explanation = classify(line)
    assert category == "ib_completion_error"
    assert status_name in explanation


def test_return_code_chains_benign_3_and_unexplained_2():
    chains = "nodeA:100:150 [0] NCCL INFO net.cc:55 -> 3\nnodeB:200:250 [0] NCCL INFO proxy.cc:9 -> 2\n"
    text = TWO_NODE_IB + chains
    errors = analyze_text(text).summary.errors
    assert [(e.category, e.host) for e in errors] == [("system_error", "nodeB")]


def test_version_mismatch_names_both_versions():
    text = TWO_NODE_IB + "nodeB:200:200 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
    s = analyze_text(text).summary
    assert s.nccl_versions == ("2.18.1", "2.21.5")
    (mismatch,) = [e for e in s.errors if e.category == "version_mismatch"]
    assert "2.18.1" in mismatch.explanation and "2.21.5" in mismatch.explanation


def test_same_hostname_on_two_machines_counts_two_nodes():
    text = TWO_NODE_IB.replace("nodeB", "nodeA")
    a = analyze_text(text)
    assert a.summary.hosts == ("nodeA",) and a.summary.nnodes == 2
    assert a.hosts[0].machines == 2


def test_wrapped_and_interleaved_lines_are_reassembled():
    text = (
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via\n"
        " NET/IB/0/GDRDMA\n"
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/readn1:3:4 [1] NCCL INFO "
        "Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read\n"
    )
    a = analyze_text(text)
    rows = {(c.rank, c.peer, c.transport, c.gdr) for c in a.connections}
    assert rows == {(0, 1, "NET/IB", True), (0, 1, "P2P/IPC", None), (1, 0, "P2P/IPC", None)}
    assert {c.host for c in a.connections} == {"n1"}


def test_truncated_flag_does_not_claim_gdr_either_way():
    a = analyze_text("n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDR")
    assert a.connections[0].gdr is None and a.summary.gdr is None


def test_invalid_utf8_and_chunk_boundaries_keep_line_numbers(monkeypatch):
    noise = b"step \xff\xfe loss 1.0\n" * 3000
    data = noise + TWO_NODE_IB.encode() + noise + b"nodeA:100:150 [0] foo.cc:1 NCCL WARN Cuda failure 'x'\n"
    whole = analyze([("x.log", io.BytesIO(data))])
    monkeypatch.setattr(nccl_log_scan, "CHUNK_BYTES", 97)
    chunked = analyze([("x.log", io.BytesIO(data))])
    assert chunked == whole
    assert whole.errors[0].line == 3000 + 10 + 3000 + 1
    assert whole.inputs[0].lines == 6011


def test_gzip_and_several_inputs_keep_their_names(tmp_path):
    first, second = TWO_NODE_IB.splitlines(keepends=True)[:6], TWO_NODE_IB.splitlines(keepends=True)[6:]
    (tmp_path / "a.log").write_text("".join(first))
    with gzip.open(tmp_path / "b.log.gz", "wt") as out:
        out.write("".join(second))
    a = analyze([str(tmp_path / "a.log"), str(tmp_path / "b.log.gz")])
    assert a.summary.transport == "IB"
    assert {c.evidence.file for c in a.connections} == {str(tmp_path / "b.log.gz")}
    assert a.connections[0].evidence.line in (2, 3, 4)


def test_not_an_nccl_log_raises():
    with pytest.raises(NoNcclLinesError, match="no NCCL lines found"):
        analyze_text("epoch 1 loss 2.0\nepoch 2 loss 1.5\n", "train.log")


def test_missing_or_broken_input_raises_input_error(tmp_path):
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b not gzip")
    for path in (str(tmp_path / "missing.log"), str(tmp_path / "bad.gz")):
        with pytest.raises(LogInputError, match=path.split("/")[-1]):
            analyze([path])


@pytest.mark.parametrize(("line", "kind", "name", "status", "version"), [
    ("NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", "net", "libnccl-net.so",
     "not_found", None),
    ("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: "
     "No such file or directory", "net", "libnccl-net.so", "not_found", None),
    ("NET/Plugin: Plugin load returned 2 : libnccl-net-ofi.so: undefined symbol: fi_getinfo when loading "
     "libnccl-net-ofi.so", "net", "libnccl-net-ofi.so", "failed", None),
    ("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.", "net", "libnccl-net.so",
     "not_found", None),
    ("TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.", "tuner",
     "libnccl-tuner.so", "not_found", None),
    ("PROFILER/Plugin: Could not find: libnccl-profiler.so.", "profiler", "libnccl-profiler.so", "not_found",
     None),
    ("NET/Plugin: Loaded net plugin FasTrak (v8)", "net", "FasTrak", "loaded", "v8"),
    ("NET/Plugin: Loaded coll plugin SHARP (v6)", "coll", "SHARP", "loaded", "v6"),
    ("NET/OFI Initializing aws-ofi-nccl 1.9.1-aws", "net", "aws-ofi-nccl", "loaded", "1.9.1-aws"),
    ("NET/gIB : Initializing gIB v1.0.3", "net", "gIB", "loaded", "v1.0.3"),
    ("NET/GPUDirectTCPX ver. 3.1.8.", "net", "GPUDirectTCPX", "loaded", "3.1.8"),
    ("P2P plugin IBext_v8", "net", "IBext_v8", "loaded", None),
    ("Failed to initialize NET plugin IBext_v10", "net", "IBext_v10", "failed", None),
    ("No network plugin found.", "net", "libnccl-net.so", "not_found", None),
])
def test_plugin_lines_of_every_era_fill_the_plugin_table(line, kind, name, status, version):
    a = analyze_text(f"h1:5:5 [0] NCCL INFO {line}\n")
    (plugin,) = a.plugins
    assert (plugin.kind, plugin.name, plugin.status, plugin.version) == (kind, name, status, version)
    assert plugin.evidence.line == 1


def test_a_symbol_probe_then_an_older_api_is_one_loaded_plugin():
    text = ("h1:5:5 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.\n"
            "h1:5:5 [0] NCCL INFO NET/Plugin: Loaded net plugin IBext_v7 (v7)\n")
    (plugin,) = analyze_text(text).plugins
    assert (plugin.name, plugin.status, plugin.version, plugin.failure) == ("IBext_v7", "loaded", "v7", None)
    assert not analyze_text(text).errors


def test_a_loaded_plugin_that_carries_no_traffic_is_a_plugin_error():
    text = TWO_NODE_IB.replace(
        "nodeA:100:150 [0] NCCL INFO Using network IB\n",
        "nodeA:100:150 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.9.1-aws\n"
        "nodeA:100:150 [0] NCCL INFO Using network IB\n",
    )
    a = analyze_text(text)
    (ofi,) = [p for p in a.plugins if p.name == "aws-ofi-nccl"]
    assert (ofi.status, ofi.selected) == ("loaded", False)
    (error,) = [e for e in a.errors if e.category == "plugin_error"]
    assert (error.level, error.line) == ("derived", 4) and "silently used IB" in error.explanation


def test_the_plugin_in_use_is_selected_and_not_an_error():
    a = analyze_text("n1:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v6)\n"
                     "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0\n")
    assert [(p.name, p.selected) for p in a.plugins] == [("AWS Libfabric", True)] and not a.errors


def test_pytorch_last_error_on_the_next_line_is_the_root_cause():
    text = (
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited or "
        "there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.\n"
        "Last error:\n"
        "NET/IB : Got completion from peer 10.0.0.2<51000> with error 12, opcode 0, len 0, vendor err 129\n"
    )
    errors = analyze_text(text).errors
    assert [(e.category, e.line) for e in errors] == [("remote_error", 1), ("ib_completion_error", 4)]
    assert errors[1].explanation.startswith("PyTorch printed NCCL's last warning")
    assert "RETRY_EXC_ERR" in errors[1].explanation


def test_a_lone_ncclremoteerror_line_still_counts():
    text = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting.\n"
    assert [e.category for e in analyze_text(text).errors] == ["remote_error"]


def test_watchdog_and_tcpx_ctrl_timeouts_are_explained():
    text = (
        "[rank1]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600081 milliseconds "
        "before timing out.\n"
        "a3:1:2 [0] tcpxResult_t tcpxCommProgress(tcpxComm*):1231 NCCL WARN 0x1:0x2, nic 0, eth1, "
        "10.0.1.1<1><-10.0.1.2<2> rx rx ctrl timeout cnt 5, nanos 10000000585\n"
    )
    first, second = analyze_text(text).errors
    assert (first.category, second.category) == ("timeout", "timeout")
    assert (second.level, second.host) == ("WARN", "a3")
    assert "PyTorch aborted a collective" in first.explanation and "GPUDirect-TCPX" in second.explanation
    assert first.signature is not None


def test_service_thread_shutdown_info_is_not_a_finding():
    a = analyze_text("n1:1:2 [0] NCCL INFO [Service thread] Connection closed by localRank 0\n")
    assert a.errors == ()


def test_fast_socket_is_not_reported_as_plain_socket():
    a = analyze_text("g1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/FastSocket/0\n")
    assert a.summary.transport == "FastSocket"


def test_nccl_2_3_candidate_interfaces_are_one_machine():
    text = "".join(f"ws3:1:2 [0] NCCL INFO NET : Using interface eth{i}:10.0.{i}.1<0>\n" for i in range(3))
    (host,) = analyze_text(text).hosts
    assert (host.machines, len(host.addresses)) == (1, 3)


def test_utf16_logs_are_read_like_utf8(tmp_path):
    """PowerShell's `>` writes UTF-16 with a BOM; some tools write it without one."""
    import codecs

    from topodoc.codec import to_data

    source = Path("fixtures/logs/ib-local-protection-acs.log")
    text = source.read_text(encoding="utf-8")
    expected = to_data(analyze([("x.log", io.BytesIO(text.encode("utf-8")))]).summary)
    variants = {
        "bom.log": codecs.BOM_UTF16_LE + text.replace("\n", "\r\n").encode("utf-16-le"),
        "nobom.log": text.encode("utf-16-le"),
        "be.log": codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    }
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
        got = to_data(analyze([str(tmp_path / name)]).summary)
        assert got["transport"] == expected["transport"] == "IB", name
        assert got["errors"] == [_renamed(e, str(tmp_path / name)) for e in expected["errors"]], name
    (tmp_path / "bom.log.gz").write_bytes(gzip.compress(variants["bom.log"]))
    assert analyze([str(tmp_path / "bom.log.gz")]).summary.transport == "IB"


def _renamed(error: dict, name: str) -> dict:
    return dict(error, file=name, related=[dict(ev, file=name) for ev in error["related"]])


def test_a_partial_log_of_two_machines_gives_a_lower_bound_not_a_count():
    s = analyze([str(LOGS / "ib-loc-prot-err4-vendor81.log")]).summary
    assert (s.nnodes, s.nnodes_min, s.nranks) == (None, 2, 16)  # 2 of 16 ranks logged: the total is unknown
    bound = s.evidence["nnodes_min"]
    assert sorted(ev.line for ev in bound) == [1, 6] and all("Bootstrap : Using ib0:10.101.15." in ev.text
                                                            for ev in bound)
    assert "nnodes" not in s.evidence


PARTIAL = """\
nodeA:100:100 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>
nodeA:100:150 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1a000 commId 0x9 - Init START
nodeA:100:155 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA
"""


def test_network_connections_prove_a_second_node_unless_p2p_and_shm_are_off():
    s = analyze_text(PARTIAL).summary
    assert (s.nnodes, s.nnodes_min) == (None, 2)
    assert [ev.line for ev in s.evidence["nnodes_min"]] == [3]
    off = ("nodeA:100:100 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
           "nodeA:100:100 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n")
    s = analyze_text(off + PARTIAL).summary  # NCCL may then use the network inside one node
    assert (s.nnodes, s.nnodes_min) == (None, 1)
    assert [ev.line for ev in s.evidence["nnodes_min"]] == [3]  # the one machine's bootstrap line


def test_a_known_node_count_is_its_own_lower_bound():
    s = analyze_text(TWO_NODE_IB).summary
    assert (s.nnodes, s.nnodes_min) == (2, 2) and "nnodes_min" not in s.evidence


def test_each_summary_field_lists_a_line_once():
    s = analyze([str(LOGS / "efa-devices-hidden-in-container-2-27.log")]).summary
    for lines in s.evidence.values():
        assert len({(ev.file, ev.line) for ev in lines}) == len(lines)
    assert len(s.evidence["nnodes"]) == 1  # nNodes and nranks/localRanks come from the same Init line


def test_a_return_code_chain_is_evidence_of_the_warn_of_its_process():
    first = TWO_NODE_IB.count("\n") + 1
    text = TWO_NODE_IB + (
        "nodeB:200:250 [0] NCCL INFO misc/socket.cc:504 -> 2 (Operation now in progress)\n"
        "nodeB:200:250 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.1<4000> "
        "failed : Connection refused\n"
        "nodeB:200:250 [0] NCCL INFO bootstrap.cc:270 -> 2\n"
        "nodeB:200:250 [0] NCCL INFO init.cc:1350 -> 2\n"
        "nodeA:100:150 [0] NCCL INFO proxy.cc:9 -> 2\n"  # nodeA printed no WARN: a chain alone
    )
    errors = analyze_text(text).summary.errors
    assert [(e.category, e.host, e.line) for e in errors] == [
        ("socket_error", "nodeB", first + 1), ("system_error", "nodeA", first + 4)]
    assert [ev.line for ev in errors[0].related] == [first, first + 2]  # the chain before and after it
    assert errors[1].related == ()


def test_one_node_proven_when_every_rank_connects_inside_one_machine():
    """Real DeepSpeed pod log (fixtures/logs/real/shm-2gpu-pod-init-complete.log, source in its truth file):
    ranks 0 and 1 of a 2-rank communicator both print their rows, SHM only, on one host: one node, and the
    transport is none. Without rank 1's own rows nothing proves rank 1 is on that machine."""
    path = LOGS / "real" / "shm-2gpu-pod-init-complete.log"
    s = analyze_text(path.read_text()).summary
    assert (s.nnodes, s.transport) == (1, "none")
    assert all("via direct shared memory" in ev.text for ev in s.evidence["nnodes"])
    alone = "".join(line for line in path.read_text().splitlines(keepends=True) if ":98:" not in line)
    s = analyze_text(alone).summary
    assert s.nnodes is None and s.transport != "none"


@pytest.mark.parametrize(("signature", "version"), [("vllm-nccl-version", "2.21.5"),
                                                    ("pytorch-distbackend-error", None)])
def test_framework_lines_state_the_nccl_version(signature, version):
    """The NCCL release PyTorch (DistBackendError ... NCCL version X) and vLLM (``vLLM is using nccl==X``)
    print, read from the catalogue's real example lines; a line printed by a framework, not NCCL."""
    from topodoc import catalogue

    line = catalogue.by_id(signature).examples[0].line
    stated = catalogue.fields(catalogue.by_id(signature), line)["nccl_version"]
    assert version is None or stated == version
    found = analyze([("job.log", io.BytesIO((line + "\n").encode()))], catalogue.scan_literals())
    assert found.summary.nccl_version == stated and stated in line


def test_a_return_code_chain_after_a_benign_probe_is_no_error():
    """Real lines (fixtures/logs/real/efa-couldnt-open-av-2-4-horovod.log, aws-ofi-nccl issue 24): the OFI
    plugin's ``No NIC info`` probe, then ``-> 2`` from the same thread. The chain belongs to the benign probe;
    the same chain alone is still reported as a system error."""
    from topodoc import catalogue

    lines = (LOGS / "real" / "efa-couldnt-open-av-2-4-horovod.log").read_text().splitlines()[9:11]
    assert "No NIC info" in lines[0] and lines[1].endswith("-> 2")
    both = analyze([("job.log", io.BytesIO(("\n".join(lines) + "\n").encode()))], catalogue.scan_literals())
    assert not both.errors
    (probe,) = both.benign
    assert probe.signature == "ofi-no-nic-info" and [r.line for r in probe.related] == [2]
    alone = analyze([("job.log", io.BytesIO((lines[1] + "\n").encode()))], catalogue.scan_literals())
    assert [e.category for e in alone.errors] == ["system_error"]
