"""The ``topodoc`` command line: a thin click group whose commands live in ``topodoc.commands``.

Each module ``topodoc/commands/<name>.py`` defines one click command named ``command``; the group
finds them by module name without importing them, so ``topodoc --version`` stays fast and never
loads NVML, udev or rich. Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage,
input or internal error.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

from topodoc import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        import topodoc.commands as pkg

        names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
        return sorted(name.replace("_", "-") for name in names)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.list_commands(ctx):
            return None
        module = importlib.import_module(f"topodoc.commands.{name.replace('-', '_')}")
        return module.command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topodoc")
def main() -> None:
    """Explain how a GPU server is wired, which transport NCCL uses, and why collectives are slow.

    Try it without a GPU: `topodoc examples`, then `topodoc topo --from example:<name>`.
    """
