"""RDMA tool output as people quote it: an ``ibv_devinfo -v`` port section without its ``hca_id:`` line,
its GID table rows, and ``ibdev2netdev -v`` lines."""

from __future__ import annotations

from pathlib import Path

from topodoc.parsers import rdma_text
from topodoc.text.inputs import parse_text

ROOT = Path(__file__).resolve().parent.parent


def test_a_port_section_without_its_header_is_read_with_its_gids():
    """Mellanox/k8s-rdma-shared-dev-plugin#164: the port section of `ibv_devinfo -v` from `port: 1` on."""
    path = ROOT / "fixtures/text/ibv-devinfo/roce-port-gid-table-no-header.txt"
    item = parse_text(str(path), path.read_text())
    assert item.kind == "ibv-devinfo" and item.error is None
    (nic,) = item.parsed.nics
    assert nic.name == rdma_text.HEADERLESS and nic.kind == "roce"
    (port,) = nic.ports
    assert (port.port, port.state, port.link_layer, port.rate_gbps) == (1, "ACTIVE", "Ethernet", 25.0)
    assert [(g.index, g.gid, g.type) for g in port.gids] == [
        (14, "0000:0000:0000:0000:0000:ffff:c0a8:0606", None),
        (15, "0000:0000:0000:0000:0000:ffff:c0a8:0606", None),
    ]
    assert any("without its hca_id" in d for d in item.damaged)


def test_untyped_gids_do_not_claim_a_missing_roce_v2_gid():
    """ibv_devinfo -v before rdma-core 28 prints no GID type: roce-no-v2-gid must not read "only ?" as
    "no RoCE v2 GID" (it is skipped for want of show_gids)."""
    import subprocess
    import sys

    path = ROOT / "fixtures/text/ibv-devinfo/roce-port-gid-table-no-header.txt"
    out = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", str(path)], capture_output=True,
                         text=True, cwd=ROOT, check=False)
    assert out.returncode in (0, 1) and "1 NIC(s) described" in out.stdout, out.stderr
    assert "roce-no-v2-gid" not in out.stdout


def test_gid_rows_with_their_type_and_a_device_header():
    """rdma-core 28+ (linux-rdma/rdma-core#682) appends the GID type to each row."""
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        "\t\t\tlink_layer:\t\tEthernet\n"
        "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0a5c:1cff:fe2f:1a01, RoCE v1\n"
        "\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2\n"
    )
    (nic,) = rdma_text.parse_ibv_devinfo(text).nics
    assert [(g.index, g.type) for g in nic.ports[0].gids] == [(0, "RoCE v1"), (3, "RoCE v2")]


def test_ibdev2netdev_verbose_lines_give_pci_firmware_and_port_state():
    """Lines in the layout of the ibdev2netdev script's -v echo ("$x $d ($devid - $partid) $devdesc fw
    $fwver port $port ($ibstate) ==> $eth ($link_state)", the state padded to 6): no public paste of -v
    was found."""
    text = (
        "0000:3b:00.0 mlx5_0 (MT4119 - MCX556A-ECAT) CX556A - ConnectX-5 QSFP28 fw 16.27.2008 port 1 "
        "(ACTIVE) ==> ens1f0 (Up)\n"
        "0000:3b:00.1 mlx5_1 (MT4119 - NA         )  fw 16.27.2008 port 1 (DOWN  ) ==> ens1f1 (Down)\n"
    )
    item = parse_text("x.txt", text)
    assert item.kind == "ibdev2netdev" and not item.damaged
    first, second = item.parsed.nics
    assert (first.pci_address, first.fw_version, first.netdevs) == ("0000:3b:00.0", "16.27.2008", ("ens1f0",))
    assert [p.state for p in first.ports] == ["ACTIVE"] and [p.state for p in second.ports] == ["DOWN"]
    assert item.parsed.inferred_pci == {}  # the address is printed, not read from the netdev name
    assert item.parsed.netdev_links == {"mlx5_0:1": "Up", "mlx5_1:1": "Down"}


def test_new_patterns_stay_linear_on_hostile_lines():
    import contextlib
    import time

    from topodoc.text import detect

    prefixes = ["", "0000:3b:00.0 mlx5_0 (", "0000:3b:00.0 x (a) ", "  GID[ 1]: ", "\t\tport:\t1", "fw "]
    fills = [" " * 3990, "a " * 1995, "fw " * 1330, ":" * 3990, "0." * 1995]
    text = "\n".join(p + f + "!" for p in prefixes for f in fills for _ in range(5))
    start = time.perf_counter()
    for parse in (rdma_text.parse_ibdev2netdev, rdma_text.parse_ibv_devinfo):
        with contextlib.suppress(ValueError):
            parse(text)
    detect.detect(text)
    assert time.perf_counter() - start < 5.0


def test_an_empty_show_gids_is_read_and_noted(tmp_path):
    """Mellanox/k8s-rdma-sriov-dev-plugin#30: show_gids in a pod prints its header and n_gids_found=0."""
    from topodoc import text

    path = ROOT / "fixtures/text/show-gids/calico-pod-no-gids.txt"
    item = parse_text(str(path), path.read_text())
    assert item.kind == "show-gids" and not item.damaged  # the prompt line is no damage
    assert item.parsed.gids_found == (0, 4) and item.parsed.nics == ()
    built = text.build([item])
    assert any("n_gids_found=0" in note and ":4)" in note for note in built.notes)


def test_ibstatus_second_paste_reads_roce_ports_and_the_cut_device():
    """NVIDIA/nccl#1866: ibstatus of RoCE ports, the paste cut inside the third device."""
    path = ROOT / "fixtures/text/ibstat/ibstatus-roce-active-cut.txt"
    item = parse_text(str(path), path.read_text())
    assert item.kind == "ibstat" and item.parsed.tool == "ibstatus"
    first, second, cut = item.parsed.nics
    assert [(p.state, p.phys_state, p.rate_gbps, p.link_layer) for p in first.ports + second.ports] == [
        ("ACTIVE", "LinkUp", 100.0, "Ethernet")
    ] * 2
    assert first.kind == "roce" and cut.ports[0].state is None  # the cut device's state is not claimed
    assert item.damaged == ("line 21: not read: bas",)


def test_a_port_whose_gids_the_paste_does_not_list_gets_no_gid_claim():
    """``show_gids | grep mlx5_0`` next to an ibstatus of two active RoCE ports: mlx5_1's GIDs are not in
    the paste, so nothing may be said about them (it was "no RoCE v2 GID (only none)"). The ibstatus and
    show_gids lines are the real fixtures' (their READMEs cite the threads); their joining is constructed."""
    import subprocess
    import sys
    import tempfile

    ibstatus = (ROOT / "fixtures/text/ibstat/ibstatus-roce-active-cut.txt").read_text().split("\n\n")[:2]
    gids = [line for line in (ROOT / "fixtures/text/show-gids/macvlan-pod-tabs.txt").read_text().splitlines()
            if line.startswith("mlx5_0")]
    text = "$ ibstatus\n" + "\n\n".join(ibstatus) + "\n\n$ show_gids | grep mlx5_0\n" + "\n".join(gids) + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as paste:
        paste.write(text)
        paste.flush()
        out = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", "--json", paste.name],
                             capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode in (0, 1), out.stderr
    assert '"roce-no-v2-gid"' not in out.stdout
    assert "2 NIC(s)" in out.stdout or '"mlx5_1"' in out.stdout
