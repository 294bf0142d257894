"""Text inputs for ``diagnose FILE...``: content detection, parser goldens on real pastes, hostile bytes,
end-to-end diagnoses from text only, and the NCCL topology export round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli, run_cli_process
from tests.text_golden import golden, inputs
from topodoc.text.inputs import parse_text

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "text" / "cases"
FIXTURES = inputs()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden(path: Path) -> None:
    assert golden(path) == json.loads(path.with_suffix(".json").read_text())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_detected_by_content_not_name(path: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "paste.log"
    renamed.write_bytes(path.read_bytes())
    assert parse_text(str(renamed), renamed.read_text()).kind == path.parent.name  # directories are kinds


@pytest.mark.parametrize(
    "name", ["traceback-in-nccl-log-ofi-remote-error", "traceback-in-nccl-log-ib-completion"]
)
def test_traceback_that_names_the_nccl_version_is_a_log_with_the_traceback_read_too(name: str) -> None:
    from topodoc.text.inputs import read_inputs

    items = read_inputs([str(CASES / f"{name}.txt")])
    assert items[0].kind == "nccl-log" and "nccl-traceback" in items[0].also
    trace = next(i for i in items if i.kind == "nccl-traceback" and i.secondary).parsed
    assert [e.code for e in trace.nccl_errors][:1] == [6] and trace.last_errors


def test_prose_is_unknown_not_mislabelled() -> None:
    item = parse_text("x", "Hello, my training job hangs after 10 minutes. Any idea?\nThanks\n")
    assert item.kind == "unknown" and item.parsed is None and "no known marks" in item.error


def test_cut_acs_lines_are_reported_damaged() -> None:
    item = parse_text("x", (ROOT / "fixtures/text/lspci/acsctl-grep-only.txt").read_text())
    assert item.kind == "lspci" and item.parsed.devices == {}
    assert any("no device header" in d for d in item.damaged) and any("cut ACS" in d for d in item.damaged)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIXTURES), st.integers(min_value=0, max_value=4000), st.binary(max_size=64))
def test_truncations_and_bytes_never_crash(path: Path, cut: int, junk: bytes) -> None:
    text = path.read_text()
    for variant in (text[:cut], text[cut:], text[:cut] + junk.decode("latin-1") + text[cut:]):
        parse_text("x", variant)


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_crashes(text: str) -> None:
    parse_text("x", text)


def _diagnose(*files: str) -> dict:
    result = run_cli("diagnose", "--json", "--fail-on", "critical", *files)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _rules(data: dict) -> set[str]:
    return {f["rule"] for f in data["findings"]}


def test_acs_on_bridges_above_two_gpus_from_lspci_alone() -> None:
    data = _diagnose(str(CASES / "acs-plx-two-gpus-lspci.txt"))
    acs = next(f for f in data["findings"] if f["rule"] == "acs-on-p2p-path")
    assert acs["subject"] == "0000:04:08.0, 0000:04:10.0"
    assert acs["evidence"][0]["where"].endswith("acs-plx-two-gpus-lspci.txt:11")
    assert data["inputs"]["hardware"].startswith("from the inputs")
    assert data["inputs"]["files"][0]["kind"] == "lspci"


def test_ibstat_port_down() -> None:
    data = _diagnose(str(ROOT / "fixtures/text/ibstat/a100-one-port-down.txt"))
    down = [f for f in data["findings"] if f["rule"] == "ib-port-down"]
    assert [f["subject"] for f in down] == ["mlx5_1 port 1"]
    assert down[0]["evidence"][0]["where"].endswith("a100-one-port-down.txt:25")
    skipped = {s["rule"]: s["reason"] for s in data["skipped"]}
    assert "show_gids" in skipped["roce-no-v2-gid"]


def test_smi_q_gpu_at_x8() -> None:
    data = _diagnose(str(CASES / "smi-q-gpu-at-x8.txt"))
    width = [f for f in data["findings"] if f["rule"] == "pcie-width-reduced"]
    assert [f["subject"] for f in width] == ["GPU1 (0000:2a:00.0)"]


def test_gdr_off_log_with_sys_gpu_nic_topo() -> None:
    data = _diagnose(
        str(CASES / "l40s-topo-m-nic-sys.txt"), str(ROOT / "fixtures/logs/asymmetric-gdr-peermem.log")
    )
    rules = _rules(data)
    assert {"gpu-nic-far", "nccl-gdr-asymmetric"} <= rules
    far = next(f for f in data["findings"] if f["rule"] == "gpu-nic-far")
    assert "SYS" in far["message"] and "fffe" not in json.dumps(far)
    assert [f["kind"] for f in data["inputs"]["files"]] == ["smi-topo", "nccl-log"]


def test_unrecognized_only_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing to see here\n")
    result = run_cli_process("diagnose", str(path))
    assert result.returncode == 2 and "no input was recognized" in result.stderr
    assert "Traceback" not in result.stderr


def test_export_round_trip_keeps_nccl_paths(tmp_path: Path) -> None:
    from topodoc.parsers.nccl_topo_xml import parse
    from topodoc.probe.source import load_snapshot
    from topodoc.topology.pcitree import nccl_level

    source = ROOT / "fixtures/text/hwloc-xml/nvidia-dgx2.xml"
    out = tmp_path / "topo.xml"
    assert run_cli("export", "nccl-topo", "--from", str(source), "-o", str(out)).returncode == 0
    before, after = load_snapshot(str(source)), parse(out.read_text())
    assert [g.pci_address for g in after.gpus] == [g.pci_address for g in before.gpus]
    pairs = [(a.pci_address, b.pci_address) for a in before.gpus for b in before.gpus if a.index < b.index]
    assert [nccl_level(after.pci, a, b) for a, b in pairs] == [nccl_level(before.pci, a, b) for a, b in pairs]
    assert {nccl_level(after.pci, a, b) for a, b in pairs} >= {"PIX", "PXB", "SYS"}


def test_topo_from_nccl_xml_like_a_recording() -> None:
    result = run_cli("topo", "--from", str(ROOT / "fixtures/text/nccl-topo-xml/azure-ndv4-topo.xml"))
    assert result.returncode == 0 and "8 GPUs" in result.stdout


TOPO_FIXTURES = sorted((ROOT / "fixtures" / "topo").glob("*.txt"))


@pytest.mark.parametrize("path", TOPO_FIXTURES, ids=lambda p: p.stem)
def test_topo_m_alone_derives_every_printed_class_and_no_other(path: Path) -> None:
    """topo -m alone: the derived topology gives every GPU/NIC pair the class the matrix printed (NV<n>
    included), and a pair the paste did not print is unknown (N/A), whatever the stand-in tree says."""
    from topodoc.text.machine import build
    from topodoc.text.placement import legend_names
    from topodoc.topology import derive
    from topodoc.topology.vocab import SMI_LEVELS

    item = parse_text(str(path), path.read_text())
    if item.kind != "smi-topo" or item.parsed is None or item.parsed.kind != "topo":
        pytest.skip("a -p2p matrix or not a matrix")
    snapshot = build([item]).snapshot
    topology = derive(snapshot)
    ours = {n.device: n.name for n in topology.nics}
    name = {f"GPU{g.index}": f"GPU{g.index}" for g in snapshot.gpus}
    name |= {col: ours[dev] for col, dev in legend_names(item.parsed).items() if dev in ours}
    cells = {(r, c): v for r, row in item.parsed.links.items() for c, v in row.items()
             if v in SMI_LEVELS or v.startswith("NV")}
    assert cells
    derived = {}
    for conn in (*topology.gpu_pairs, *topology.gpu_nic, *topology.nic_pairs):
        derived[conn.a, conn.b] = derived[conn.b, conn.a] = conn.smi
    back = {v: k for k, v in name.items()}
    got = {(r, c): derived[name[r], name[c]] for (r, c) in cells if r in name and c in name}
    assert got == {k: v for k, v in cells.items() if k in got}
    assert len(got) >= len(cells) * 0.9
    for (a, b), smi in derived.items():
        printed = cells.get((back.get(a), back.get(b))) or cells.get((back.get(b), back.get(a)))
        assert printed is not None or smi == "N/A", (a, b, smi)


def test_nvlink_s_inactive_links_cite_their_lines() -> None:
    data = _diagnose(str(CASES / "a100-nvlink-s-two-inactive.txt"))
    down = next(f for f in data["findings"] if f["rule"] == "nvlink-link-down")
    assert down["subject"] == "GPU2" and "link 3, 5 inactive" in down["message"]
    assert [e["where"].rsplit(":", 1)[1] for e in down["evidence"]] == ["31", "33"]


def test_cut_nvlink_paste_is_damaged_not_a_link_down() -> None:
    data = _diagnose(str(ROOT / "fixtures/text/nvlink/a100-all-up-cut.txt"))
    assert "nvlink-link-down" not in _rules(data)
    assert "the paste is cut" in data["inputs"]["files"][0]["damaged"][0]


def test_ibv_devinfo_port_down_and_show_gids_v2_present() -> None:
    data = _diagnose(
        str(ROOT / "fixtures/text/ibv-devinfo/cx6-roce-port-down.txt"),
        str(ROOT / "fixtures/text/show-gids/macvlan-pod-tabs.txt"),
    )
    assert [f["subject"] for f in data["findings"] if f["rule"] == "ib-port-down"] == ["mlx5_12 port 1"]
    assert "roce-no-v2-gid" not in {s["rule"] for s in data["skipped"]}  # it ran: the GIDs were read
    assert "roce-no-v2-gid" not in _rules(data)  # both pods' ports have RoCE v2 GIDs


def test_reader_gzip_utf16_crlf_ansi_and_stdin(tmp_path: Path) -> None:
    import gzip

    text = (ROOT / "fixtures/text/ibstat/a100-one-port-down.txt").read_text()
    gz = tmp_path / "a.bin"
    gz.write_bytes(gzip.compress(text.encode()))
    utf16 = tmp_path / "b.txt"
    utf16.write_bytes(("\x1b[32m" + text.replace("\n", "\r\n") + "\x1b[0m").encode("utf-16"))
    for path in (gz, utf16):
        data = _diagnose(str(path))
        assert [f["subject"] for f in data["findings"] if f["rule"] == "ib-port-down"] == ["mlx5_1 port 1"]
    result = run_cli("diagnose", "--json", "--fail-on", "critical", "-", input=text)
    assert json.loads(result.stdout)["inputs"]["files"][0]["kind"] == "ibstat"


def test_launcher_prefixes_are_stripped() -> None:
    from topodoc.text.reader import clean

    text = (ROOT / "fixtures/text/ibstat/a100-one-port-down.txt").read_text()
    plain = parse_text("x", text).parsed
    for prefix in ("[1,0]<stdout>:", "node-7: ", "3: "):
        pasted = "".join(f"{prefix}{line}\n" for line in text.splitlines())
        assert parse_text("x", clean(pasted)).parsed == plain


def _vocabulary(text: str) -> set[tuple[str, str]]:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    return {(node.tag, attr) for node in root.iter() for attr in node.attrib} | {
        (n.tag, "") for n in root.iter()
    }


def test_export_dgx_a100_round_trip_and_speaks_nccls_vocabulary(tmp_path: Path) -> None:
    """Every element and attribute the export writes is one NCCL's own dumps use (the DGX A100 dump of
    NVIDIA/nccl#1505 and Azure's ndv4 topology file), and the file reads back to the same NCCL paths."""
    from topodoc.parsers.nccl_topo_xml import parse
    from topodoc.probe.source import load_snapshot
    from topodoc.topology.pcitree import nccl_level

    out = tmp_path / "topo.xml"
    assert run_cli("export", "nccl-topo", "--from", "example:dgx-a100", "-o", str(out)).returncode == 0
    real = (ROOT / "fixtures/text/nccl-topo-xml/dgx-a100-excerpt-cut.xml").read_text()
    real_vocab = _vocabulary("<system><cpu><pci><pci>" + real + "</pci></cpu></system>") | _vocabulary(
        (ROOT / "fixtures/text/nccl-topo-xml/azure-ndv4-topo.xml").read_text()
    )
    assert _vocabulary(out.read_text()) <= real_vocab
    before, after = load_snapshot("example:dgx-a100"), parse(out.read_text())
    ends = [g.pci_address for g in before.gpus] + [n.pci_address for n in before.nics if n.kind == "ib"]
    pairs = [(a, b) for i, a in enumerate(ends) for b in ends[i + 1 :]]
    assert [nccl_level(after.pci, a, b) for a, b in pairs] == [nccl_level(before.pci, a, b) for a, b in pairs]
    assert [len(g.nvlinks) for g in after.gpus] == [
        sum(1 for x in g.nvlinks if x.active) for g in before.gpus
    ]
    pci_only = run_cli("export", "nccl-topo", "--from", "example:dgx-a100", "--pci-only").stdout
    assert "<gpu" not in pci_only and "<nic" not in pci_only and 'class="0x030200"' in pci_only


