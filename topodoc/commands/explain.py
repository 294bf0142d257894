"""``topodoc explain ID``: print a rule's documentation."""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc explain pcie-width-reduced"""


@click.command(epilog=EXAMPLE)
@click.argument("rule_id", metavar="ID")
def command(rule_id: str) -> None:
    """Explain rule ID: what it checks, why it matters, how to fix it, an example."""
    from topodoc.rules.engine import read_doc
    from topodoc.rules.registry import UnknownRule, get

    try:
        item = get(rule_id)
        text = read_doc(item)
    except (UnknownRule, OSError) as err:
        click.echo(visible(f"topodoc explain: {err}"), err=True)
        sys.exit(EXIT_ERROR)
    click.echo(
        f"severity: {item.severity.value} · tags: {', '.join(item.tags)} · needs: {', '.join(item.needs)}\n"
    )
    click.echo(text.rstrip())
    click.echo(f"\nfix in one line: {item.fix}")
