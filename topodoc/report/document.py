"""Every ``--json`` document topodoc prints: its schema name and version, put first, in one place.

A document is ``{"schema": "topodoc.<name>", "schema_version": N, ...data}``. ``VERSIONS``
(:mod:`topodoc.schema_versions`) is the one record of the current versions; the JSON Schemas in
``topodoc/schemas/`` are generated from the model's type hints (``python -m topodoc.jsonschema_gen
--write``) and a change to a schema without a bump there fails the tests
(``topodoc/schemas/versions.json`` keeps the hash of every released version).
"""

from __future__ import annotations

import json
from typing import Any

from topodoc.schema_versions import VERSIONS  # the one place each version is spelled


def document(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``schema`` and ``schema_version`` first (any of ``data``'s own are replaced)."""
    if name not in VERSIONS:
        raise KeyError(f"no schema named {name!r}")
    rest = {k: v for k, v in data.items() if k not in ("schema", "schema_version")}
    return {"schema": name, "schema_version": VERSIONS[name], **rest}


def dumps(name: str, data: dict[str, Any], **kwargs: Any) -> str:
    """The document as JSON text (``indent=2`` unless given)."""
    kwargs.setdefault("indent", 2)
    return json.dumps(document(name, data), **kwargs)