def test_nic_nccl_used_vs_nearest_in_topo_m() -> None:
    """The joined rail finding from text only: topo -m (GPU1 PIX to mlx5_1) and a log sending over mlx5_3."""
    data = _diagnose(
        str(ROOT / "fixtures/topo/hgx-h100-nv18-prompt-and-log.txt"),
        str(ROOT / "fixtures/rules/rail-mismatch/fire.log"),
    )
    rail = next(f for f in data["findings"] if f["rule"] == "rail-mismatch")
    assert "over mlx5_3 (NODE away) although mlx5_1 is PIX" in rail["message"]


def test_one_paste_holding_a_matrix_and_a_log_is_read_as_both(tmp_path: Path) -> None:
    both = tmp_path / "issue.txt"
    both.write_text(
        (ROOT / "fixtures/topo/hgx-h100-nv18-prompt-and-log.txt").read_text()
        + (ROOT / "fixtures/rules/rail-mismatch/fire.log").read_text()
    )
    data = _diagnose(str(both))
    (row,) = data["inputs"]["files"]
    assert row["kind"] == "smi-topo" and "nccl-log" in row["also_read"]
    assert data["inputs"]["log"].startswith(str(both)) and "rail-mismatch" in _rules(data)
    assert "host name gpu-node-a from the shell prompt" in data["inputs"]["notes"][0]


