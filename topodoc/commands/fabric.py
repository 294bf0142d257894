"""``topodoc fabric plan|check|diagram``: plan a rail-optimised Clos / fat-tree fabric, check a fleet
against the plan, draw the plan.

Exit codes: ``plan`` and ``diagram`` 0, or 2 on a request no plan answers; ``check`` like ``diagnose``:
0 nothing at or above ``--fail-on``, 1 a difference is, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import math
import sys
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK

SEVERITIES = ("info", "warning", "error", "critical")

EXAMPLE = """\b
Example:
  topodoc fabric plan --nodes 140 --reference superpod
  topodoc fabric plan --gpus 10240 --switch-radix 40 --port-speed 200G --oversubscription 4:1 --json
  topodoc fabric check plan.json --fleet recs/ --logs nccl-logs/
  topodoc fabric diagram --nodes 40 --reference superpod --format mermaid"""


@click.group(name="fabric", epilog=EXAMPLE)
def command() -> None:
    """Plan the network across nodes (rails, leaf / spine / core), check a fleet against a plan."""


def _plan_options(func):
    options = [
        click.option("--nodes", type=click.IntRange(1, 10_000_000), default=None, help="Nodes (servers)."),
        click.option(
            "--gpus",
            type=click.IntRange(1, 100_000_000),
            default=None,
            help="GPUs instead of --nodes (rounded up to whole nodes).",
        ),
        click.option("--gpus-per-node", type=click.IntRange(1, 1024), default=8, show_default=True),
        click.option(
            "--nics-per-node",
            type=click.IntRange(1, 1024),
            default=8,
            show_default=True,
            help="Compute-fabric NICs per node (one per rail).",
        ),
        click.option(
            "--switch",
            "switch_name",
            default=None,
            metavar="NAME",
            help="A switch model: QM8700, QM8790, QM9700, QM9790, Q3400, SN5600, SN4700 (default QM8700).",
        ),
        click.option("--switch-radix", type=int, default=None, help="Ports of another switch."),
        click.option("--port-speed", default=None, help="Its port speed, e.g. 200G (with --switch-radix)."),
        click.option(
            "--oversubscription",
            type=click.Choice(["1:1", "2:1", "4:1"]),
            default=None,
            help="Leaf down:up ports (default 1:1).",
        ),
        click.option(
            "--tiers", type=click.Choice(["auto", "1", "2", "3"]), default="auto", show_default=True
        ),
        click.option("--rails/--no-rails", default=None, help="Rail-optimised cabling (default: rails)."),
        click.option(
            "--reference",
            type=click.Choice(["superpod"]),
            default=None,
            help="NVIDIA's DGX SuperPOD rule: 20-node units, 8 leaves each, 1:1, cores joining rails.",
        ),
        click.option(
            "--topology", type=click.Choice(["clos", "fat-tree"]), default="clos", show_default=True
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _request(
    nodes,
    gpus,
    gpus_per_node,
    nics_per_node,
    switch_name,
    switch_radix,
    port_speed,
    oversubscription,
    tiers,
    rails,
    reference,
    topology,
):
    from topodoc.fabric.plan import PlanError, Request
    from topodoc.fabric.switches import custom, lookup, parse_speed

    if (nodes is None) == (gpus is None):
        raise PlanError("give --nodes N or --gpus N (one of them)")
    if switch_name is not None and (switch_radix is not None or port_speed is not None):
        raise PlanError("give --switch NAME or --switch-radix N --port-speed G, not both")
    if (switch_radix is None) != (port_speed is None):
        raise PlanError("--switch-radix and --port-speed go together")
    switch = (
        custom(switch_radix, parse_speed(port_speed))
        if switch_radix is not None
        else lookup(switch_name or "QM8700")
    )
    if reference == "superpod" and (oversubscription not in (None, "1:1") or rails is False):
        raise PlanError("--reference superpod is rail-optimised at 1:1: drop --oversubscription / --no-rails")
    return Request(
        nodes=nodes if nodes is not None else math.ceil(gpus / gpus_per_node),
        switch=switch,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        oversubscription=int((oversubscription or "1:1").split(":")[0]),
        tiers=None if tiers == "auto" else int(tiers),
        rails=rails is not False,
        reference=reference,
        topology=topology,
    )


def _make_plan(kwargs: dict):
    from topodoc.fabric.plan import PlanError, plan
    from topodoc.fabric.switches import SwitchError

    try:
        return plan(_request(**kwargs))
    except (PlanError, SwitchError) as err:
        _fail("plan", str(err))


@command.command(name="plan", epilog=EXAMPLE)
@_plan_options
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (schema topodoc.fabric).")
def plan_cmd(as_json: bool, **kwargs) -> None:
    """Rails, leaf / spine / core counts, cables, limits and bandwidth of a fabric for N nodes."""
    fabric = _make_plan(kwargs)
    if as_json:
        click.echo(plan_json(fabric))
    else:
        from topodoc.report.fabric import render_plan

        click.echo(render_plan(fabric), nl=False)


def plan_json(fabric) -> str:
    from topodoc.codec import to_data
    from topodoc.report.document import dumps

    return dumps("topodoc.fabric", to_data(fabric))


def load_plan(path: str):
    """A ``fabric plan --json`` document -> FabricPlan; ValueError with one line when it is not one."""
    import json

    from topodoc.codec import CodecError, from_data
    from topodoc.fabric.plan import FabricPlan

    try:
        with open(path, "rb") as fh:
            raw = fh.read(16 * 1024 * 1024 + 1)
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}") from err
    if len(raw) > 16 * 1024 * 1024:
        raise ValueError(f"{path}: larger than 16 MiB, not a plan")
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from err
    if not isinstance(doc, dict) or doc.get("schema") != "topodoc.fabric":
        raise ValueError(f"{path}: not a `topodoc fabric plan --json` document (schema topodoc.fabric)")
    data = {k: v for k, v in doc.items() if k not in ("schema", "schema_version")}
    try:
        saved = from_data(FabricPlan, data)
    except CodecError as err:
        raise ValueError(f"{path}: {err}") from err
    from topodoc.fabric.plan import PlanError, plan, request_of

    try:
        again = plan(request_of(saved))
    except (PlanError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a plan topodoc makes: {err}") from err
    if again != saved:
        raise ValueError(f"{path}: differs from what `topodoc fabric plan` gives for its own inputs "
                         "(edited, or made by another topodoc version): plan again")
    return saved


def _with_plan_file(func):
    return click.option(
        "--plan",
        "plan_file",
        default=None,
        metavar="PLAN.json",
        help="Draw a saved `fabric plan --json` instead of planning here.",
    )(func)


@command.command(name="diagram", epilog=EXAMPLE)
@_plan_options
@_with_plan_file
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["dot", "mermaid", "svg"]),
    default="dot",
    show_default=True,
    help="Graphviz DOT, Mermaid flowchart, or SVG rendered by Graphviz.",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write to FILE instead of stdout."
)
def diagram_cmd(plan_file: str | None, fmt: str, output: str | None, **kwargs) -> None:
    """Draw a plan: nodes by scalable unit, leaves per rail, spines, cores, and the cables between."""
    from topodoc.commands.diagram import _write
    from topodoc.fabric.diagram import fabric_graph, title
    from topodoc.report.diagram import DiagramError, render_dot, render_mermaid, to_svg

    if plan_file is not None:
        try:
            fabric = load_plan(plan_file)
        except ValueError as err:
            _fail("diagram", str(err))
    else:
        fabric = _make_plan(kwargs)
    graph = fabric_graph(fabric)
    text = render_mermaid(graph, title(fabric)) if fmt == "mermaid" else render_dot(graph, title(fabric))
    if fmt == "svg":
        try:
            text = to_svg(text)
        except DiagramError as err:
            _fail("diagram", str(err))
    _write(text, output)


@command.command(name="check", epilog=EXAMPLE)
@click.argument("plan_file", metavar="PLAN.json")
@click.option(
    "--fleet",
    "fleet",
    multiple=True,
    metavar="INPUT",
    help="Recordings, snapshots, directories of them (repeatable), as `topodoc fleet` reads.",
)
@click.option(
    "--logs",
    "logs",
    multiple=True,
    metavar="PATH",
    help="NCCL logs from many nodes (repeatable; directories walked): the rail map.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the findings as JSON (schema topodoc.fabric-check)."
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default="warning",
    show_default=True,
    help="Exit 1 when a finding is at least this severe.",
)
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="Processes to load nodes with.")
def check_cmd(
    plan_file: str,
    fleet: tuple[str, ...],
    logs: tuple[str, ...],
    as_json: bool,
    fail_on: str,
    jobs: int | None,
) -> None:
    """Compare a plan with the nodes and NCCL logs a fleet gives: count, NICs, rates, ports, rail map."""
    from topodoc.fabric.check import check, observe

    if not fleet and not logs:
        _fail("check", "give --fleet INPUT... (recordings, snapshots) and/or --logs PATH (NCCL logs)")
    try:
        fabric = load_plan(plan_file)
    except ValueError as err:
        _fail("check", str(err))
    try:
        observed = observe(fleet, logs, jobs)
    except ValueError as err:
        _fail("check", str(err))
    result = check(fabric, observed)
    if as_json:
        from topodoc.codec import to_data
        from topodoc.report.document import dumps

        click.echo(dumps("topodoc.fabric-check", to_data(result)))
    else:
        from topodoc.report.fabric import render_check

        click.echo(render_check(result), nl=False)
    for line in result.errors:
        click.echo(f"topodoc fabric check: {line}", err=True)
    if fleet and result.observed_nodes == 0:
        sys.exit(EXIT_ERROR)  # no node could be read: nothing was compared
    order = {s: i for i, s in enumerate(SEVERITIES)}
    worst = max((order[f.severity] for f in result.findings), default=-1)
    sys.exit(EXIT_FINDINGS if worst >= order[fail_on] else EXIT_OK)


def _fail(sub: str, message: str) -> NoReturn:
    click.echo(f"topodoc fabric {sub}: {message}", err=True)
    sys.exit(EXIT_ERROR)
