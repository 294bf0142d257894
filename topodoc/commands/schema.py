"""``topodoc schema [NAME]``: the JSON Schema (draft 2020-12) of a ``--json`` document, or their names."""

from __future__ import annotations

import sys
from importlib import resources

import click

from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc schema
  topodoc schema diagnose > diagnose.schema.json"""


@click.command(epilog=EXAMPLE)
@click.argument("name", required=False)
def command(name: str | None) -> None:
    """Print the JSON Schema of a --json document (topodoc.diagnose, or just diagnose); no NAME lists them.

    Every --json document starts with "schema" (the name) and "schema_version"; a change that breaks a
    schema bumps its version (docs/CHANGELOG.md).
    """
    from topodoc.report.document import VERSIONS

    if name is None:
        click.echo("\n".join(sorted(VERSIONS)))
        return
    full = name if name in VERSIONS else f"topodoc.{name}"
    if full not in VERSIONS:
        known = ", ".join(sorted(VERSIONS))
        click.echo(visible(f"topodoc schema: no schema named {name!r}; known: {known}"), err=True)
        sys.exit(2)
    text = resources.files("topodoc.schemas").joinpath(f"{full}.json").read_text(encoding="utf-8")
    click.echo(text, nl=False)
