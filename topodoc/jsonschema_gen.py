"""JSON Schemas (draft 2020-12) for every ``--json`` document, generated from the model's type hints.

The hints are the ones :mod:`topodoc.codec` decodes with, so a schema cannot drift from the data: a
dataclass is a closed object in ``$defs`` (every field required: ``codec.to_data`` writes them all),
``X | None`` is ``anyOf`` with null, tuples and lists are arrays, ``dict[str, V]`` an object of ``V``,
an Enum its values. A document is its root dataclass's fields (inlined at the top) plus the keys the
command adds around it (``DOCUMENTS``), after ``schema`` and ``schema_version``.

Regenerate the shipped files (``topodoc/schemas/<name>.json``) after a model change with::

    python -m topodoc.jsonschema_gen --write

It refuses when a schema changed but its version in ``topodoc.schema_versions.VERSIONS`` did not:
bump it, add a line to ``docs/CHANGELOG.md``, and run it again. ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"
VERSIONS_FILE = SCHEMAS_DIR / "versions.json"


@dataclass(frozen=True)
class Obj:
    """A closed object that is not a dataclass (keys that are not Python names): key -> type hint."""

    title: str
    required: dict[str, Any]
    optional: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Doc:
    """One ``--json`` document: its root dataclass (fields inlined at the top level, or None) and
    the keys the command adds (``optional`` names those that are not always there)."""

    description: str
    root: type | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    optional: tuple[str, ...] = ()
    def_extras: dict[type, dict[str, Any]] = field(default_factory=dict)  # properties a def adds


def documents() -> dict[str, Doc]:
    """Every document by schema name. Imported lazily: the types live all over the package."""
    from topodoc import logmodel, model
    from topodoc.agent.events import AgentEvent
    from topodoc.bandwidth.estimate import ClusterEstimate, TpEstimate
    from topodoc.bandwidth.model import BandwidthModel
    from topodoc.commands.examples import Example
    from topodoc.fabric.check import CheckResult
    from topodoc.fabric.plan import FabricPlan
    from topodoc.fleet.compare import Difference, FleetReport
    from topodoc.fleet.raillog import RailMap
    from topodoc.report.diagnose import RuleRow
    from topodoc.rules.engine import Report
    from topodoc.topology.reading import Reading
    from topodoc.topology.types import CellDiff, MachineShape

    file_row = Obj(
        "DiagnoseInputFile",
        {"path": str, "kind": str, "taken_as": str},
        {"also_contains": list[str], "also_read": list[str], "note": str, "damaged": list[str]},
    )
    inputs = Obj(
        "DiagnoseInputs",
        {"hardware": str | None, "log": str | None, "nccl-tests": str | None},
        {"files": list[file_row], "notes": list[str], "kernel-log": str | None},  # diagnose FILE...
    )
    return {
        "topodoc.snapshot": Doc("topodoc probe --json: everything the collectors saw on one machine.",
                                model.Snapshot),
        "topodoc.topo": Doc(
            "topodoc topo --json: an nvidia-smi topology matrix and its reading; with --from, the derived "
            "matrix plus the machine's shape, NCCL's path types and the cells nvidia-smi disagrees on.",
            model.ConnectionMatrix,
            {"reading": Reading, "machine": MachineShape, "nccl_paths": dict[str, dict[str, str]],
             "smi_diffs": list[CellDiff] | None},
            optional=("machine", "nccl_paths", "smi_diffs"),
        ),
        "topodoc.logs": Doc("topodoc logs --json: what the NCCL logs say, every claim with evidence.",
                            logmodel.LogAnalysis),
        "topodoc.nccltests": Doc("topodoc nccltests --json: the nccl-tests runs in the input.", None,
                                 {"runs": list[model.NcclTestsRun]}),
        "topodoc.diagnose": Doc(
            "topodoc diagnose --json (also with FILE...): the findings worst first, skipped rules, errors.",
            Report, {"inputs": inputs, "summary": dict[str, int], "error": str}, optional=("error",),
        ),
        "topodoc.bandwidth": Doc("topodoc bandwidth --json: expected bandwidth per pair and collective.",
                                 BandwidthModel),
        "topodoc.rules": Doc("topodoc rules --json: every rule diagnose runs.", None,
                             {"rules": list[RuleRow]}),
        "topodoc.examples": Doc("topodoc examples --json: the bundled recordings.", None,
                                {"examples": list[Example]}),
        "topodoc.estimate": Doc("topodoc estimate tp --json: tensor-parallel communication estimate.",
                                TpEstimate),
        "topodoc.estimate-cluster": Doc(
            "topodoc estimate cluster --json: cross-node collectives of a TP/PP/DP/EP job per step.",
            ClusterEstimate,
        ),
        "topodoc.fleet": Doc(
            "topodoc fleet --json: nodes grouped by fingerprint, their differences, rails from logs.",
            FleetReport, {"rails": RailMap | None}, def_extras={Difference: {"split": bool}},
        ),
        "topodoc.fabric": Doc(
            "topodoc fabric plan --json: a rail-optimised Clos / fat-tree fabric for N nodes.", FabricPlan
        ),
        "topodoc.fabric-check": Doc("topodoc fabric check --json: a fleet compared with a fabric plan.",
                                    CheckResult),
        **_agent_documents(Report, inputs, AgentEvent),
    }


def _agent_documents(report: type, inputs: Obj, event: type) -> dict[str, Doc]:
    """What ``topodoc agent`` serves on ``/findings`` and ``/events`` (``topodoc/agent/runner.py``)."""
    tracked = Obj("AgentTrackedFinding", {
        "scope": str, "rule": str, "subject": str, "severity": str, "status": str, "first_seen": str,
        "last_seen": str, "resolved_at": str | None, "message": str})
    log_finding = Obj("AgentLogFinding", {"rule": str, "severity": str, "subject": str, "message": str})
    log = Obj("AgentWatchedLog", {
        "nccl_lines_seen": bool, "transport": str | None, "gdr": bool | None, "kept_bytes": int,
        "restarts": int, "error": str | None, "findings": list[log_finding]})
    state = Obj("AgentState", {"cycles": int, "last_cycle": str | None, "cycle_errors": list[str],
                               "tracked": list[tracked], "logs": dict[str, log]})
    count = Obj("AgentEventCount", {"kind": str, "code": str, "device": str, "count": int})
    return {
        "topodoc.agent-findings": Doc(
            "topodoc agent /findings: the last cycle's diagnose --json data and the agent's state; "
            "ready is false (HTTP 503, no findings) until the first cycle has run.",
            report, {"inputs": inputs, "summary": dict[str, int], "ready": bool, "agent": state},
        ),
        "topodoc.agent-events": Doc(
            "topodoc agent /events: the recent hardware events joined to the topology, and counts.", None,
            {"events": list[event], "counts": list[count]}, def_extras={event: {"time_iso": str}},
        ),
    }


class _Builder:
    def __init__(self, def_extras: dict[type, dict[str, Any]]):
        self.defs: dict[str, dict] = {}
        self.names: dict[object, str] = {}
        self.def_extras = def_extras

    def schema(self, tp: Any) -> dict:
        if tp is Any:
            return {}
        if tp is type(None) or tp is None:
            return {"type": "null"}
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return self._union(typing.get_args(tp))
        if origin is typing.Literal:
            return {"enum": list(typing.get_args(tp))}
        is_enum = isinstance(tp, type) and issubclass(tp, Enum)
        if isinstance(tp, Obj) or dataclasses.is_dataclass(tp) or is_enum:
            return {"$ref": f"#/$defs/{self._define(tp)}"}
        if origin is tuple:
            return self._tuple(typing.get_args(tp))
        if origin is list:
            return {"type": "array", "items": self.schema(typing.get_args(tp)[0])}
        if origin is dict:
            _key, value = typing.get_args(tp)
            return {"type": "object", "additionalProperties": self.schema(value)}
        simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
        if tp in simple:
            return {"type": simple[tp]}
        raise TypeError(f"no JSON Schema for the type hint {tp!r}")

    def _union(self, args: tuple) -> dict:
        options = [self.schema(a) for a in args]
        if all(set(o) == {"type"} for o in options):
            return {"type": [o["type"] for o in options]}
        return {"anyOf": options}

    def _tuple(self, args: tuple) -> dict:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": self.schema(args[0])}
        items = [self.schema(a) for a in args]
        return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items),
                "maxItems": len(items)}

    def _define(self, tp: Any) -> str:
        key = id(tp) if isinstance(tp, Obj) else tp  # an Obj holds dicts: not hashable
        if key in self.names:
            return self.names[key]
        name = tp.title if isinstance(tp, Obj) else tp.__name__
        if name in self.defs:  # two types of one name: qualify the later one with its module
            name = f"{tp.__module__.rsplit('.', 1)[-1]}.{name}"
        self.names[key] = name
        self.defs[name] = {}  # placeholder: recursive types refer to it while it is built
        if isinstance(tp, Obj):
            self.defs[name] = self.closed_object(tp.required, tp.optional)
        elif dataclasses.is_dataclass(tp):
            self.defs[name] = self.dataclass_object(tp)
        else:
            self.defs[name] = {"enum": [m.value for m in tp]}
        return name

    def dataclass_object(self, cls: type, overrides: dict[str, dict] | None = None) -> dict:
        hints = _hints(cls)
        props = {f.name: self.schema(hints[f.name]) for f in dataclasses.fields(cls)}
        props.update(overrides or {})
        extra = {k: self.schema(v) for k, v in self.def_extras.get(cls, {}).items()}
        obj = {"type": "object", "properties": {**props, **extra}, "required": [*props, *extra],
               "additionalProperties": False}
        doc = (cls.__doc__ or "").strip()
        if doc and not doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature: no doc
            obj = {"description": " ".join(doc.split("\n\n")[0].split()), **obj}
        return obj

    def closed_object(self, required: dict[str, Any], optional: dict[str, Any]) -> dict:
        props = {k: self.schema(v) for k, v in {**required, **optional}.items()}
        return {"type": "object", "properties": props, "required": list(required),
                "additionalProperties": False}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def generate(name: str, version: int, doc: Doc) -> dict:
    """The JSON Schema of one document."""
    builder = _Builder(doc.def_extras)
    head = {"schema": {"const": name}, "schema_version": {"const": version}}
    if doc.root is not None:
        top = builder.dataclass_object(doc.root, head)
        props = {**head, **{k: v for k, v in top["properties"].items() if k not in head}}
    else:
        props = dict(head)
    for key, hint in doc.extra.items():
        props[key] = builder.schema(hint)
    required = [k for k in props if k not in doc.optional]
    out = {"$schema": DRAFT, "$id": f"https://topodoc.invalid/schemas/{name}/{version}.json",
           "title": name, "description": doc.description, "type": "object", "properties": props,
           "required": required, "additionalProperties": False}
    if builder.defs:
        out["$defs"] = dict(sorted(builder.defs.items()))
    return out


def generate_all() -> dict[str, dict]:
    from topodoc.report.document import VERSIONS

    docs = documents()
    missing = set(VERSIONS) ^ set(docs)
    if missing:
        raise RuntimeError(f"documents and VERSIONS disagree on {sorted(missing)}")
    return {name: generate(name, VERSIONS[name], docs[name]) for name in VERSIONS}


def text(schema: dict) -> str:
    """The one spelling of a schema file (its hash is what versions.json records)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def digest(schema: dict) -> str:
    return hashlib.sha256(text(schema).encode()).hexdigest()


