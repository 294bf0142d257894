"""``topodoc completion bash|zsh|fish``: print the shell completion script (click's own)."""

from __future__ import annotations

import click


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def command(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    Example:
      topodoc completion bash > ~/.local/share/bash-completion/completions/topodoc
      eval "$(topodoc completion zsh)"
    """
    from click.shell_completion import get_completion_class

    from topodoc.cli import main

    cls = get_completion_class(shell)
    comp = cls(main, {}, "topodoc", "_TOPODOC_COMPLETE")
    click.echo(comp.source())
