"""Issue 21: every door gives the same answer. The same inputs through ``diagnose FILE...``, ``diagnose
--from/--log/--nccl-tests``, ``logs``, ``nccltests``, ``topo``, the Python API and the agent's cycle give the
same facts and the same rule ids; one log and one nccl-tests file read the same in UTF-8, UTF-16 LE/BE with
and without a BOM, and gzip, through every command."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli

import topodoc

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "logs" / "ib-2node-gdr-srun.log"
ERROR_LOG = ROOT / "fixtures" / "logs" / "error-catalogue-mixed.log"
TESTS = ROOT / "fixtures" / "nccl_tests" / "all-reduce-8xa100-nvswitch.txt"
TOPO = ROOT / "fixtures" / "topo" / "dgx-a100-nv12-mlx5.txt"
MACHINE = "example:dgx-a100"


def _diagnose(*args: str) -> dict:
    result = run_cli("diagnose", *args, "--json", "--fail-on", "critical")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def _rules(doc: dict) -> list[str]:
    return sorted(f["rule"] for f in doc["findings"])


@pytest.mark.parametrize("log", [LOG, ERROR_LOG], ids=lambda p: p.stem)
def test_a_log_reads_the_same_through_every_door(log: Path) -> None:
    as_file = _diagnose(str(log))
    as_log = _diagnose("--log", str(log))
    assert _rules(as_file) == _rules(as_log)
    assert as_file["inputs"]["log"] == as_log["inputs"]["log"]
    api = topodoc.diagnose(logs=[str(log)])
    assert sorted(f.rule for f in api.findings) == _rules(as_log)
    assert sorted(f.rule for f in topodoc.diagnose(files=[str(log)]).findings) == _rules(as_log)
    # what `logs` reads is what diagnose read: every error line `logs` reports is cited by a finding
    logs = json.loads(run_cli("logs", str(log), "--json").stdout)
    cited = {e["where"] for f in as_file["findings"] for e in f["evidence"] if e["source"] == "log"}
    assert {f"{e['file']}:{e['line']}" for e in logs["errors"]} <= cited


def test_nccl_tests_output_reads_the_same_through_every_door() -> None:
    as_file = _diagnose("--from", MACHINE, str(TESTS))
    as_option = _diagnose("--from", MACHINE, "--nccl-tests", str(TESTS))
    assert _rules(as_file) == _rules(as_option)
    assert as_file["inputs"]["nccl-tests"] == as_option["inputs"]["nccl-tests"] == str(TESTS)
    api = topodoc.diagnose(MACHINE, nccl_tests=str(TESTS))
    assert sorted(f.rule for f in api.findings) == _rules(as_option)
    runs = json.loads(run_cli("nccltests", str(TESTS), "--json").stdout)["runs"]
    assert runs and runs[0]["rows"]


def test_a_topo_paste_reads_the_same_through_every_door() -> None:
    as_file = _diagnose(str(TOPO))
    api = topodoc.diagnose(files=[str(TOPO)])
    assert sorted(f.rule for f in api.findings) == _rules(as_file)
    topo = json.loads(run_cli("topo", str(TOPO), "--json").stdout)
    from topodoc.diagnosis import Request, run

    snapshot = run(Request(files=(str(TOPO),))).snapshot
    assert {row: dict(cells) for row, cells in snapshot.smi_topo.links.items()} == topo["links"]


def test_a_recording_reads_the_same_through_the_cli_the_api_and_the_agent() -> None:
    cli = _diagnose("--from", MACHINE)
    assert sorted(f.rule for f in topodoc.diagnose(MACHINE).findings) == _rules(cli)
    from topodoc.agent.cycle import Prober

    cycle = Prober(MACHINE, 60.0).run(1)
    assert sorted(f.rule for f in cycle.report.findings) == _rules(cli)


def test_the_agent_cycle_runs_the_kernel_rules_on_followed_events() -> None:
    """A replayed Xid 79 is an error-or-worse finding of the agent's cycle, as in diagnose with a dmesg."""
    from topodoc.agent.cycle import Prober
    from topodoc.parsers.kernel_log import parse_line

    line = "NVRM: Xid (PCI:0000:07:00): 79, pid=0, GPU has fallen off the bus."
    event = parse_line(line, 1)
    assert event is not None
    cycle = Prober(MACHINE, 60.0).run(1, kernel=(("replay kernel log", event),))
    from topodoc.rules.engine import Severity

    lost = [f for f in cycle.report.findings if f.rule == "kernel-xid"]
    assert lost and lost[0].severity.rank >= Severity.ERROR.rank


