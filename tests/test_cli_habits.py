"""CLI habits: ``--color auto|always|never`` and NO_COLOR, ``-q``/``-v``, a progress line only on a
terminal, and an ``Example:`` block at the end of every command's ``--help``."""

import io
from pathlib import Path

import click
import pytest
from conftest import run_cli, run_cli_process

from topodoc.cli import main
from topodoc.inputs import MAX_LINE
from topodoc.report import color, console

ROOT = Path(__file__).resolve().parent.parent
TOPO = ROOT / "fixtures" / "topo" / "dgx-a100-nv12-mlx5.txt"
DEGRADED = ("diagnose", "--from", "example:dgx-a100-degraded-no-peermem", "--fail-on", "critical")
ESC = "\x1b["


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand, as the words that name it on the command line."""
    ctx = click.Context(main)
    paths = [()]
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        paths.append((name,))
        if isinstance(cmd, click.Group):
            paths += [(name, sub) for sub in cmd.list_commands(ctx)]
    return paths


@pytest.mark.parametrize("words", _command_paths(), ids=lambda w: " ".join(w) or "topodoc")
def test_every_help_ends_with_an_example(words):
    result = run_cli(*words, "--help")
    assert result.returncode == 0, result.stderr
    last = result.stdout.rstrip().split("\n\n")[-1].splitlines()
    assert last[0].strip() == "Example:", result.stdout
    assert last[1:] and all(line.startswith("    ") for line in last[1:])
    assert any(f"topodoc {' '.join(words)}".rstrip() in line for line in last[1:]), last


def test_every_command_is_walked():
    names = {w[0] for w in _command_paths() if w}
    assert {"diagnose", "logs", "schema", "completion", "estimate"} <= names
    assert ("estimate", "tp") in _command_paths()


# -- colour ------------------------------------------------------------------------------------------

def test_color_choice_beats_the_terminal_check_and_no_color():
    assert ESC not in run_cli(*DEGRADED).stdout  # CliRunner's stdout is not a terminal: auto = off
    assert ESC in run_cli("--color", "always", *DEGRADED).stdout
    assert ESC in run_cli("--color", "always", *DEGRADED, env={"NO_COLOR": "1"}).stdout
    assert ESC not in run_cli("--color", "never", *DEGRADED).stdout
    assert ESC in run_cli("--color", "always", "topo", str(TOPO)).stdout
    bad = run_cli("--color", "sometimes", "rules")
    assert bad.returncode == 2


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_use_color_on_a_terminal_honours_no_color(monkeypatch):
    color.set_choice("auto")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color.use_color(_Tty()) and not color.use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color.use_color(_Tty())
    monkeypatch.setenv("NO_COLOR", "")  # set but empty: no-color.org says it does not count
    assert color.use_color(_Tty())
    color.set_choice("never")
    assert not color.use_color(_Tty())
    color.set_choice("auto")


def test_a_real_run_with_color_always_colours_a_pipe():
    result = run_cli_process("--color", "always", *DEGRADED)
    assert result.returncode == 0 and ESC in result.stdout
    assert ESC not in run_cli_process(*DEGRADED).stdout


# -- quiet and verbose --------------------------------------------------------------------------------

def test_quiet_drops_notes_and_keeps_findings(tmp_path):
    paste = tmp_path / "topo.txt"
    paste.write_text(TOPO.read_text() + "x" * (MAX_LINE + 10) + "\n")
    loud = run_cli("topo", str(paste))
    assert loud.returncode == 0 and "note: " in loud.stderr and "skipped" in loud.stderr
    hushed = run_cli("-q", "topo", str(paste))
    assert hushed.returncode == 0 and hushed.stderr == "" and hushed.stdout == loud.stdout
    normal, quiet = run_cli(*DEGRADED).stdout, run_cli("--quiet", *DEGRADED).stdout
    skipped = [ln for ln in normal.splitlines() if ln.startswith("skipped ")]
    assert skipped and not any(ln.startswith("skipped ") for ln in quiet.splitlines())
    assert "topodoc explain RULE" in normal and "topodoc explain" not in quiet
    assert [ln for ln in quiet.splitlines() if ln.startswith(("ERROR", "WARNING"))] == [
        ln for ln in normal.splitlines() if ln.startswith(("ERROR", "WARNING"))
    ]


def test_verbose_adds_the_timing_on_stderr_only():
    plain = run_cli("rules")
    loud = run_cli("-v", "rules")
    assert plain.stdout == loud.stdout and "took" not in plain.stderr
    assert loud.stderr.startswith("topodoc rules: took ") and loud.stderr.rstrip().endswith(" s")


def test_quiet_and_verbose_together_is_a_usage_error():
    result = run_cli("-q", "-v", "rules")
    assert result.returncode == 2 and "either --quiet or --verbose" in result.stderr


# -- progress -----------------------------------------------------------------------------------------

def test_progress_draws_and_erases_on_a_terminal_only():
    console.set_level(console.NORMAL)
    tty = _Tty()
    bar = console.Progress("topodoc logs: reading 2 file(s)", tty)
    bar.tick(now=bar.started + 3.25)
    bar.tick(now=bar.started + 3.5)
    assert tty.getvalue() == ("\rtopodoc logs: reading 2 file(s)  3.2s |\x1b[K"
                              "\rtopodoc logs: reading 2 file(s)  3.5s /\x1b[K")
    bar.clear()
    assert tty.getvalue().endswith("\r\x1b[K")
    pipe = io.StringIO()
    quiet_bar = console.Progress("x", pipe)
    quiet_bar.tick()
    quiet_bar.clear()
    assert not quiet_bar.active and pipe.getvalue() == ""


def test_progress_is_off_with_quiet_even_on_a_terminal():
    console.set_level(console.QUIET)
    try:
        assert not console.Progress("x", _Tty()).active
    finally:
        console.set_level(console.NORMAL)


def test_progress_block_on_a_pipe_writes_nothing():
    pipe = io.StringIO()
    with console.progress("x", pipe) as bar:
        pass
    assert not bar.active and pipe.getvalue() == ""


def test_short_work_on_a_terminal_leaves_no_trace():
    """Work that ends before the delay never draws; the line is erased only if it was drawn."""
    console.set_level(console.NORMAL)
    tty = _Tty()
    with console.progress("x", tty) as bar:
        assert bar.active
    assert tty.getvalue() == "" or tty.getvalue().endswith("\r\x1b[K")
