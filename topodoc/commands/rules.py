"""``topodoc rules [--json]``: list every rule diagnose runs."""

from __future__ import annotations

import click

EXAMPLE = """\b
Example:
  topodoc rules
  topodoc rules --json"""


@click.command(epilog=EXAMPLE)
@click.option(
    "--json", "as_json", is_flag=True, help="Print a list of {id, severity, title, tags, needs, fix}."
)
def command(as_json: bool) -> None:
    """List the rules `topodoc diagnose` applies (`topodoc explain ID` tells more about one)."""
    from topodoc.report.diagnose import rules_json, rules_text
    from topodoc.rules.registry import RULES

    if as_json:
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.rules", {"rules": rules_json(RULES)}))
    else:
        click.echo(rules_text(RULES), nl=False)