# ---- one reader: encodings ----------------------------------------------------------------------------


def _encodings(path: Path, folder: Path) -> list[Path]:
    text = path.read_text(encoding="utf-8")
    out = []
    for name, data in (
        ("utf8", text.encode("utf-8")),
        ("utf16le", text.encode("utf-16-le")),
        ("utf16le-bom", b"\xff\xfe" + text.encode("utf-16-le")),
        ("utf16be", text.encode("utf-16-be")),
        ("utf16be-bom", b"\xfe\xff" + text.encode("utf-16-be")),
        ("gz", gzip.compress(text.encode("utf-8"))),
    ):
        target = folder / f"{path.stem}-{name}{path.suffix}{'.gz' if name == 'gz' else ''}"
        target.write_bytes(data)
        out.append(target)
    return out


def _same(outputs: list[str], names: list[Path], original: Path) -> None:
    """Identical once each file's own name is put back to one name."""
    normal = [out.replace(str(name), "INPUT") for out, name in zip(outputs, names, strict=True)]
    assert all(n == normal[0] for n in normal), [n[:300] for n in normal if n != normal[0]][:1]


def test_one_log_in_every_encoding_reads_the_same_through_every_command(tmp_path: Path) -> None:
    files = _encodings(LOG, tmp_path)
    commands = (("logs", "{}", "--json"), ("diagnose", "{}", "--json"), ("diagnose", "--log", "{}", "--json"))
    for args in commands:
        outputs = [run_cli(*[a.format(f) for a in args]).stdout for f in files]
        assert outputs[0].strip(), args
        _same(outputs, files, LOG)


def test_one_nccl_tests_output_in_every_encoding_reads_the_same_through_every_command(tmp_path: Path) -> None:
    files = _encodings(TESTS, tmp_path)
    for args in (("nccltests", "{}", "--json"), ("diagnose", "--from", MACHINE, "{}", "--json"),
                 ("diagnose", "--from", MACHINE, "--nccl-tests", "{}", "--json")):
        outputs = [run_cli(*[a.format(f) for a in args]).stdout for f in files]
        assert outputs[0].strip(), args
        _same(outputs, files, TESTS)


