"""What a command loads before it does its work: each command imports only what it needs (the fixed cost of
``topodoc logs`` on a small log, issue 13), and the failure catalogue's JSON cache in the user's cache
folder is used only when it is exactly what ``signatures.toml`` says (a missing, foreign, damaged, linked
or stale file is ignored and rewritten, and no usable cache folder means no cache, never an error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc import catalogue, inputs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
# the first line of a real log (its source is in fixtures/logs/README.md)
REAL_LOG = FIXTURES / "ib-local-protection-acs.log"


def _first_version_line() -> str:
    for line in REAL_LOG.read_text().splitlines():
        if "NCCL INFO NCCL version" in line:
            return line + "\n"
    raise AssertionError("the fixture holds no NCCL version line")


# ``python -m topodoc ARGS`` (runpy is what ``-m`` runs) that names every module loaded when it exits
# (``-X importtime`` misses what importlib.import_module loads, such as the command modules)
_RUN = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "sys.argv = ['topodoc', *sys.argv[1:]]\n"
    "runpy.run_module('topodoc', run_name='__main__', alter_sys=True)\n"
)


def _imported(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    """A real ``python -m topodoc ARGS`` run and the modules it had imported when it exited."""
    run = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env)
    listed = [line for line in run.stderr.splitlines() if line.startswith("MODULES ")]
    assert len(listed) == 1, run.stderr[-2000:]
    return run, set(listed[0].split()[1:])


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(cache)}


def test_logs_json_on_a_one_line_log_loads_no_machine_model_probe_regex_or_rich(tmp_path):
    log = tmp_path / "one.log"
    log.write_text(_first_version_line())
    env = _env(tmp_path / "cache")
    first, _ = _imported(["logs", "--json", str(log)], env)  # fills the catalogue cache
    run, names = _imported(["logs", "--json", str(log)], env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == json.loads(first.stdout)
    assert json.loads(run.stdout)["summary"]["nccl_version"] == "2.12.12"
    assert "topodoc.parsers.nccl_log" in names and "topodoc.commands.logs" in names
    heavy = {"topodoc.model", "topodoc.probe", "topodoc.rules", "topodoc.topology", "regex", "rich",
             "tomllib", "importlib.resources", "pynvml", "pyudev", "multiprocessing", "psutil"}
    assert names & heavy == set()
    others = {n for n in names if n.startswith("topodoc.commands.")} - {"topodoc.commands.logs"}
    assert others == set(), "only the command asked for is imported"


def test_diagnose_from_a_recording_loads_no_log_model_or_log_parsers(tmp_path):
    """Without logs, ``diagnose --from`` needs the machine model and the rules, not the log side (the rules
    name the log model in annotations only)."""
    env = _env(tmp_path / "cache")
    first, _ = _imported(["diagnose", "--from", "example:dgx-a100-degraded-acs", "--json"], env)
    run, names = _imported(["diagnose", "--from", "example:dgx-a100-degraded-acs", "--json"], env)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert json.loads(run.stdout) == json.loads(first.stdout)
    assert json.loads(run.stdout)["findings"], "the degraded example has findings"
    assert "topodoc.rules.registry" in names and "topodoc.model" in names
    log_side = ("topodoc.logmodel", "topodoc.parsers", "topodoc.catalogue")
    assert {n for n in names if n.startswith(log_side)} == set()
    assert names & {"regex", "rich", "tomllib"} == set()
    # the recorded command outputs come from the replay cache entry: no archive reader, no decompression
    assert names & {"tarfile", "topodoc.probe.archive", "topodoc.probe.collect"} == set()


def test_the_catalogue_is_parsed_once_then_read_from_the_cache(tmp_path):
    log = tmp_path / "one.log"
    log.write_text(_first_version_line())
    env = _env(tmp_path / "cache")
    _, cold = _imported(["logs", str(log)], env)
    cached = tmp_path / "cache" / "topodoc" / catalogue.CACHE_NAME
    assert "tomllib" in cold and cached.is_file()
    assert oct(cached.stat().st_mode & 0o777) == "0o600"
    assert oct(cached.parent.stat().st_mode & 0o777) == "0o700"
    _, warm = _imported(["logs", str(log)], env)
    assert "tomllib" not in warm


def _fresh(monkeypatch, cache: Path | None):
    """The catalogue as this process would load it with ``cache`` as XDG_CACHE_HOME (None: no usable
    cache folder at all)."""
    if cache is None:
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    catalogue.signatures.cache_clear()
    try:
        return catalogue.signatures()
    finally:
        catalogue.signatures.cache_clear()


def test_a_bad_cache_file_is_ignored_and_rewritten(monkeypatch, tmp_path):
    truth = _fresh(monkeypatch, None)  # straight from signatures.toml
    path = tmp_path / "topodoc" / catalogue.CACHE_NAME
    assert _fresh(monkeypatch, tmp_path) == truth and path.is_file()
    good = json.loads(path.read_text())
    damaged = {
        "not json": "{\"key\": ",
        "not an object": "[1, 2]",
        "stale key": json.dumps({**good, "key": "1:0.0.0:1:00000000"}),
        "records not objects": json.dumps({**good, "signature": [1, 2]}),
        "record missing a field": json.dumps({**good, "signature": [{"id": "x"}]}),
        "a field of the wrong type": json.dumps({**good, "signature": [{**good["signature"][0], "id": 5}]}),
    }
    for why, text in damaged.items():
        path.write_text(text)
        assert _fresh(monkeypatch, tmp_path) == truth, why
        assert json.loads(path.read_text()) == good, why


def test_a_linked_or_foreign_cache_is_not_read(monkeypatch, tmp_path):
    truth = _fresh(monkeypatch, None)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"key": "x", "signature": []}))
    folder = tmp_path / "topodoc"
    folder.mkdir(mode=0o700)
    (folder / catalogue.CACHE_NAME).symlink_to(elsewhere)
    assert _fresh(monkeypatch, tmp_path) == truth
    assert json.loads(elsewhere.read_text()) == {"key": "x", "signature": []}  # never written through
    assert not (folder / catalogue.CACHE_NAME).is_symlink()  # replaced by a file of its own
    # a cache folder that is a link is no cache at all
    other = tmp_path / "other"
    other.mkdir()
    (other / "real").mkdir()
    (other / "topodoc").symlink_to(other / "real")
    assert _fresh(monkeypatch, other) == truth
    assert list((other / "real").iterdir()) == []


def test_no_usable_cache_folder_still_loads(monkeypatch):
    assert len(_fresh(monkeypatch, None)) >= 80


def test_unknown_and_misspelt_commands_are_usage_errors():
    for name in ("nosuch", "Logs", "_diagnose_text", "logs.py", "commands"):
        run = subprocess.run([sys.executable, "-m", "topodoc", name], capture_output=True, text=True)
        assert run.returncode == 2, (name, run.stderr)
        assert "No such command" in run.stderr, (name, run.stderr)


ANSI_ALPHABET = st.sampled_from(list("\x1b[]m04;?A\x07\\\nx "))


@settings(max_examples=300, deadline=None)
@given(st.lists(ANSI_ALPHABET, max_size=40).map("".join))
def test_strip_ansi_is_the_one_pattern_whatever_the_precheck(text):
    """The plain-``re`` precheck that spares most text the ``regex`` compiler never changes the result."""
    assert inputs.strip_ansi(text) == regex.sub(inputs._ANSI_PATTERN, "", text)


_WORD = st.text(alphabet="ABNOSUVXY0123456789,-./:", max_size=7)  # what matrices hold
_PLAIN = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=7)  # '[', spaces
_TEXT = st.integers(0, 19).flatmap(  # one in 20: '[', spaces, wide or control characters (rich prints those)
    lambda k: _WORD if k else st.one_of(_PLAIN, st.text(max_size=4)))
_KNOWN = st.sampled_from(["X", "NV12", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS", "OK"])
_CELL = st.one_of(st.none(), _KNOWN, _TEXT)


@st.composite
def _matrices(draw):
    from topodoc.model import ConnectionMatrix, MatrixGpu, MatrixNic

    names = draw(st.lists(st.text(alphabet="GPUNICmlx_0123456789", min_size=1, max_size=7), min_size=1,
                          max_size=6, unique=True))
    split = draw(st.integers(0, len(names)))
    gpus = tuple(
        MatrixGpu(
            name=n,
            cpu_affinity=draw(st.none() | _TEXT),
            numa_affinity=draw(st.none() | _TEXT),
            gpu_numa_id=draw(st.none() | _TEXT),
        )
        for n in names[:split]
    )
    nics = tuple(MatrixNic(n) for n in names[split:])
    rows = draw(st.lists(st.sampled_from(names), unique=True))
    links = {row: {col: cell for col in names if (cell := draw(_CELL)) is not None} for row in rows}
    return ConnectionMatrix(kind=draw(st.sampled_from(["topo", "p2p"])), gpus=gpus, nics=nics, links=links)


def _rich_table(matrix) -> str:
    import io

    from rich.console import Console

    from topodoc.report import topo

    out = io.StringIO()
    Console(file=out, force_terminal=False, width=10_000, highlight=False).print(topo._table(matrix))
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(_matrices())
def test_the_plain_matrix_table_is_what_rich_prints(matrix):
    """``topo`` without colour prints the matrix table itself (rich's per-cell rendering was half of
    ``topo --from``); where it does, the text is rich's to the byte."""
    from topodoc.report import topo

    plain = topo._plain_table(*topo._grid(matrix))
    if plain is not None:
        assert plain == _rich_table(matrix)


