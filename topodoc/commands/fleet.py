"""``topodoc fleet INPUT... [--logs PATH...] [--json | --csv] [--fail-on SEVERITY] [--jobs N]
[--deadline S] [--allow-missing]``.

Compares nodes that should be identical: recordings, ``example:NAME``, directories of them, ``probe
--json`` snapshots, agent documents or agent URLs, one node per input. Exit: 0 no difference at or
above ``--fail-on``, 1 one is, 2 bad usage, no readable node, an input that could not be read (unless
``--allow-missing``; such inputs are always listed), or an internal error.
"""

from __future__ import annotations

import sys

import click

from topodoc.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK

SEVERITIES = ("info", "warning", "error", "critical")
DEFAULT_DEADLINE_S = 600.0


EXAMPLE = """\b
Example:
  srun --nodes=$N --ntasks-per-node=1 bash -c \\
      'topodoc record --redact -o /shared/recs/$SLURMD_NODENAME.tar.gz'
  topodoc fleet /shared/recs --fail-on warning
  kubectl -n topodoc get pods -l app.kubernetes.io/name=topodoc-agent \\
      -o jsonpath='{range .items[*]}http://{.status.podIP}:9612 {end}' | xargs topodoc fleet
  topodoc fleet example:dgx-a100 example:dgx-a100-degraded-gpu-x8"""


@click.command(epilog=EXAMPLE)
@click.argument("inputs", nargs=-1, metavar="INPUT...")
@click.option(
    "--logs",
    "logs",
    multiple=True,
    metavar="PATH",
    help="NCCL logs from many nodes (repeatable; directories are walked): adds the rail map.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (schema topodoc.fleet).")
@click.option("--csv", "as_csv", is_flag=True, help="One CSV row per node and differing property.")
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default="error",
    show_default=True,
    help="Exit 1 when a difference is at least this severe.",
)
@click.option(
    "--jobs", type=click.IntRange(1, 64), default=None, help="Processes to use (default: the cores)."
)
@click.option(
    "--deadline",
    type=click.FloatRange(1, 86400),
    default=DEFAULT_DEADLINE_S,
    show_default=True,
    metavar="SECONDS",
    help="Read no input after this many seconds; what was not read is listed (each agent URL also has "
    "its own 10 s limit for the whole answer).",
)
@click.option(
    "--auth-token-file",
    metavar="FILE",
    help="Send the token in FILE as 'Authorization: Bearer' to agent URLs (agents listening beyond "
    "loopback ask for one).",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Inputs that could not be read do not make the exit code 2 (they are still listed).",
)
def command(
    inputs: tuple[str, ...],
    logs: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
    fail_on: str,
    jobs: int | None,
    deadline: float,
    auth_token_file: str | None,
    allow_missing: bool,
) -> None:
    """Find the odd node out across servers that should be identical."""
    from topodoc.fleet.compare import compare
    from topodoc.fleet.nodes import expand, load_all

    if not inputs and not logs:
        _fail("give recordings, snapshots, directories or agent URLs to compare")
    if as_json and as_csv:
        _fail("give either --json or --csv")
    from topodoc.report.console import progress

    token = _token(auth_token_file) if auth_token_file else None
    items, errors = expand(inputs)
    with progress(f"topodoc fleet: comparing {len(items)} input(s)"):
        groups, load_errors = load_all(items, jobs, deadline, token)
        report = compare(groups, errors + load_errors)
    with progress(f"topodoc fleet: reading {len(logs)} log(s)"):
        rails = _rails(logs) if logs else None
    _emit(report, rails, as_json, as_csv)
    if report.errors and not allow_missing:
        click.echo(
            f"topodoc fleet: {len(report.errors)} input(s) could not be read (listed above); exit 2 "
            "(--allow-missing compares what was read and gates on its differences only)",
            err=True,
        )
        sys.exit(EXIT_ERROR)
    if report.nodes == 0 and rails is None:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if _gate(report, rails, fail_on) else EXIT_OK)


def _token(path: str) -> str:
    from topodoc.fleet.fetch import FetchError, read_file

    try:
        token = read_file(path, 4096).decode("utf-8").strip()
    except (FetchError, UnicodeDecodeError) as err:
        _fail(f"--auth-token-file {path}: {err}")
    if not token or any(c.isspace() for c in token):
        _fail(f"--auth-token-file {path}: expected one token (no spaces) in the file")
    return token


def _rails(paths: tuple[str, ...]):
    from topodoc.fleet.raillog import RailLogError, rail_map

    try:
        return rail_map(paths)
    except RailLogError as err:
        _fail(str(err))


def _gate(report, rails, fail_on: str) -> bool:
    order = {s: i for i, s in enumerate(SEVERITIES)}
    worst = [order[d.severity] for d in report.differences]
    if report.racks is not None:
        worst += [order[o.severity] for o in report.racks.outsiders]
    if rails is not None:
        worst += [order[f.severity] for f in rails.findings]
    return bool(worst) and max(worst) >= order[fail_on]


def _emit(report, rails, as_json: bool, as_csv: bool) -> None:
    from topodoc.report.fleet import render_text, to_csv, to_json

    if as_csv:
        click.echo(to_csv(report), nl=False)
    elif as_json:
        click.echo(to_json(report, rails))
    else:
        text = render_text(report) if report.nodes or report.errors or not rails else ""
        if rails is not None:
            from topodoc.report.fleet import render_rails

            text += ("\n" if text else "") + render_rails(rails)
        click.echo(text, nl=False)


def _fail(message: str):
    click.echo(f"topodoc fleet: {message}", err=True)
    sys.exit(EXIT_ERROR)
