"""Terminal escape injection (issue 22, item 6): OSC (window title, OSC 52 clipboard), CSI, C0/C1
controls and bidi overrides from a log line or a node's snapshot reach the terminal escaped visibly,
through every human renderer (``topodoc/report/safe.py``: ``visible`` and the ``human`` decorator)."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re

import pytest
from conftest import run_cli

import topodoc.report
from topodoc.report.safe import visible

EVIL = "\x1b]0;pwned\x07 \x1b]52;c;ZWNobyBoaQ==\x07 \x1b[2J\x1b[H \u202eevil\u202c \x9b31m \x08\x7f"
RAW = ("\x1b", "\x07", "\u202e", "\x9b", "\x08", "\x7f")


def _clean(text: str, sgr_ok: bool = False) -> None:
    if sgr_ok:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    for char in RAW:
        assert char not in text, (char, text[:300])


def test_visible_escapes_controls_and_bidi_and_keeps_layout():
    out = visible(f"a\tb\n{EVIL}")
    _clean(out)
    assert out.startswith("a\tb\n\\x1b]0;pwned\\x07") and "\\u202eevil\\u202c" in out and "\\x9b31m" in out
    assert visible(out) == out  # idempotent: escaping twice changes nothing
    assert visible("plain text, ünïcode ✓") == "plain text, ünïcode ✓"


def test_colour_keeps_sgr_only():
    out = visible(f"\x1b[1;31mERROR\x1b[0m {EVIL}", keep_sgr=True)
    assert out.startswith("\x1b[1;31mERROR\x1b[0m ")
    _clean(out, sgr_ok=True)
    assert "\\x1b]52;c;" in out and "\\x1b[2J" in out


NCCL = ("node1:123:456 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:123:456 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n"
        f"node1:123:456 [0] NCCL WARN Call to ibv_create_qp failed {EVIL}\n")


def test_logs_human_output_escapes_a_hostile_line(tmp_path):
    log = tmp_path / "evil.log"
    log.write_text(NCCL)
    result = run_cli("logs", str(log))
    assert "\\x1b]0;pwned\\x07" in result.stdout and "\\x1b]52;c;" in result.stdout
    _clean(result.stdout)
    _clean(result.stderr)


def test_diagnose_colour_output_keeps_only_its_own_colour(tmp_path):
    log = tmp_path / "evil.log"
    log.write_text(NCCL)
    result = run_cli("--color", "always", "diagnose", "--log", str(log), "--from", "example:dgx-a100")
    assert "\x1b[" in result.stdout  # coloured
    _clean(result.stdout, sgr_ok=True)


@pytest.fixture
def evil_fleet(tmp_path):
    data = json.loads(run_cli("probe", "--from", "example:dgx-a100", "--json").stdout)
    (tmp_path / "a.json").write_text(json.dumps(data))
    data["host"]["hostname"] = f"node{EVIL}"
    data["gpus"][0]["name"] = f"A100{EVIL}"
    (tmp_path / f"b{EVIL[:12]}.json").write_text(json.dumps(data))
    (tmp_path / "c.json").write_text(json.dumps(data))
    return sorted(str(p) for p in tmp_path.iterdir())


def test_fleet_human_output_escapes_a_hostile_snapshot(evil_fleet):
    result = run_cli("fleet", *evil_fleet)
    assert "\\x1b]0;pwned" in result.stdout
    _clean(result.stdout)
    _clean(result.stderr)


def test_probe_and_topo_escape_a_hostile_snapshot(evil_fleet):
    for args in (("probe", "--from", evil_fleet[-1]), ("topo", "--from", evil_fleet[-1]),
                 ("--color", "always", "topo", "--from", evil_fleet[-1])):
        result = run_cli(*args)
        _clean(result.stdout, sgr_ok="--color" in args)


MACHINE_FORMATS = {"render_dot", "render_mermaid"}  # DOT / Mermaid files, quoted by their own rules


def test_every_human_renderer_goes_through_visible():
    """A new ``render*`` function in topodoc/report must be wrapped by ``safe.human`` (or be listed as a
    machine format): the one place, by construction."""
    missing = []
    for info in pkgutil.iter_modules(topodoc.report.__path__):
        if info.name in ("safe", "prometheus", "document"):
            continue
        module = importlib.import_module(f"topodoc.report.{info.name}")
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if func.__module__ != module.__name__ or not name.startswith("render") or name in MACHINE_FORMATS:
                continue
            if not hasattr(func, "__wrapped__"):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, missing


def test_error_lines_quoting_input_are_escaped(tmp_path):
    evil = tmp_path / "x\x1b]0;pwned\x07.txt"
    evil.write_bytes(b"\x00" * 10)
    for args in (("topo", str(evil)), ("logs", str(tmp_path / "none\x1b]52;c;eA==\x07.log")),
                 ("nccltests", str(evil))):
        result = run_cli(*args)
        assert result.returncode == 2, result
        assert "\\x1b]" in result.stderr, result.stderr
        _clean(result.stderr)
