"""Python tracebacks and framework error lines that hold an NCCL error, as PyTorch, vLLM, SGLang, DeepSpeed,
Ray, cupy and JAX print them.

Schema (:class:`PyTrace`, every element with its 1-based ``line``):

- ``frameworks``: which frameworks the frames' paths and the log prefixes name (``torch``, ``vllm``,
  ``sglang``, ``deepspeed``, ``ray``, ``cupy``, ``jax``, ``megatron``...), first seen first;
- ``tracebacks``: how many ``Traceback (most recent call last):`` lines;
- ``exceptions``: ``TypeName: message`` lines (``torch.distributed.DistBackendError: ...``);
- ``nccl_errors``: each NCCL error, with the result code and name (NCCL's ``ncclResult_t``, src/nccl.h.in,
  and the ``ncclGetErrorString`` wordings, src/init.cc, NCCL 2.30) read from the number, the name or the
  wording the line holds; where PyTorch says it (``ProcessGroupNCCL.cpp:1333``); the NCCL version it
  states; and the NCCL call JAX names (``ncclCommInitRank``);
- ``last_errors``: PyTorch's ``Last error:`` line (the NCCL WARN text that failed), with the next line
  when the text is on it;
- ``cuda_errors``: ``CUDA error: ...`` lines (``uncorrectable ECC error encountered``...);
- ``timeouts``: PyTorch watchdog timeouts (``WorkNCCL(SeqNum=.., OpType=ALLREDUCE, ...) ran for N
  milliseconds before timing out``);
- ``calls``: the ``torch.distributed`` / framework functions in the frames (``all_reduce``,
  ``init_process_group``, ``barrier``...), innermost last;
- ``ranks``: ranks named by ``[rankN]:`` prefixes;
- ``unknown``: non-blank lines that are neither frames, source lines, nor any of the above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# NCCL's ncclResult_t (src/nccl.h.in) and ncclGetErrorString (src/init.cc), NCCL 2.30
RESULTS: dict[int, tuple[str, str]] = {
    1: ("ncclUnhandledCudaError", "unhandled cuda error"),
    2: ("ncclSystemError", "unhandled system error"),
    3: ("ncclInternalError", "internal error"),
    4: ("ncclInvalidArgument", "invalid argument"),
    5: ("ncclInvalidUsage", "invalid usage"),
    6: ("ncclRemoteError", "remote process exited or there was a network error"),
    7: ("ncclInProgress", "NCCL operation in progress"),
    8: ("ncclTimeout", "timeout"),
}
_BY_NAME = {name.lower(): code for code, (name, _text) in RESULTS.items()}
_BY_TEXT = {text: code for code, (_name, text) in RESULTS.items()}
# cupy spells the codes NCCL_ERROR_UNHANDLED_CUDA_ERROR etc.
_CUPY = {
    "NCCL_ERROR_UNHANDLED_CUDA_ERROR": 1, "NCCL_ERROR_SYSTEM_ERROR": 2, "NCCL_ERROR_INTERNAL_ERROR": 3,
    "NCCL_ERROR_INVALID_ARGUMENT": 4, "NCCL_ERROR_INVALID_USAGE": 5, "NCCL_ERROR_REMOTE_ERROR": 6,
    "NCCL_ERROR_IN_PROGRESS": 7, "NCCL_ERROR_TIMEOUT": 8,
}


class PyTraceParseError(ValueError):
    """No traceback or framework line holding an NCCL error."""


@dataclass(frozen=True, kw_only=True)
class PyException:
    type: str
    message: str
    line: int


@dataclass(frozen=True, kw_only=True)
class NcclError:
    code: int | None = None
    name: str | None = None  # "ncclSystemError"
    text: str  # the line, prefix removed
    source: str | None = None  # "ProcessGroupNCCL.cpp:1333"
    nccl_version: str | None = None
    call: str | None = None  # the NCCL function JAX/XLA names
    line: int


@dataclass(frozen=True, kw_only=True)
class Note:
    text: str
    line: int


@dataclass(frozen=True, kw_only=True)
class Timeout:
    op: str | None = None  # "ALLREDUCE"
    seq: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    text: str
    line: int


@dataclass(frozen=True, kw_only=True)
class PyTrace:
    frameworks: tuple[str, ...] = ()
    tracebacks: int = 0
    exceptions: tuple[PyException, ...] = ()
    nccl_errors: tuple[NcclError, ...] = ()
    last_errors: tuple[Note, ...] = ()
    cuda_errors: tuple[Note, ...] = ()
    timeouts: tuple[Timeout, ...] = ()
    calls: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


# launcher and framework prefixes: "[rank0]: ", "(VllmWorkerProcess pid=12) ERROR 12-25 01:10:28 x.py:229] ",
# "(RayWorkerWrapper pid=3, ip=10.0.0.1) ", "[2025-01-29 08:52:43 TP5] ",
# "E1211 08:26:06.780000 1397 f.py:8] "
_PREFIX = re.compile(
    r"^(?:\[rank(?P<rank>\d{1,6})\]:\s?"
    r"|\((?P<actor>\w{1,60}) pid=\d{1,9}(?:, ip=[\w.:]{1,60})?\)\s"
    r"(?:[A-Z]{4,8} \d\d-\d\d [\d:]{8} [\w.]{1,80}:\d{1,6}\]\s?)?"
    r"|\[\d{4}-\d\d-\d\d [\d:]{8}(?: TP\d{1,4})?\]\s"
    r"|[IWEF]\d{4} [\d:.]{8,15} \d{1,9} [\w/.-]{1,200}:\d{1,6}\]\s"
    r"|\d{1,6}: )"
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]{1,400})", line \d{1,7}, in (?P<fn>[\w<>.]{1,100})')
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]{0,120}(?:Error|Exception|Exit|Interrupt)): ?(?P<msg>.{0,2000})$"
)
_NCCL_NUM = re.compile(r"NCCL Error (?P<code>\d{1,2}): (?P<text>.{1,300})")
_NCCL_IN = re.compile(
    r"NCCL error in: (?P<src>[^,\s]{1,300}:\d{1,6}), (?P<text>.{1,300}?)"
    r"(?:, NCCL version (?P<ver>\d{1,2}\.\d{1,3}\.\d{1,3}[\w.+-]{0,40}))?\s*$"
)
_NCCL_PLAIN = re.compile(r"NCCL error: (?P<text>.{1,300})")
_NCCL_NAME = re.compile(r"\b(?P<name>nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument"
                        r"|InvalidUsage|RemoteError|InProgress|Timeout))\b:?\s?(?P<text>.{0,300})")
_NCCL_CUPY = re.compile(r"\b(?P<name>NCCL_ERROR_[A-Z_]{3,40})\b:?\s?(?P<text>.{0,300})")
_NCCL_OP = re.compile(r"NCCL operation (?P<call>\w{1,60})\(.{0,200}?\) failed: (?P<text>.{1,300})")
_VERSION = re.compile(r"NCCL version (\d{1,2}\.\d{1,3}\.\d{1,3})")
_LAST = re.compile(r"(?:^|\s)Last error:\s?(?P<text>.{0,2000})$")
_CUDA = re.compile(r"\bCUDA error: (?P<text>.{1,300})")
_WATCHDOG = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40}).{0,300}?Timeout\(ms\)=(?P<tmo>\d{1,12})\)"
    r"(?: ran for (?P<ran>\d{1,12}) milliseconds)?"
)
_SOURCE = re.compile(r"^\s{2,}\S|^\s*[~^]{3,}\s*$|^\s*\.\.\.|^frame #\d{1,4}:|^Exception raised from ")
_FRAMEWORKS = (
    ("vllm", re.compile(r"\bvllm\b|VllmWorker", re.I)),
    ("sglang", re.compile(r"\bsglang\b")),
    ("deepspeed", re.compile(r"\bdeepspeed\b")),
    ("megatron", re.compile(r"\bmegatron\b")),
    ("ray", re.compile(r"\bray/|RayWorker|\(raylet\)")),
    ("cupy", re.compile(r"\bcupy(?:_backends)?\b")),
    ("jax", re.compile(r"\bjax(?:lib)?\b|XlaRuntimeError|xla/")),
    ("accelerate", re.compile(r"\baccelerate/")),
    ("torch", re.compile(r"\btorch[/.]|ProcessGroupNCCL|DistBackendError|torchrun")),
)


def looks_like(lines: list[str]) -> bool:
    """An NCCL error in the words PyTorch, vLLM, cupy or JAX print it."""
    for line in lines:
        if (_NCCL_NUM.search(line) or _NCCL_IN.search(line) or _NCCL_PLAIN.search(line)
                or _NCCL_OP.search(line) or _NCCL_CUPY.search(line)
                or ("DistBackendError" in line and "NCCL" in line)):
            return True
    return False


def parse(text: str) -> PyTrace:
    state = _State()
    for number, raw in enumerate(text.split("\n"), start=1):
        state.read(number, raw.rstrip())
    if not (state.nccl or state.timeouts):
        raise PyTraceParseError("no NCCL error line (NCCL Error N:, NCCL error in:, ncclXxx:, a watchdog)")
    return state.result()


class _State:
    def __init__(self) -> None:
        self.frameworks: list[str] = []
        self.tracebacks = 0
        self.exceptions: list[PyException] = []
        self.nccl: list[NcclError] = []
        self.last: list[Note] = []
        self.cuda: list[Note] = []
        self.timeouts: list[Timeout] = []
        self.calls: list[str] = []
        self.ranks: set[int] = set()
        self.unknown: list[tuple[int, str]] = []
        self.last_open: int | None = None  # "Last error:" with its text on the next line

    def read(self, number: int, raw: str) -> None:
        if not raw.strip():
            return
        line = raw
        m = _PREFIX.match(line)
        if m:
            if m["rank"]:
                self.ranks.add(int(m["rank"]))
            line = line[m.end():]
        for name, pattern in _FRAMEWORKS:
            if name not in self.frameworks and pattern.search(raw):
                self.frameworks.append(name)
        if self.last_open is not None:
            self.last.append(Note(text=line.strip()[:500], line=number))
            self.last_open = None
            return
        known = self._structure(number, line)
        found = self._errors(number, line)
        if not (known or found):
            self.unknown.append((number, raw))

    def _structure(self, number: int, line: str) -> bool:
        if _TRACEBACK.match(line):
            self.tracebacks += 1
            return True
        frame = _FRAME.match(line)
        if frame:
            if frame["fn"] not in ("wrapper", "<module>", "main", "run", "_wrapper"):
                self.calls.append(frame["fn"])
            return True
        last = _LAST.search(line.strip())
        if last and not last["text"].strip():
            self.last_open = number
            return True
        if last:
            self.last.append(Note(text=last["text"].strip()[:500], line=number))
        return bool(_SOURCE.match(line)) or (last is not None and line.strip().startswith("Last error:"))

    def _errors(self, number: int, line: str) -> bool:
        found = False
        exc = _EXCEPTION.match(line.strip())
        if exc:
            self.exceptions.append(PyException(type=exc["type"], message=exc["msg"][:500], line=number))
            found = True
        error = _nccl_error(line.strip(), number)
        if error is not None:
            self.nccl.append(error)
            found = True
        cuda = _CUDA.search(line)
        if cuda:
            self.cuda.append(Note(text=cuda["text"].strip()[:300], line=number))
            found = True
        dog = _WATCHDOG.search(line)
        if dog:
            self.timeouts.append(Timeout(
                op=dog["op"], seq=int(dog["seq"]), timeout_ms=int(dog["tmo"]),
                ran_ms=int(dog["ran"]) if dog["ran"] else None, text=line.strip()[:500], line=number,
            ))
            found = True
        return found

    def result(self) -> PyTrace:
        return PyTrace(
            frameworks=tuple(self.frameworks),
            tracebacks=self.tracebacks,
            exceptions=tuple(self.exceptions),
            nccl_errors=tuple(self.nccl),
            last_errors=tuple(self.last),
            cuda_errors=tuple(self.cuda),
            timeouts=tuple(self.timeouts),
            calls=tuple(dict.fromkeys(self.calls)),
            ranks=tuple(sorted(self.ranks)),
            unknown=tuple(self.unknown),
        )


def _nccl_error(line: str, number: int) -> NcclError | None:
    version = _VERSION.search(line)
    ver = version[1] if version else None
    m = _NCCL_NUM.search(line)
    if m:
        code = int(m["code"])
        return _error(code, line, number, nccl_version=ver)
    m = _NCCL_IN.search(line)
    if m:
        return _error(_code_of(m["text"]), line, number, source=m["src"].rsplit("/", 1)[-1],
                      nccl_version=m["ver"] or ver)
    m = _NCCL_OP.search(line)
    if m:
        return _error(_code_of(m["text"]), line, number, call=m["call"], nccl_version=ver)
    m = _NCCL_PLAIN.search(line)
    if m:
        return _error(_code_of(m["text"]), line, number, nccl_version=ver)
    m = _NCCL_CUPY.search(line)
    if m and m["name"] in _CUPY:
        return _error(_CUPY[m["name"]], line, number, nccl_version=ver)
    m = _NCCL_NAME.search(line)
    if m:
        return _error(_BY_NAME.get(m["name"].lower()), line, number, nccl_version=ver)
    return None


def _code_of(text: str) -> int | None:
    low = text.lower()
    named = _NCCL_NAME.search(text)
    if named:
        return _BY_NAME.get(named["name"].lower())
    for wording, code in _BY_TEXT.items():
        if low.startswith(wording.lower()):
            return code
    return None


def _error(code: int | None, line: str, number: int, **extra) -> NcclError:
    name = RESULTS[code][0] if code in RESULTS else None
    return NcclError(code=code if code in RESULTS else None, name=name, text=line[:500], line=number, **extra)