def load_versions() -> dict[str, dict[str, str]]:
    return json.loads(VERSIONS_FILE.read_text()) if VERSIONS_FILE.exists() else {}


def unbumped(schemas: dict[str, dict], record: dict[str, dict[str, str]]) -> list[str]:
    """Names whose schema differs from the hash recorded for their current version."""
    from topodoc.report.document import VERSIONS

    out = []
    for name, schema in schemas.items():
        known = record.get(name, {}).get(str(VERSIONS[name]))
        if known is not None and known != digest(schema):
            out.append(f"{name} version {VERSIONS[name]}")
    return out


def write(say: Callable[[str], None] = print) -> int:
    schemas = generate_all()
    record = load_versions()
    stale = unbumped(schemas, record)
    if stale:
        say("schemas changed without a version bump: " + ", ".join(stale))
        say("bump them in topodoc/schema_versions.py, add a line to docs/CHANGELOG.md, rerun")
        return 1
    from topodoc.report.document import VERSIONS

    SCHEMAS_DIR.mkdir(exist_ok=True)
    for name, schema in schemas.items():
        path = SCHEMAS_DIR / f"{name}.json"
        new = text(schema)
        if not path.exists() or path.read_text() != new:
            path.write_text(new)
            say(f"wrote {path.name}")
        record.setdefault(name, {})[str(VERSIONS[name])] = digest(schema)
    VERSIONS_FILE.write_text(json.dumps(dict(sorted(record.items())), indent=2) + "\n")
    return 0


def check(say: Callable[[str], None] = print) -> int:
    """0 when every shipped file equals its generated schema and every version hash is recorded."""
    from topodoc.report.document import VERSIONS

    schemas, record, bad = generate_all(), load_versions(), []
    for name, schema in schemas.items():
        path = SCHEMAS_DIR / f"{name}.json"
        if not path.exists() or path.read_text() != text(schema):
            bad.append(f"{path.name} is not what the model generates")
        if record.get(name, {}).get(str(VERSIONS[name])) != digest(schema):
            bad.append(f"{name} version {VERSIONS[name]} is not recorded with this schema's hash")
    for line in bad:
        say(line)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topodoc.jsonschema_gen", description="JSON Schemas.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="rewrite topodoc/schemas/*.json, versions.json")
    group.add_argument("--check", action="store_true", help="exit 1 when a shipped schema is stale")
    args = parser.parse_args(argv)
    return write() if args.write else check()


if __name__ == "__main__":
    sys.exit(main())
