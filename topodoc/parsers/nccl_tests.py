"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ... ) -> :class:`NcclTestsRun`.

Handles every layout nccl-tests has printed (``NT src/util.cu``, REFERENCE.md §6.7):
- the device list (``#  Rank  0 Group  0 Pid 123 on host device  0 [0000:1a:00] NAME``; older builds
  without ``Group``/``Pid`` and with ``[0x1a]``);
- the table with or without the ``redop`` and ``root`` columns (old builds; old alltoall rows left
  ``redop`` blank), ``#wrong`` (count) or the old ``error`` (maximum
  relative error) column, ``time`` or ``cputime``, the per-iteration ``i_min i_max i_p99 i_cv%``
  columns, a trailing timestamp, ``N/A`` where validation is off or unsupported, and ``1.2e+04``
  style numbers;
- the footer (``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : 95.3``);
- output interleaved with NCCL INFO/WARN lines (even in the middle of a row), with MPI/Slurm
  prefixes (``[1,0]<stdout>:``, ``[0] ``, ``0: ``, srun -l's padded `` 0: ``), several tests in one file
  (with banners, or tables pasted back to back), pastes that lost the leading ``#``, and runs cut short.

Pure: :func:`parse_runs` returns every run found, :func:`parse` the first; unknown lines are
counted and their line numbers kept, never printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import regex

from topodoc.inputs import strip_ansi
from topodoc.model import NcclTestsDevice, NcclTestsResult, NcclTestsRow, NcclTestsRun
from topodoc.numbers import to_float, to_int


class NcclTestsParseError(ValueError):
    """The text holds no nccl-tests output at all."""


BUSBW_FACTORS = {  # busbw = algbw x factor(n): NT doc/PERFORMANCE.md, REFERENCE.md §6.7
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "hypercube": lambda n: 1.0,
}

# Every pattern is linear: repeats are possessive, and where a search could start anywhere inside a long
# token (the host of an NCCL log prefix) it may start only where a token does (``(?<!\S)``).
_PREFIX = regex.compile(r"^\s*+(?:\[\d++,\d++\]<std(?:out|err)>:|\[\d++\]\s?|\d++:\s)")  # srun -l: " 0: "
# "host:pid:tid [0] NCCL WARN ..." and "host:pid:tid [0] misc/ibvwrap.cc:63 NCCL WARN ..."
_NCCL_LOG = regex.compile(
    r"(?:(?<!\S)\S*?:\d++:\d++\s++)?\[\d++\]\s++(?:\S*?:\d++\s++)?NCCL\s++(?:INFO|WARN|TRACE|ABORT)\b"
)
_NCCL_VERSION = regex.compile(r"NCCL version (\d++\.\d++\.\d++)")
_DEVICE = regex.compile(
    r"Rank\s++(?P<rank>\d++)(?:\s++Group\s++(?P<group>\d++))?(?:\s++Pid\s++(?P<pid>\d++))?\s++on\s++"
    r"(?P<host>\S++)\s++device\s++(?P<dev>\d++)\s++\[(?P<bus>[^\]]*+)\]\s*+(?P<name>.*+)$"
)
_PARAM = regex.compile(
    r"\b(nThreads?|nGpus|nRanks|minBytes|maxBytes|step|warmup iters|warmupIters|agg iters|iters"
    r"|validation|graph|unalign):?+\s++(\S++)"
)
_PROGRAM = regex.compile(r"(?<!\w)((?:[a-z]++|_(?!perf(?:_mpi)?\b))++)_perf(?:_mpi)?\b")
_TESTS_VERSION = regex.compile(r"nccl-tests version (\S++)")
_AVG = regex.compile(r"Avg bus bandwidth\s*+:\s*+(\S++)")
_OOB = regex.compile(r"Out of bounds values\s*+:\s*+(\d++)")
_FAILURE = regex.compile(r"\b(?:Test (?:NCCL |CUDA )?failure|NCCL failure)\b")
_TIMESTAMP = regex.compile(r"^\d{4}-\d\d-\d\d$|^\d\d:\d\d:\d\d$")
_RUN_START = regex.compile(r"\bnThreads?:?+\s++\d++\s++nGpus")
_RANK_TAIL = regex.compile(r"\[\d++\]$")
_SIZE_WORD = regex.compile(r"\bsize\b|\bbytes\b")
_PERF_SUFFIX = regex.compile(r"_perf(?:_mpi)?$")


@dataclass
class _Layout:
    root: bool | None = None  # None: decide from each row's token count
    per_iter: bool = False
    wrong_column: str = "#wrong"
    time_column: str = "time"


@dataclass
class _Builder:
    layout: _Layout = field(default_factory=_Layout)
    program: str | None = None
    devices: list[NcclTestsDevice] = field(default_factory=list)
    rows: list[NcclTestsRow] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    unparsed: list[int] = field(default_factory=list)
    ignored: int = 0
    avg: float | None = None
    oob: int | None = None
    complete: bool = False
    tests_version: str | None = None
    nccl_version: str | None = None
    pending: tuple[int, list[str]] | None = None  # a row whose numbers an NCCL line interrupted
    seen_output: bool = False

    def started(self) -> bool:
        return bool(self.rows or self.complete or self.devices)


def parse(text: str, collective: str | None = None) -> NcclTestsRun:
    """The first nccl-tests run in ``text``; ``collective`` names it when the output does not."""
    return parse_runs(text, collective)[0]


def parse_runs(text: str, collective: str | None = None) -> tuple[NcclTestsRun, ...]:
    builders: list[_Builder] = [_Builder()]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _clean(raw)
        if (_starts_run(line) or _starts_table(builders[-1], line)) and builders[-1].started():
            builders.append(_Builder())
        _feed(builders[-1], number, line)
    runs = tuple(_finish(b, collective) for b in builders if b.seen_output)
    if not runs:
        raise NcclTestsParseError("no nccl-tests output found (no device list, table header or result rows)")
    return runs


def _clean(raw: str) -> str:
    return _PREFIX.sub("", strip_ansi(raw)).rstrip()


def _starts_run(line: str) -> bool:
    if "nccl-tests version" in line or "Collective test starting" in line:
        return True
    return bool(_RUN_START.search(line))


def _starts_table(b: _Builder, line: str) -> bool:
    """A table header after a finished run's footer: tables pasted one after another without banners."""
    return b.complete and _is_header(line.lstrip("#").strip())


def _is_header(body: str) -> bool:
    return "algbw" in body and bool(_SIZE_WORD.search(body))


def _feed(b: _Builder, number: int, line: str) -> None:
    log = _NCCL_LOG.search(line) if "NCCL" in line else None
    if log:
        _feed_log_line(b, number, line, log.start())
        return
    body = line.lstrip("#").strip()
    if not body:
        b.ignored += 1
    elif line.lstrip().startswith("#") or _is_comment_body(body):
        _feed_comment(b, number, body)
    else:
        _feed_text(b, number, body)


def _feed_log_line(b: _Builder, number: int, line: str, start: int) -> None:
    """An NCCL log line; text before it is the start of a row that the log line interrupted."""
    b.ignored += 1
    head = _RANK_TAIL.sub("", line[:start].strip()).strip()
    if head:
        _feed_text(b, number, head)
    version = _NCCL_VERSION.search(line)
    if version and b.nccl_version is None:
        b.nccl_version = version[1]


def _is_comment_body(body: str) -> bool:
    """Lines an old build printed without the leading ``#`` (or a paste lost it)."""
    return bool(_DEVICE.search(body) or _PARAM.match(body) or body.startswith("Using devices")
                or _is_header(body) or "out-of-place" in body or "(elements)" in body)


def _feed_comment(b: _Builder, number: int, body: str) -> None:
    """A ``#`` line: footer, device list, parameters, table header or banner; any other comment is noise
    and does not make the text nccl-tests output."""
    if _feed_footer(b, body):
        b.seen_output = True
        return
    match = _DEVICE.search(body)
    device = _device(match) if match else None
    if device:
        b.devices.append(device)
    elif _PARAM.search(body) and "nGpus" in body:
        b.params.update({key.replace(" ", "_"): value for key, value in _PARAM.findall(body)})
    elif _is_header(body):
        b.layout = _header_layout(body)
    elif not _feed_banner(b, body):
        b.ignored += 1
        return
    b.seen_output = True
    b.ignored += 0 if device else 1


def _feed_footer(b: _Builder, body: str) -> bool:
    avg, oob = _AVG.search(body), _OOB.search(body)
    if avg:
        b.avg, b.complete = _number(avg[1]), True
    if oob:
        b.oob = to_int(oob[1])
    return bool(avg or oob)


def _feed_banner(b: _Builder, body: str) -> bool:
    """nccl-tests' banner (version, program); True when the line was one."""
    version = _TESTS_VERSION.search(body)
    if version:
        b.tests_version = version[1]
    program = _PROGRAM.search(body) if "Collective test" in body and "_perf" in body else None
    if program:
        b.program = program[0]
    return bool(version or program)


def _feed_text(b: _Builder, number: int, body: str) -> None:
    tokens = body.split()
    if b.pending and _is_number_run(tokens):
        first, head = b.pending
        b.pending = None
        _add_row(b, first, head + tokens)
    elif len(tokens) >= 4 and _is_int(tokens[0]) and _is_int(tokens[1]) and not _is_int(tokens[2]):
        _flush_pending(b)
        _add_row(b, number, tokens)
    elif _FAILURE.search(body):
        b.failures.append(body)
    elif _NCCL_VERSION.match(body):
        b.nccl_version = b.nccl_version or _NCCL_VERSION.match(body)[1]
        b.ignored += 1
    else:
        _feed_unknown(b, number, body)


def _feed_unknown(b: _Builder, number: int, body: str) -> None:
    program = _PROGRAM.search(body) if "_perf" in body else None
    if program and b.program is None:
        b.program = program[0]
        b.ignored += 1
    else:
        b.unparsed.append(number)


def _is_number_run(tokens: list[str]) -> bool:
    return bool(tokens) and all(_number(t) is not None or t == "N/A" or _TIMESTAMP.match(t) for t in tokens)


def _add_row(b: _Builder, number: int, tokens: list[str], final: bool = False) -> None:
    """A table row; one that an NCCL log line cut short waits in ``pending`` for its numbers."""
    b.seen_output = True
    tokens = [t for t in tokens if not _TIMESTAMP.match(t)]
    redop, rest = _split_redop(tokens[3:])
    has_root = b.layout.root if b.layout.root is not None else len(rest) % 4 == 1
    root = to_int(rest[0]) if has_root and rest else None
    width = 8 if b.layout.per_iter else 4
    results = rest[1:] if has_root else rest
    if len(results) < 2 * width and not (final and len(results) >= width):
        b.pending = (number, tokens)
        return
    counts = b.layout.wrong_column == "#wrong"
    halves = [_result(results[i : i + width], counts) for i in range(0, min(len(results), 2 * width), width)]
    b.rows.append(NcclTestsRow(
        size=int(tokens[0]), count=int(tokens[1]), type=tokens[2], redop=redop, root=root,
        out_of_place=halves[0], in_place=halves[1] if len(halves) > 1 else None, line=number,
    ))


def _split_redop(tokens: list[str]) -> tuple[str | None, list[str]]:
    """``redop`` is a word; old builds without it, and old alltoall rows with it blank, go on with numbers."""
    if tokens and _number(tokens[0]) is None and tokens[0] != "N/A":
        return tokens[0], tokens[1:]
    return None, tokens


def _flush_pending(b: _Builder) -> None:
    """Keep a row that has at least its out-of-place half; report one that has nothing."""
    if b.pending is None:
        return
    number, tokens = b.pending
    b.pending = None
    _add_row(b, number, tokens, final=True)
    if b.pending is not None:
        b.failures.append(f"the row for {tokens[0]} bytes (line {number}) never completed")
        b.pending = None


def _result(cells: list[str], counts: bool = True) -> NcclTestsResult:
    time_us, algbw, busbw, wrong = (cells + [""] * 4)[:4]
    return NcclTestsResult(time_us=_number(time_us), algbw=_number(algbw), busbw=_number(busbw),
                           wrong=_wrong(wrong) if counts else _number(wrong))


def _number(text: str) -> float | None:
    return to_float(text)  # "nan", "inf" and over-long text -> None


def _is_int(token: str) -> bool:
    """A count or size as nccl-tests prints it (``-?digits``; one with more than 40 digits is not)."""
    return to_int(token) is not None and not token.startswith("+")


def _wrong(text: str) -> int | float | None:
    """``0``, ``6.71089e+06`` (``%6g`` of a count) -> int (the old ``error`` column stays float)."""
    value = _number(text)
    return int(value) if value is not None and value.is_integer() else value


def _header_layout(body: str) -> _Layout:
    words = body.split()
    return _Layout(
        root="root" in words,
        per_iter="i_min" in words,
        wrong_column="error" if "error" in words and "#wrong" not in words else "#wrong",
        time_column="cputime" if "cputime" in words else "time",
    )


def _device(match: regex.Match) -> NcclTestsDevice | None:
    """The device line's fields; None when its rank is no number (over 40 digits)."""
    def opt(name: str) -> int | None:
        return to_int(match[name]) if match[name] is not None else None

    if opt("rank") is None:
        return None
    return NcclTestsDevice(rank=opt("rank"), host=match["host"], device=opt("dev"),
                           bus_id=match["bus"] or None, name=match["name"].strip() or None,
                           group=opt("group"), pid=opt("pid"))


def _finish(b: _Builder, collective: str | None) -> NcclTestsRun:
    _flush_pending(b)
    failures = list(b.failures)
    run = NcclTestsRun(
        program=b.program, devices=tuple(b.devices), rows=tuple(b.rows), avg_bus_bandwidth=b.avg,
        out_of_bounds=b.oob, wrong_column=b.layout.wrong_column, time_column=b.layout.time_column,
        complete=b.complete, params=dict(b.params), nccl_tests_version=b.tests_version,
        nccl_version=b.nccl_version, failures=tuple(failures), ignored_lines=b.ignored,
        unparsed_lines=tuple(b.unparsed), nodes=len({d.host for d in b.devices}) or None,
    )
    name = _program_collective(b.program) or collective  # the output's own name wins over a guess
    nranks = _nranks(run, name)
    return replace(run, nranks=nranks, collective=name or infer_collective(run.rows, nranks))


def _program_collective(program: str | None) -> str | None:
    if not program:
        return None
    name = _PERF_SUFFIX.sub("", program)
    return name if name in BUSBW_FACTORS else None


def _nranks(run: NcclTestsRun, collective: str | None) -> int | None:
    if run.devices:
        return len({d.rank for d in run.devices})
    scale = _RANK_SCALES.get(collective or "")
    bounds = _ratio_bounds(run.rows)
    if scale is None or bounds is None or bounds[1] >= scale:
        return None
    low, high = (scale / (scale - r) for r in bounds)  # factor = scale * (n - 1) / n, solved for n
    candidates = range(math.ceil(low - 1e-9), math.floor(high + 1e-9) + 1)
    return candidates[0] if len(candidates) == 1 else None


_RANK_SCALES = {"all_reduce": 2.0, "reduce_scatter": 1.0, "all_gather": 1.0, "alltoall": 1.0}
_HALF_UNIT = 0.005  # algbw and busbw are printed with two decimals


def _ratio_bounds(rows: tuple[NcclTestsRow, ...]) -> tuple[float, float] | None:
    """busbw / algbw's range given two-decimal rounding, on the highest algbw (the tightest); with many
    ranks the factors of n and n + 1 both fit and the rank count cannot be told from the table."""
    halves = [h for r in rows for h in (r.out_of_place, r.in_place)
              if h and h.algbw and h.busbw is not None and h.algbw >= 0.1]
    if not halves:
        return None
    best = max(halves, key=lambda h: h.algbw)
    return ((best.busbw - _HALF_UNIT) / (best.algbw + _HALF_UNIT),
            (best.busbw + _HALF_UNIT) / (best.algbw - _HALF_UNIT))


def busbw_ratio(rows: tuple[NcclTestsRow, ...]) -> float | None:
    """busbw / algbw of the largest row with a measurable algbw (the factor nccl-tests applied)."""
    for row in sorted(rows, key=lambda r: r.size, reverse=True):
        half = row.out_of_place or row.in_place
        if half and half.algbw and half.busbw is not None and half.algbw >= 0.1:
            return half.busbw / half.algbw
    return None


def infer_collective(rows: tuple[NcclTestsRow, ...], nranks: int | None) -> str | None:
    """Tell the collective from redop, root and the busbw factor when the output does not name it."""
    if not rows or not nranks or nranks < 2:
        return None
    last = rows[-1]
    reduces = last.redop not in (None, "none")
    if last.root is not None and last.root >= 0:
        return "reduce" if reduces else "broadcast"
    ratio = busbw_ratio(rows)
    if ratio is None:
        return None
    names = _ROOTLESS[reduces] if last.redop is not None else _ROOTLESS[True] + _ROOTLESS[False]  # no column
    candidates = [name for name in names if abs(BUSBW_FACTORS[name](nranks) - ratio) < 0.02]
    if len(candidates) > 1:
        candidates = _split_by_in_place(rows, candidates)
    return candidates[0] if len(candidates) == 1 else None


_ROOTLESS = {True: ("all_reduce", "reduce_scatter", "sendrecv"), False: ("all_gather", "alltoall")}


def _split_by_in_place(rows: tuple[NcclTestsRow, ...], candidates: list[str]) -> list[str]:
    """sendrecv and alltoall do not check in-place results (``N/A``) while the others do."""
    last = rows[-1]
    unchecked = bool(last.in_place and last.in_place.wrong is None and last.out_of_place
                     and last.out_of_place.wrong is not None)
    return [c for c in candidates if (c in ("sendrecv", "alltoall")) == unchecked]