def test_from_recording_with_text_overlay() -> None:
    """--from names the machine explicitly; an ibstat pasted beside it overlays the port states."""
    data = _diagnose("--from", "example:dgx-a100", str(ROOT / "fixtures/text/ibstat/a100-one-port-down.txt"))
    assert data["inputs"]["hardware"].startswith("example:dgx-a100 + the inputs")
    assert "mlx5_1 port 1" in [f["subject"] for f in data["findings"] if f["rule"] == "ib-port-down"]


def test_p2p_matrix_feeds_the_p2p_rule() -> None:
    data = _diagnose(str(ROOT / "fixtures/topo/p2p-read-4gpu-cns.txt"))
    p2p = next(f for f in data["findings"] if f["rule"] == "gpu-p2p-unsupported")
    assert p2p["subject"] == "GPU0-GPU2, GPU0-GPU3, GPU1-GPU2, GPU1-GPU3"
    assert p2p["evidence"][0]["where"].endswith("p2p-read-4gpu-cns.txt:3")


def test_unreadable_file_is_one_line_exit_2() -> None:
    result = run_cli_process("diagnose", "/nonexistent/paste.txt")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "cannot read /nonexistent/paste.txt" in result.stderr


def test_nccl_tests_output_is_not_taken_for_a_log() -> None:
    path = sorted((ROOT / "fixtures" / "nccl_tests").glob("*.txt"))[0]
    assert parse_text(str(path), path.read_text()).kind == "nccl-tests"