def test_nothing_usable_is_exit_2_with_a_json_document(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("just some words\nnothing a tool printed\n")
    result = run_cli("diagnose", str(junk), "--json")
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["schema"] == "topodoc.diagnose" and "no input was recognized" in doc["error"]
    assert doc["inputs"]["files"][0]["path"] == str(junk)


def test_bare_channel_lines_and_a_known_failure_line_are_read_by_diagnose_file(tmp_path: Path) -> None:
    """Text no detector claims is still read by the log analyzer and the failure catalogue."""
    bare = tmp_path / "channels.txt"
    bare.write_text("3[3d000] -> 11[3d000] [receive] via NET/IB/1/GDRDMA\n"
                    "11[3d000] -> 3[3d000] [send] via NET/IB/1/GDRDMA\n")
    fm = tmp_path / "job.out"
    fm.write_text("starting training\n[rank2]: Cuda failure 802 'system not yet initialized'\nexiting\n")
    for path in (bare, fm):
        logs = run_cli("logs", str(path), "--json")
        result = run_cli("diagnose", str(path), "--json")
        assert result.returncode in (0, 1), result.stdout + result.stderr
        doc = json.loads(result.stdout)
        assert doc["inputs"]["files"][0]["kind"] == "nccl-log"
        if logs.returncode == 0:
            for error in json.loads(logs.stdout)["errors"]:
                assert any(e["where"] == f"{error['file']}:{error['line']}"
                           for f in doc["findings"] for e in f["evidence"]), error
    doc = json.loads(run_cli("diagnose", str(fm), "--json").stdout)
    assert any("802" in f["message"] or "Fabric Manager" in f["message"] for f in doc["findings"])


def test_a_paste_of_several_commands_is_read_region_by_region(tmp_path: Path) -> None:
    """Prompt, command, output, next prompt ...: each output goes to its own parser, line numbers kept."""
    topo = (ROOT / "fixtures" / "topo" / "dgx-a100-nv12-mlx5.txt").read_text()
    ibstat = (ROOT / "fixtures" / "text" / "ibstat" / "a100-one-port-down.txt").read_text()
    xid = "[ 1234.567890] NVRM: Xid (PCI:0000:07:00): 79, pid=0, GPU has fallen off the bus.\n"
    paste = (f"ops@node-a:~$ nvidia-smi topo -m\n{topo}\nops@node-a:~$ ibstat\n{ibstat}\n"
             f"ops@node-a:~$ sudo dmesg | grep -i xid\n{xid}")
    path = tmp_path / "issue.txt"
    path.write_text(paste)
    doc = _diagnose(str(path))
    (row,) = doc["inputs"]["files"]
    assert row["kind"] == "smi-topo" and {"ibstat", "dmesg"} <= set(row["also_read"])
    rules = set(_rules(doc))
    assert {"ib-port-down", "kernel-xid"} <= rules and "gpu-p2p-via-cpu" not in rules
    xid_line = paste.split("\n").index(xid.strip()) + 1
    where = [e["where"] for f in doc["findings"] if f["rule"] == "kernel-xid" for e in f["evidence"]]
    assert where == [f"{path}:{xid_line}"]
    down = next(f for f in doc["findings"] if f["rule"] == "ib-port-down")
    line = int(down["evidence"][0]["where"].rsplit(":", 1)[1])
    assert paste.split("\n")[line - 1].strip() and line > paste.count("\n", 0, paste.index("$ ibstat"))


def test_fleet_runs_the_one_pipeline_per_node(tmp_path: Path) -> None:
    """A node whose diagnosis has a finding no fingerprint property stands for (a lost GPU) differs."""
    probe = json.loads(run_cli("probe", "--from", MACHINE, "--json").stdout)
    for name in ("a", "b"):
        (tmp_path / f"{name}.json").write_text(json.dumps(probe))
    probe["gpus"][2]["lost"] = True
    (tmp_path / "c.json").write_text(json.dumps(probe))
    doc = json.loads(run_cli("fleet", *(str(tmp_path / f"{n}.json") for n in "abc"), "--json").stdout)
    lost = [d for d in doc["differences"] if d["key"] == "finding.gpu-lost"]
    assert lost and lost[0]["rule"] == "gpu-lost"
    assert [o["nodes"] for o in lost[0]["outliers"]] == [["c"]]
    from topodoc.diagnosis import Request, run

    snapshot = topodoc.load(str(tmp_path / "c.json"))
    assert "gpu-lost" in {f.rule for f in run(Request(snapshot=snapshot)).report.findings}


def test_a_recordings_fabric_manager_status_reaches_the_rules(tmp_path: Path) -> None:
    """Issue 23: what `record` kept beside the collectors' reads is served to the rules that read that kind
    of text (Fabric Manager's status: no collector reads it), citing the recording's command."""
    import tarfile

    from topodoc.probe.extras import FABRIC_MANAGER

    tree = tmp_path / "tree"
    with tarfile.open(ROOT / "fixtures" / "hosts" / "hgx-h100-8x400g-ib" / "recording.tar.gz") as archive:
        archive.extractall(tree, filter="data")
    commands = json.loads((tree / "commands.json").read_text())
    status = (ROOT / "fixtures" / "text" / "fabric-manager" / "systemctl-status-version-mismatch.txt")
    status = status.read_text()
    commands["commands"].append({"argv": list(FABRIC_MANAGER), "missing": False, "returncode": 3,
                                 "stderr": "", "stdout": status, "timed_out": False})
    (tree / "commands.json").write_text(json.dumps(commands))
    recording = tmp_path / "node.tar.gz"
    with tarfile.open(recording, "w:gz") as archive:
        for item in sorted(tree.iterdir()):
            archive.add(item, arcname=item.name)
    doc = _diagnose("--from", str(recording))
    found = [f for f in doc["findings"] if f["rule"].startswith("fabric-manager")]
    assert found, _rules(doc)
    assert any(e["where"].startswith(f"{recording}:systemctl status nvidia-fabricmanager")
               for f in found for e in f["evidence"])
    plain = _diagnose("--from", "example:hgx-h100-8x400g-ib")
    assert not [f for f in plain["findings"] if f["rule"].startswith("fabric-manager")]
