"""The ``topodoc`` command line: a thin click group whose commands live in ``topodoc.commands``.

Each module ``topodoc/commands/<name>.py`` defines one click command named ``command``; the group
finds them by module name without importing them, so ``topodoc --version`` stays fast and never
loads NVML, udev or rich. Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage,
input or internal error.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import traceback
from typing import NoReturn

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

    def invoke(self, ctx: click.Context):
        """Run the command; whatever escapes it exits 2 with one line, never 1 (the findings code)."""
        try:
            return super().invoke(ctx)
        except click.ClickException as err:
            if err.exit_code == EXIT_FINDINGS:  # click's own default for a plain ClickException
                err.exit_code = EXIT_ERROR
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except (KeyboardInterrupt, EOFError):
            _stop("topodoc: interrupted", EXIT_ERROR)
        except BrokenPipeError:
            _output_closed()
        except Exception as err:
            internal_error(err)


DEBUG_ENV = "TOPODOC_DEBUG"


def internal_error(err: BaseException) -> NoReturn:
    """A bug in topodoc: one line naming it (the traceback only with TOPODOC_DEBUG=1), exit 2."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    detail = " ".join(f"{type(err).__name__}: {err}".split())
    if len(detail) > 300:
        detail = detail[:300] + "..."
    _stop(f"topodoc: internal error: {detail} (a bug in topodoc: please report it with the command line; "
          f"{DEBUG_ENV}=1 shows the traceback)", EXIT_ERROR)


def _stop(message: str, code: int) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(code)


def _output_closed() -> NoReturn:
    """stdout was closed under us (``| head``): stop quietly, and keep Python from failing again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(EXIT_ERROR)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topodoc")
def main() -> None:
    """Explain how a GPU server is wired, which transport NCCL uses, and why collectives are slow.

    Try it without a GPU: `topodoc examples`, then `topodoc topo --from example:<name>`.
    """
