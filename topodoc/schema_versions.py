"""The version of every ``--json`` document topodoc prints, spelled once.

``topodoc.report.document`` puts them first in every document; ``topodoc.model.SCHEMA_VERSION`` and the
fleet report's version are read from here; ``python -m topodoc.jsonschema_gen`` refuses a changed schema
whose version here was not bumped. A tiny module with no imports, so that printing a document loads
neither the machine model nor the fleet.
"""

VERSIONS: dict[str, int] = {
    "topodoc.snapshot": 3,  # 1 was {"schema": 1, ...}, 2 had no health values; codec.load reads both
    "topodoc.topo": 2,
    "topodoc.logs": 3,
    "topodoc.nccltests": 1,
    "topodoc.diagnose": 3,
    "topodoc.bandwidth": 1,
    "topodoc.rules": 1,
    "topodoc.examples": 1,
    "topodoc.estimate": 1,
    "topodoc.fleet": 2,
    "topodoc.fabric": 1,
    "topodoc.fabric-check": 1,
    "topodoc.estimate-cluster": 1,
    "topodoc.agent-findings": 1,
    "topodoc.agent-events": 1,
}