def test_the_plain_table_is_used_for_a_real_matrix():
    from topodoc.parsers.smi_topo import parse
    from topodoc.report import topo

    paste = Path(__file__).resolve().parent.parent / "fixtures" / "topo" / "ansi-h200-nv18-4nic.txt"
    matrix = parse(inputs.strip_ansi(paste.read_text()))
    plain = topo._plain_table(*topo._grid(matrix))
    assert plain is not None and plain == _rich_table(matrix)
    assert " GPU0    X     NV18" in plain


def _rich_render(matrix, reading, width: int) -> str:
    """``render_text`` without colour, every line printed by rich (the path before the plain one)."""
    from topodoc.report import topo

    lines = [(f"[bold]{topo._title(matrix)}[/bold]", False)]
    lines += [(f"[bold yellow]warning:[/bold yellow] {w}", False) for w in matrix.warnings]
    tail = [(line, True) for line in topo.reading_lines(reading, matrix.p2p_mode)]
    return topo._rich_text(matrix, lines, topo._plain_table(*topo._grid(matrix)), tail, False, width)


def test_topo_text_is_rich_s_to_the_byte_without_loading_rich_for_every_real_matrix():
    """``topo`` without colour prints the title, warnings and reading itself where they are plain (rich's
    import was a fifth of ``topo --from``); every real matrix, at a wide and a narrow console."""
    from topodoc.parsers.smi_topo import SmiTopoParseError, parse
    from topodoc.report import topo
    from topodoc.topology.reading import read

    plain_used = 0
    for paste in sorted((Path(__file__).resolve().parent.parent / "fixtures" / "topo").glob("*.txt")):
        try:
            matrix = parse(inputs.strip_ansi(paste.read_text(errors="replace")))
        except SmiTopoParseError:
            continue
        reading = read(matrix)
        for width in (100, 30):
            expected = _rich_render(matrix, reading, width)
            assert topo.render_text(matrix, reading, width=width) == topo.human(lambda e=expected: e)(), paste
            head = topo._plain_lines([(f"[bold]{topo._title(matrix)}[/bold]", False)], width)
            plain_used += head is not None
    assert plain_used >= 10, "the plain path is taken for real matrices"


_PIECES = [*"ab :[]/\\\t↔é-", "[bold]", "[/bold]", "[yellow]", ":smile:", "[red]", "\x07", "  "]
_MARKUPISH = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_MARKUPISH, st.booleans()), min_size=1, max_size=4), st.integers(1, 60))
def test_the_plain_lines_are_what_rich_prints(lines, width):
    import io

    from rich.console import Console
    from rich.errors import MarkupError

    from topodoc.report import topo

    plain = topo._plain_lines(lines, width)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=width, highlight=False)
    try:
        for line, soft in lines:
            console.print(line, soft_wrap=soft)
    except MarkupError:
        assert plain is None  # markup rich refuses is rich's to refuse
        return
    assert plain is None or plain == out.getvalue()


def test_topo_from_a_recording_loads_no_rich(tmp_path):
    env = _env(tmp_path / "cache")
    first, _ = _imported(["topo", "--from", "example:dgx-a100-degraded-acs"], env)
    run, names = _imported(["topo", "--from", "example:dgx-a100-degraded-acs"], env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == first.stdout and "GPU0" in run.stdout
    assert not any(n == "rich" or n.startswith("rich.") for n in names)