@pytest.mark.parametrize("name", ["ibm-gx3d-8xh100-vsi", "azure-ndv4-topo"])
def test_real_nccl_topology_files_survive_write_and_read(name: str) -> None:
    """A published NCCL_TOPO_FILE, read, written back and read again, keeps its GPUs, NICs and paths."""
    from topodoc.parsers.nccl_topo_xml import parse, write
    from topodoc.topology.pcitree import nccl_level

    first = parse((ROOT / "fixtures/text/nccl-topo-xml" / f"{name}.xml").read_text())
    again = parse(write(first))
    assert [(g.index, g.pci_address, len(g.nvlinks)) for g in again.gpus] == [
        (g.index, g.pci_address, len(g.nvlinks)) for g in first.gpus
    ]
    assert sorted((n.pci_address, n.kind) for n in again.nics) == sorted(
        (n.pci_address, n.kind) for n in first.nics
    )
    ends = [g.pci_address for g in first.gpus] + [n.pci_address for n in first.nics]
    pairs = [(a, b) for i, a in enumerate(ends) for b in ends[i + 1 :]]
    assert [nccl_level(again.pci, a, b) for a, b in pairs] == [nccl_level(first.pci, a, b) for a, b in pairs]


def test_overlong_lines_are_cut_and_reported() -> None:
    text = (ROOT / "fixtures/text/ibstat/a100-one-port-down.txt").read_text() + "x" * 10000 + "\n"
    item = parse_text("x", text)
    assert item.kind == "ibstat" and item.damaged[0].startswith("1 line(s) longer than 4096 characters cut")


