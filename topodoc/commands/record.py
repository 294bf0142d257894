"""``topodoc record -o NAME.tar.gz [--redact]``: record everything the probe reads into one archive
that ``--from NAME.tar.gz`` replays (see :mod:`topodoc.probe.record` for the layout)."""

from __future__ import annotations

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc record --redact -o $(hostname).tar.gz
  topodoc probe --from $(hostname).tar.gz"""


@click.command(epilog=EXAMPLE)
@click.option("-o", "--output", required=True, metavar="NAME.tar.gz", help="Where to write the recording.")
@click.option(
    "--redact", is_flag=True, help="Replace hostname, IPs, MACs, serials, UUIDs and GIDs consistently."
)
@click.option("--name", metavar="NAME", help="The recording's name (default: the file name).")
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              metavar="SECONDS", help="Stop asking NVML and nvidia-smi after this long; the rest are gaps.")
def command(output: str, redact: bool, name: str | None, deadline: float) -> None:
    """Record this machine's sysfs/procfs subset, NVML answers and nvidia-smi output for replay."""
    from topodoc.probe.host import Host
    from topodoc.probe.record import write_recording

    if not output.endswith((".tar.gz", ".tgz")):
        _fail(f"the output must be a .tar.gz file, got {output}")
    try:
        summary = write_recording(Host.live(deadline), output, redact=redact, name=name)
    except OSError as err:
        _fail(f"cannot write {output}: {err.strerror or err}")
    except ValueError as err:  # SOURCE_DATE_EPOCH that is not a number
        _fail(str(err))
    click.echo(
        f"wrote {summary.path} ({summary.size_bytes} bytes): {summary.files} files, {summary.links} links, "
        f"{summary.nvml_calls} NVML calls, {summary.commands} commands, {summary.unreadable} unreadable paths"
        + (", redacted" if summary.redacted else "")
    )


def _fail(message: str):
    click.echo(visible(f"topodoc record: {message}"), err=True)
    raise SystemExit(EXIT_ERROR)
