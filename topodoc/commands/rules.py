"""``topodoc rules [--json]``: list every rule diagnose runs."""

from __future__ import annotations

import json

import click


@click.command()
@click.option(
    "--json", "as_json", is_flag=True, help="Print a list of {id, severity, title, tags, needs, fix}."
)
def command(as_json: bool) -> None:
    """List the rules `topodoc diagnose` applies (`topodoc explain ID` tells more about one)."""
    from topodoc.report.diagnose import rules_json, rules_text
    from topodoc.rules.registry import RULES

    if as_json:
        click.echo(json.dumps(rules_json(RULES), indent=2))
    else:
        click.echo(rules_text(RULES), nl=False)