def test_probe_json_gives_the_recordings_findings(tmp_path: Path) -> None:
    snapshot = tmp_path / "probe.json"
    snapshot.write_text(run_cli("probe", "--from", "example:dgx-a100-degraded-acs", "--json").stdout)
    from_json = _diagnose(str(snapshot))
    from_recording = json.loads(
        run_cli(
            "diagnose", "--json", "--fail-on", "critical", "--from", "example:dgx-a100-degraded-acs"
        ).stdout
    )
    assert [(f["rule"], f["subject"]) for f in from_json["findings"]] == [
        (f["rule"], f["subject"]) for f in from_recording["findings"]
    ]
    assert "acs-on-p2p-path" in _rules(from_json)


def test_topo_m_rows_without_their_header_are_reported_not_guessed(tmp_path: Path) -> None:
    rows = (ROOT / "fixtures/topo/hgx-h100-nv18-prompt-and-log.txt").read_text().splitlines()[2:10]
    path = tmp_path / "rows.txt"
    path.write_text("\n".join(rows) + "\n")
    result = run_cli("diagnose", str(path))
    assert result.returncode == 2
    assert "looks like nvidia-smi topo -m / -p2p but could not be read" in result.stderr
    assert "expected a header line" in result.stderr


def test_ib_protection_errors_explained_by_acs_in_pasted_lspci() -> None:
    data = _diagnose(
        str(CASES / "acs-plx-two-gpus-lspci.txt"), str(ROOT / "fixtures/logs/ib-local-protection-acs.log")
    )
    cause = next(f for f in data["findings"] if f["rule"] == "ib-local-protection-cause")
    sources = [e["source"] for e in cause["evidence"]]
    assert sources[0] == "log" and "lspci" in sources
    assert "setpci -s 0000:04:08.0" in cause["fix"]


def test_gpu_lost_from_nvidia_smi_handle_error() -> None:
    result = run_cli("diagnose", "--json", str(ROOT / "fixtures/text/nvidia-smi-q/gpu-lost-handle.txt"))
    assert result.returncode == 1  # a critical finding, at or above the default --fail-on error
    data = json.loads(result.stdout)
    lost = next(f for f in data["findings"] if f["rule"] == "gpu-lost")
    assert lost["subject"] == "GPU0 (0000:02:00.0)" and lost["evidence"][0]["where"].endswith(
        "gpu-lost-handle.txt:1"
    )
    unknown = _diagnose(str(ROOT / "fixtures/text/nvidia-smi-q/no-handle-unknown-error.txt"))
    assert "gpu-lost" not in _rules(unknown)  # "Unknown Error" is not GPU_IS_LOST: a note, not a finding
    assert "Unknown Error" in unknown["inputs"]["notes"][0]


def test_nccl_log_on_stdin() -> None:
    log = (ROOT / "fixtures/logs/asymmetric-gdr-peermem.log").read_text()
    result = run_cli("diagnose", "--json", "--fail-on", "critical", "-", input=log)
    data = json.loads(result.stdout)
    assert data["inputs"]["files"][0]["kind"] == "nccl-log" and "nccl-gdr-asymmetric" in _rules(data)


def test_export_spells_nic_guids_the_way_nccls_dumps_do(tmp_path: Path) -> None:
    """NCCL dumps a GUID with "0x%lx" and reads it back with strtoull(str, NULL, 16) (src/graph/topo.cc):
    the written <net> carries the real dump's exact guid (NVIDIA/nccl-tests#256) and no attribute the dump
    lacks, and every NIC of the DGX A100 example gets its own value once read the way NCCL reads it."""
    import xml.etree.ElementTree as ET

    from topodoc.parsers.nccl_topo_xml import parse, write
    from topodoc.probe.source import load_snapshot

    real_text = (ROOT / "fixtures/text/nccl-topo-xml/h200-vm-dump-cut.xml").read_text()
    whole = real_text.rsplit('    <pci busid="0000:27', 1)[0] + "  </cpu>\n</system>"
    (real_net,) = ET.fromstring(whole).iter("net")
    snapshot = parse(real_text)
    assert snapshot.nics[0].node_guid == "58a2:e103:0000:0011"  # the sysfs / ibstat spelling
    exported = ET.fromstring(write(snapshot))
    (written,) = exported.iter("net")
    assert written.get("guid") == real_net.get("guid") and set(written.attrib) <= set(real_net.attrib)
    real_pci = {e.get("busid"): e.attrib for e in ET.fromstring(whole).iter("pci")}
    # the same attributes, spelt alike
    assert {e.get("busid"): e.attrib for e in exported.iter("pci")} == real_pci

    out = tmp_path / "topo.xml"
    assert run_cli("export", "nccl-topo", "--from", "example:dgx-a100", "-o", str(out)).returncode == 0
    guids = [n.get("guid") for n in ET.parse(out).iter("net")]
    assert len(guids) >= 2 and all(g and g.startswith("0x") and ":" not in g for g in guids)
    assert len({int(g, 16) for g in guids}) == len(guids)  # strtoull keeps the whole value: no collapse
    before = {n.node_guid for n in load_snapshot("example:dgx-a100").nics if n.node_guid and n.kind == "ib"}
    assert {n.node_guid for n in parse(out.read_text()).nics} == before  # read back to the sysfs spelling


