"""Versioned JSON: every ``--json`` document names its schema, the shipped JSON Schemas are the generated
ones, a schema never changes without a version bump (and a changelog line), and the real output of
every command validates against its schema with the ``jsonschema`` validator."""

import json
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import run_cli, run_cli_process
from jsonschema import Draft202012Validator

from topodoc import jsonschema_gen
from topodoc.report.document import VERSIONS, document

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((jsonschema_gen.SCHEMAS_DIR / f"{name}.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _valid(stdout: str, name: str) -> dict:
    data = json.loads(stdout)
    assert (data["schema"], data["schema_version"]) == (name, VERSIONS[name])
    assert list(data)[:2] == ["schema", "schema_version"]
    errors = sorted(_validator(name).iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:5])
    return data


# -- the shipped files and the version record ---------------------------------------------------------

def test_shipped_schemas_are_the_generated_ones():
    lines: list[str] = []
    assert jsonschema_gen.check(lines.append) == 0, "\n".join(lines) + (
        "\nrun: python -m topodoc.jsonschema_gen --write"
    )
    shipped = {p.stem for p in jsonschema_gen.SCHEMAS_DIR.glob("topodoc.*.json")}
    assert shipped == set(VERSIONS)


def test_a_schema_change_without_a_version_bump_is_caught():
    schemas = jsonschema_gen.generate_all()
    record = jsonschema_gen.load_versions()
    assert jsonschema_gen.unbumped(schemas, record) == []
    changed = json.loads(json.dumps(schemas["topodoc.rules"]))
    changed["$defs"]["RuleRow"]["properties"]["owner"] = {"type": "string"}
    assert jsonschema_gen.unbumped({**schemas, "topodoc.rules": changed}, record) == [
        f"topodoc.rules version {VERSIONS['topodoc.rules']}"
    ]


def test_every_version_has_a_changelog_line():
    changelog = (ROOT / "docs" / "CHANGELOG.md").read_text()
    for name, versions in jsonschema_gen.load_versions().items():
        for version in versions:
            assert re.search(rf"`{re.escape(name)}` {version}\b", changelog), f"{name} {version}"


def test_documents_name_their_schema_first_and_agree_with_the_models():
    from topodoc import model
    from topodoc.fleet import compare

    doc = document("topodoc.rules", {"rules": [], "schema": "x"})
    assert list(doc) == ["schema", "schema_version", "rules"] and doc["schema"] == "topodoc.rules"
    assert VERSIONS[model.SCHEMA] == model.SCHEMA_VERSION
    assert VERSIONS[compare.SCHEMA] == compare.SCHEMA_VERSION
    with pytest.raises(KeyError):
        document("topodoc.nothing", {})


def test_schemas_are_closed_and_require_every_field():
    schema = json.loads((jsonschema_gen.SCHEMAS_DIR / "topodoc.snapshot.json").read_text())
    gpu = schema["$defs"]["Gpu"]
    assert gpu["additionalProperties"] is False and set(gpu["required"]) == set(gpu["properties"])
    assert schema["$defs"]["GapReason"]["enum"] == ["unsupported", "missing", "permission", "error",
                                                    "not_recorded"]
    bad = json.loads(run_cli("probe", "--from", "example:dgx-a100", "--json").stdout)
    bad["gpus"][0]["surprise"] = 1
    assert not _validator("topodoc.snapshot").is_valid(bad)


# -- every command's real output ----------------------------------------------------------------------

EXAMPLES = ("dgx-a100", "hgx-h100-8x400g-ib", "gb200-nvl72-tray", "vm-1s-virtio-nogpu",
            "dgx-a100-degraded-no-peermem")


@pytest.mark.parametrize("example", EXAMPLES)
def test_machine_commands_validate(example):
    src = f"example:{example}"
    _valid(run_cli("probe", "--from", src, "--json").stdout, "topodoc.snapshot")
    _valid(run_cli("topo", "--from", src, "--json").stdout, "topodoc.topo")
    _valid(run_cli("diagnose", "--from", src, "--json", "--fail-on", "critical").stdout, "topodoc.diagnose")
    bandwidth = run_cli("bandwidth", "--from", src, "--json")
    if bandwidth.returncode == 0:  # a machine without GPUs has no bandwidth model: exit 2, one line
        _valid(bandwidth.stdout, "topodoc.bandwidth")


@pytest.mark.parametrize("path", sorted(FIX.glob("topo/*.txt")), ids=lambda p: p.stem)
def test_topo_validates(path):
    result = run_cli("topo", str(path), "--json")
    assert result.returncode == 0, result.stderr
    _valid(result.stdout, "topodoc.topo")


@pytest.mark.parametrize("path", sorted(FIX.glob("logs/*.log")), ids=lambda p: p.stem)
def test_logs_validate(path):
    result = run_cli("logs", str(path), "--json")
    assert result.returncode == 0, result.stderr
    _valid(result.stdout, "topodoc.logs")


@pytest.mark.parametrize("path", sorted(FIX.glob("nccl_tests/*.txt")), ids=lambda p: p.stem)
def test_nccltests_validate(path):
    result = run_cli("nccltests", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = _valid(result.stdout, "topodoc.nccltests")
    assert data["runs"] and all(run["rows"] is not None for run in data["runs"])


@pytest.mark.parametrize("path", sorted(FIX.glob("text/cases/*.txt")), ids=lambda p: p.stem)
def test_diagnose_files_validate(path):
    result = run_cli("diagnose", "--json", "--fail-on", "critical", str(path))
    assert result.returncode == 0, result.stderr
    data = _valid(result.stdout, "topodoc.diagnose")
    assert data["inputs"]["files"][0]["path"] == str(path)


def test_diagnose_with_logs_and_nccl_tests_validates():
    log = FIX / "logs" / sorted(p.name for p in FIX.glob("logs/*.log"))[0]
    tests = FIX / "nccl_tests" / "all-reduce-8xa100-nvswitch.txt"
    result = run_cli("diagnose", "--from", "example:dgx-a100", "--log", str(log), "--nccl-tests", str(tests),
                     "--json", "--fail-on", "critical")
    assert result.returncode == 0, result.stderr
    data = _valid(result.stdout, "topodoc.diagnose")
    assert data["inputs"]["nccl-tests"] == str(tests)


def test_listing_commands_validate():
    rules = _valid(run_cli("rules", "--json").stdout, "topodoc.rules")
    assert len(rules["rules"]) > 10
    examples = _valid(run_cli("examples", "--json").stdout, "topodoc.examples")
    assert {e["name"] for e in examples["examples"]} >= set(EXAMPLES)
    estimate = run_cli("estimate", "tp", "--layers", "48", "--hidden", "8192", "--seq", "4096", "--tp", "8",
                       "--bandwidth", "23:29", "--json")
    _valid(estimate.stdout, "topodoc.estimate")


def test_fleet_validates(tmp_path):
    from topodoc.examples_index import example_path

    for n, name in enumerate(("dgx-a100", "dgx-a100", "dgx-a100-degraded-gpu-x8")):
        (tmp_path / f"node{n}.tar.gz").write_bytes(example_path(name).read_bytes())
    probe = tmp_path / "node3.json"
    probe.write_text(run_cli("probe", "--from", "example:dgx-a100", "--json").stdout)
    logs = [arg for p in sorted(FIX.glob("logs/*.log")) for arg in ("--logs", str(p))]  # one file per --logs
    result = run_cli_process("fleet", str(tmp_path), *logs, "--json", "--fail-on", "critical")
    assert result.returncode in (0, 1), result.stderr
    data = _valid(result.stdout, "topodoc.fleet")
    assert data["nodes"] == 4 and data["differences"]


def test_real_process_output_validates():
    """One real ``python -m topodoc`` run per document kind that the in-process runs above also cover."""
    result = run_cli_process("probe", "--from", "example:hgx-h100-8x400g-ib", "--json")
    assert result.returncode == 0, result.stderr
    _valid(result.stdout, "topodoc.snapshot")


def test_schema_command_lists_and_prints():
    listed = run_cli("schema")
    assert listed.returncode == 0 and listed.stdout.split() == sorted(VERSIONS)
    printed = run_cli("schema", "topodoc.logs")
    shipped = (jsonschema_gen.SCHEMAS_DIR / "topodoc.logs.json").read_text()
    assert printed.stdout == shipped
    assert json.loads(run_cli("schema", "logs").stdout)["title"] == "topodoc.logs"
    unknown = run_cli("schema", "nope")
    assert unknown.returncode == 2 and "topodoc.snapshot" in unknown.stderr
