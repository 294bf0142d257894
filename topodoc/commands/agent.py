"""``topodoc agent``: run the ``diagnose`` computation on a schedule, follow hardware events and NCCL logs,
and export the result for Prometheus.

``topodoc agent [--interval 60] [--listen 127.0.0.1:9612] [--auth-token-file FILE] [--no-redact]
[--watch-log PATH|GLOB ...] [--textfile DIR] [--events-file FILE] [--events-file-max-mb 16] [--from REC]
[--replay-events FILE] [--config FILE] [--cycles N]``

Listening beyond loopback needs ``--auth-token-file``: ``/findings``, ``/events`` and ``/snapshot`` then
answer only requests bearing that token (``/metrics`` and ``/healthz`` stay open for scrapers and probes).

SIGTERM / SIGINT stop it (exit 0), SIGHUP re-reads ``--config`` and re-probes. Bad options or inputs:
one line on stderr and exit 2. See docs/AGENT.md.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

import click

from topodoc.cli import EXIT_ERROR
from topodoc.report.safe import visible

EXAMPLE = """\b
Example:
  topodoc agent --listen 127.0.0.1:9612 --watch-log '/var/log/nccl/*.log'
  curl -s 127.0.0.1:9612/metrics | grep topodoc_"""


@click.command(epilog=EXAMPLE)
@click.option("--from", "source", metavar="SPEC",
              help="live (default), a recording NAME.tar.gz, or example:NAME (live events are then off).")
@click.option("--interval", type=float, default=60.0, show_default=True,
              help="Seconds between cycles (at least 1).")
@click.option("--budget", type=float, help="Seconds a cycle may take [default: 80% of the interval, <= 120].")
@click.option("--listen", default="127.0.0.1:9612", show_default=True, metavar="HOST:PORT",
              help="HTTP address for /metrics /healthz /findings /events /snapshot; 'off' for none; port 0 "
                   "picks one. Beyond loopback it needs --auth-token-file.")
@click.option("--auth-token-file", metavar="FILE",
              help="Bearer token (16-4096 characters) that /findings /events /snapshot require; re-read on "
                   "SIGHUP.")
@click.option("--redact/--no-redact", default=True, show_default=True,
              help="Serve /snapshot with host name, serials, UUIDs, addresses and cmdline secrets replaced "
                   "(the rules of `record --redact`).")
@click.option("--watch-log", "watch_log", multiple=True, metavar="PATH|GLOB",
              help="NCCL log file(s) to follow (repeatable; .gz files are ignored).")
@click.option("--textfile", metavar="DIR", help="Also write DIR/topodoc.prom for node_exporter (atomically).")
@click.option("--events-file", metavar="FILE", help="Append every event to FILE as a JSON line.")
@click.option("--events-file-max-mb", type=click.FloatRange(min=0.001), default=16.0, show_default=True,
              help="Past this size the events file becomes FILE.1 (the one older file kept).")
@click.option("--replay-events", metavar="FILE", help="Play a recorded/scripted event stream (JSON lines).")
@click.option("--config", "config_file", metavar="FILE",
              help="JSON with interval, budget, watch_log, textfile, events_file; re-read on SIGHUP.")
@click.option("--cycles", type=click.IntRange(min=1), help="Stop after N cycles (tests, benchmarks).")
def command(source, interval, budget, listen, auth_token_file, redact, watch_log, textfile, events_file,
            events_file_max_mb, replay_events, config_file, cycles) -> None:
    """Run topodoc on this node continuously: findings, hardware events and NCCL logs for Prometheus."""
    from topodoc.agent.runner import MIN_INTERVAL, Agent, AgentConfig, load_config_file
    from topodoc.probe.source import SourceError

    if not interval >= MIN_INTERVAL:  # also NaN
        _fail(f"--interval must be at least {MIN_INTERVAL:g} s, got {interval:g}")
    if budget is not None and not budget > 0:
        _fail("--budget must be > 0")
    config = AgentConfig(source=source, interval=interval, budget=budget, listen=_listen(listen),
                         watch_log=tuple(watch_log), textfile=textfile, events_file=events_file,
                         replay_events=replay_events, live_events=source in (None, "live"), cycles=cycles,
                         config_file=config_file, auth_token_file=auth_token_file, redact=redact,
                         events_file_max_bytes=int(events_file_max_mb * 2**20))
    if config.listen is not None and not auth_token_file and not _loopback(config.listen[0]):
        _fail(f"--listen {listen} is beyond loopback: give --auth-token-file FILE (the bearer token that "
              "/findings /events /snapshot will require; docs/AGENT.md)")
    try:
        if config_file:
            _regular_file("--config", config_file)
            config = load_config_file(config_file, config)
        _check_paths(config)
        agent = Agent(config)
    except SourceError as err:
        _fail(str(err))
    except (OSError, ValueError) as err:
        _fail(str(err))
    _install_signals(agent)
    where = "off"
    if config.listen is not None:
        try:
            agent.start_http()
        except OSError as err:
            _fail(f"--listen {config.listen[0]}:{config.listen[1]}: {err.strerror or err}")
        host, port = agent.http.address
        where = f"http://{host}:{port}"
    started = f"topodoc agent: {agent.prober.source}, every {config.interval:g}s, listening on {where}"
    click.echo(visible(started), err=True)
    for check, reason in agent.disabled:
        click.echo(visible(f"topodoc agent: disabled: {check}: {reason}"), err=True)
    sys.exit(agent.run())


def _fail(message: str) -> NoReturn:
    click.echo(visible(f"topodoc agent: {message}"), err=True)
    sys.exit(EXIT_ERROR)


def _listen(text: str) -> tuple[str, int] | None:
    if text == "off":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        _fail(f"--listen: expected HOST:PORT or 'off', got {text!r}")
    return (host.strip("[]") or "127.0.0.1", int(port))


def _loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: only this machine's processes can connect."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _check_paths(config) -> None:
    import os

    if config.textfile and not os.path.isdir(config.textfile):
        raise ValueError(f"--textfile: no such directory: {config.textfile}")
    if config.replay_events:
        _regular_file("--replay-events", config.replay_events)


def _regular_file(option: str, path: str) -> None:
    """A regular file, or one line that says what the path is instead (a FIFO or a device would block
    or never end)."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        reason = err.strerror.lower() if err.strerror else "cannot read"
        raise ValueError(f"{option}: {reason}: {path}") from None
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise ValueError(f"{option}: {path} is {kind}, not a regular file")


def _install_signals(agent) -> None:
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    signal.signal(signal.SIGINT, lambda *_: agent.stop())
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda *_: agent.request_reload())