def test_nccl_1x_test_output_is_named_not_unrecognized() -> None:
    """No NCCL 1.x paste was found in public threads: the lines are built from the test's own printf formats
    (NVIDIA/nccl test/single/all_reduce_test.cu at v1.3.4-1, lines 252-294)."""
    text = (ROOT / "fixtures/text/cases/nccl1-all-reduce-test-from-printf.txt").read_text()
    item = parse_text("x", text)
    assert item.kind == "nccl1-tests" and item.parsed.rows == 1 and len(item.parsed.devices) == 2
    assert any("NCCL 1.x test output, not supported" in d for d in item.damaged)


@pytest.mark.parametrize(
    "module",
    ["cuda_samples", "smi_table", "pytrace", "envlist", "fabricmanager", "setpci", "ulimit", "lsmod", "shm",
     "nccl1_tests", "rdma_link", "cmdline", "ibv_devices"],
)
def test_pasted_text_parsers_stay_linear_on_hostile_lines(module: str) -> None:
    """200 lines of 4,000 characters (the cap diagnose puts on a line) after each kind's own prefixes:
    every recognizer and parser finishes in well under the bound (they take ~0.03 s; a quadratic pattern
    such as ``\\s*-?\\s*`` on a blank line took 1.2 s for 20 lines before it was fixed)."""
    import contextlib
    import importlib
    import time

    mod = importlib.import_module(f"topodoc.parsers.{module}")
    prefixes = ["", "|", "[rank0]: ", "export NCCL_A=", "link a/1 ", "Device: 0, ", "setpci -s "]
    fills = [" " * 3990, "\t" * 3990, "a " * 1995, "x=" * 1995, "0." * 1995, "-" * 3990]
    text = "\n".join(p + f + "!" for p in prefixes for f in fills for _ in range(5))
    start = time.perf_counter()
    mod.looks_like(text.split("\n"))
    with contextlib.suppress(ValueError):
        mod.parse(text)
    assert time.perf_counter() - start < 5.0


def test_a_region_is_parsed_without_its_prompt_line_and_keeps_it_in_its_text(tmp_path) -> None:
    """``$ ibstatus`` opening a multi-command paste is no line of ibstatus's output: the parser reads the
    region without it (it was listed as damaged), and the part's text keeps it at its line number (a
    prompt can name the host). Real fixtures' lines, joined here."""
    from topodoc.text.inputs import read_inputs

    ibstatus = (ROOT / "fixtures/text/ibstat/ibstatus-roce-active-cut.txt").read_text().split("\n\n")[:2]
    gids = [line for line in (ROOT / "fixtures/text/show-gids/macvlan-pod-tabs.txt").read_text().splitlines()
            if line.startswith("mlx5_0")]
    paste = tmp_path / "paste.txt"
    text = "$ ibstatus\n" + "\n\n".join(ibstatus) + "\n\n$ show_gids | grep mlx5_0\n" + "\n".join(gids)
    paste.write_text(text)
    items = read_inputs([str(paste)])
    assert [i.kind for i in items] == ["ibstat", "show-gids"]
    assert not any("$ " in d for i in items for d in i.damaged)
    for item in items:
        lines = item.text.split("\n")
        assert any(line.startswith("$ ") for line in lines)
        assert lines.index(next(line for line in lines if line.startswith("$ "))) in (0, 19)
