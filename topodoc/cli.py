"""The ``topodoc`` command line: a thin click group whose commands live in ``topodoc.commands``.

Each module ``topodoc/commands/<name>.py`` defines one click command named ``command``; the group
finds them by module name without importing them, so ``topodoc --version`` stays fast and never
loads NVML, udev or rich. Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage,
input or internal error.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import NoReturn

import click

from topodoc import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        import pkgutil

        import topodoc.commands as pkg

        names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
        return sorted(name.replace("_", "-") for name in names)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """Import only the one command module asked for (no listing of the package, no other command)."""
        module_name = name.replace("-", "_")
        if not module_name.isidentifier() or module_name.startswith("_") or not module_name.islower():
            return None
        qualified = f"topodoc.commands.{module_name}"
        from topodoc import dataclass_code

        dataclass_code.install()  # the command's classes from compiled code kept per user
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as err:
            if err.name == qualified:  # no such command; a missing dependency inside one is a real error
                return None
            raise
        return getattr(module, "command", None)

    def invoke(self, ctx: click.Context):
        """Run the command; whatever escapes it exits 2 with one line, never 1 (the findings code)."""
        started = time.monotonic()
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
            from topodoc.parsers.xid_catalog import XidPolicyError

            if isinstance(err, XidPolicyError):  # the operator's file, not a bug: say what is wrong with it
                _stop(f"topodoc: {err}", EXIT_ERROR)
            from topodoc.numbers import LimitError

            if isinstance(err, LimitError):  # a bound on input, reached: the input's fault, not a bug
                _stop(f"topodoc {ctx.invoked_subcommand or ''}: {err}".replace(" :", ":"), EXIT_ERROR)
            internal_error(err)
        finally:
            _timing(ctx, started)


def _timing(ctx: click.Context, started: float) -> None:
    """``-v``: how long the command took, on stderr."""
    from topodoc.report import console

    if ctx.invoked_subcommand and console.verbose():
        console.detail(f"topodoc {ctx.invoked_subcommand}", f"took {time.monotonic() - started:.2f} s")


DEBUG_ENV = "TOPODOC_DEBUG"


def internal_error(err: BaseException) -> NoReturn:
    """A bug in topodoc: one line naming it (the traceback only with TOPODOC_DEBUG=1), exit 2."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    detail = " ".join(f"{type(err).__name__}: {err}".split())
    if len(detail) > 300:
        detail = detail[:300] + "..."
    _stop(f"topodoc: internal error: {detail} (a bug in topodoc: please report it with the command line; "
          f"{DEBUG_ENV}=1 shows the traceback)", EXIT_ERROR)


def _stop(message: str, code: int) -> NoReturn:
    from topodoc.report.safe import visible  # an error may quote input: no terminal controls from it

    click.echo(visible(message), err=True)
    sys.exit(code)


def _output_closed() -> NoReturn:
    """stdout was closed under us (``| head``): stop quietly, and keep Python from failing again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(EXIT_ERROR)


def _version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"topodoc, version {__version__}")
    if {"-v", "--verbose"} & set(sys.argv[1:]):
        from topodoc.parsers.nccl_log import scan

        where = f" ({scan._C.__file__})" if scan._C is not None else ""
        click.echo(f"log scanner: {scan.engine()}{where}")
    ctx.exit()


EXAMPLE = """\b
Example:
  topodoc examples
  topodoc diagnose --from example:dgx-a100-degraded-no-peermem
  topodoc --color never -q logs rank0.log rank1.log"""


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXAMPLE)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit (with -v: which log scanner core runs).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour: auto is on a terminal unless NO_COLOR is set; always beats NO_COLOR.")
@click.option("-q", "--quiet", is_flag=True, help="Only findings and errors: no notes, no progress.")
@click.option("-v", "--verbose", is_flag=True, help="Extra detail on stderr, such as timings.")
def main(color: str, quiet: bool, verbose: bool) -> None:
    """Explain how a GPU server is wired, which transport NCCL uses, and why collectives are slow.

    Try it without a GPU: `topodoc examples`, then `topodoc topo --from example:<name>`.
    """
    from topodoc.report import color as color_choice
    from topodoc.report import console

    if quiet and verbose:
        raise click.UsageError("give either --quiet or --verbose")
    color_choice.set_choice(color)
    # click.echo strips ANSI codes from output that is not a terminal unless the context says otherwise
    click.get_current_context().color = {"always": True, "never": False}.get(color)
    console.set_level(console.QUIET if quiet else console.VERBOSE if verbose else console.NORMAL)
    if os.environ.get("TOPODOC_XID_POLICY", "").strip():  # the operator's Xid policy: refused up front
        from topodoc.parsers import xid_catalog

        try:
            xid_catalog.policy()
        except xid_catalog.XidPolicyError as err:
            _stop(f"topodoc: {err}", EXIT_ERROR)
