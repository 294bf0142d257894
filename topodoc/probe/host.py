"""The Host seam: every byte a collector reads comes through one :class:`Host`.

``Host(fs, nvml, runner)``:

- ``fs`` is a :class:`RootFs`, a filesystem prefixed by a root (``/`` live, or an extracted recording's
  ``fs/`` directory, the way hwloc's ``HWLOC_FSROOT`` works). Paths given to it are *machine* paths
  (``/sys/bus/pci/devices``); symlinks are resolved inside the root, absolute targets re-rooted, so a
  replayed tree can never lead a read outside it. Failures raise :class:`FsError` with a
  :class:`~topodoc.model.GapReason`.
- ``nvml`` is any object with ``call(fn, *args)``: ``fn`` is the pynvml function name and every device
  handle is replaced by the GPU index, so a call is a plain JSON key. Errors are :class:`NvmlError`
  carrying NVML's numeric return code. :class:`LiveNvml` wraps pynvml, :class:`TapeNvml` replays a
  tape and :class:`RecordingNvml` records one.
- ``runner`` is any object with ``run(argv, timeout) -> CommandResult``; :class:`LiveRunner` runs the
  command without a shell and cuts it at the timeout; :class:`TapeRunner` / :class:`RecordingRunner`
  replay and record.

Tape formats (``nvml.json``, ``commands.json`` in a recording)::

    {"format": 1, "calls": [{"fn": "nvmlDeviceGetName", "args": [0], "code": 0, "value": "NVIDIA H100"},
                            {"fn": "nvmlDeviceGetSerial", "args": [0], "code": 3, "value": null}]}
    {"format": 1, "commands": [{"argv": [...], "stdout": "...", "stderr": "", "returncode": 0,
                                "timed_out": false, "missing": false}]}
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import json
import os
import queue
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from topodoc.model import GapReason

MAX_LINK_HOPS = 40
MAX_READ = 8 << 20  # bytes one read may return: /proc/cpuinfo is ~1.4 kB per CPU, 5.6 MB at 4096 CPUs


class FsError(Exception):
    """A path under the root could not be read; ``reason`` says why in the model's terms."""

    def __init__(self, path: str, reason: GapReason, detail: str = "") -> None:
        super().__init__(f"{path}: {reason.value}{': ' + detail if detail else ''}")
        self.path = path
        self.reason = reason
        self.detail = detail


def _reason_for(err: OSError) -> GapReason:
    if err.errno == errno.ENOENT or err.errno == errno.ENOTDIR:
        return GapReason.MISSING
    if err.errno in (errno.EACCES, errno.EPERM):
        return GapReason.PERMISSION
    return GapReason.ERROR


def _normalize(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"machine paths are absolute, got {path!r}")
    return os.path.normpath(path).replace("//", "/")


class RootFs:
    """Read-only access to a machine's files under ``root``.

    ``failures`` (replay only) maps machine paths to the ``(reason, detail)`` a recording saw there,
    so an EACCES during recording replays as PERMISSION; a path absent from a replayed tree that the
    recording did not note as failing is reported NOT_RECORDED.
    """

    def __init__(self, root: str | Path, failures: dict[str, tuple[GapReason, str]] | None = None,
                 links_inside: bool = False) -> None:
        self.root = os.path.abspath(str(root))
        self.failures = failures
        # The kernel may resolve paths (one open + one readlink, not a readlink per part) when that
        # gives what :meth:`_resolve_parts` gives: on ``/``, and on a tree whose every symlink stays
        # inside it as written (:func:`links_stay_inside`), where no walk can climb out and back.
        self._kernel = (self.root == "/" or links_inside) and _KERNEL_RESOLVE
        self._real_root = os.path.realpath(self.root) if self._kernel else self.root

    @property
    def is_live(self) -> bool:
        """True when this reads the running machine itself (root ``/``, not a replay)."""
        return self.root == "/" and self.failures is None

    def host_path(self, path: str) -> str:
        """The path on this computer for machine path ``path`` (no symlink resolution)."""
        rel = _normalize(path).lstrip("/")
        return os.path.join(self.root, rel) if rel else self.root

    # -- public reads -------------------------------------------------------------------------
    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The file's first ``limit`` bytes; without a limit the whole file, refused (an ERROR
        FsError) when it is longer than :data:`MAX_READ`, so no file can make a read unbounded."""
        real = self._open_path(path)
        cap = MAX_READ + 1 if limit is None else max(0, min(limit, MAX_READ))
        try:
            data = _read_capped(self.host_path(real), cap)
        except OSError as err:
            raise self._error(path, err) from err
        if limit is None and len(data) > MAX_READ:
            raise FsError(_normalize(path), GapReason.ERROR, f"longer than {MAX_READ} bytes: not read")
        return data

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        real = self._open_path(path)
        try:
            return sorted(os.listdir(self.host_path(real)))
        except OSError as err:
            raise self._error(path, err) from err

    def exists(self, path: str) -> bool:
        try:
            real = self._resolve(_normalize(path))
        except FsError:
            return False
        return os.path.lexists(self.host_path(real))

    def is_dir(self, path: str) -> bool:
        try:
            real = self._resolve(_normalize(path))
        except FsError:
            return False
        return os.path.isdir(self.host_path(real)) and not os.path.islink(self.host_path(real))

    def readlink(self, path: str) -> str:
        norm = self._check_failure(path)
        parent = self._resolve(os.path.dirname(norm))
        link = os.path.join(parent, os.path.basename(norm))
        try:
            target = os.readlink(self.host_path(link))
        except OSError as err:
            raise self._error(path, err) from err
        self._note_link(link, target)
        return target

    def realpath(self, path: str) -> str:
        return self._resolve(self._check_failure(path))

    # -- resolution ---------------------------------------------------------------------------
    def _open_path(self, path: str) -> str:
        return self._resolve(self._check_failure(path))

    def _check_failure(self, path: str) -> str:
        norm = _normalize(path)
        if self.failures is not None and norm in self.failures:
            reason, detail = self.failures[norm]
            raise FsError(norm, reason, detail)
        return norm

    def _resolve(self, path: str) -> str:
        """Resolve every symlink in ``path`` inside the root; returns the real machine path."""
        if self._kernel and type(self)._note_link is RootFs._note_link:  # a recorder sees each link
            real = self._kernel_resolve(path)
            if real is not None:
                return real
        return self._resolve_parts(path)

    def _kernel_resolve(self, path: str) -> str | None:
        """The kernel's resolution of ``path`` under the root, or None when it fails (missing, a loop,
        not a folder) or lands outside the root: :meth:`_resolve_parts` then answers."""
        try:
            fd = os.open(self.host_path(path), os.O_PATH | os.O_CLOEXEC)
        except (OSError, ValueError):
            return None
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        finally:
            os.close(fd)
        root = self._real_root
        if root == "/":
            return real if real.startswith("/") else None
        if real == root:
            return "/"
        return real[len(root) :] if real.startswith(root + "/") else None

    def _resolve_parts(self, path: str) -> str:
        """:meth:`_resolve` one part at a time, a ``readlink`` each: absolute targets re-rooted and
        ``..`` stopping at the root."""
        hops = 0
        todo = [part for part in path.split("/") if part]
        current = "/"
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                current = os.path.dirname(current) if current != "/" else "/"
                continue
            candidate = os.path.join(current, part)
            target = self._link_target(candidate)
            if target is None:
                current = candidate
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise FsError(path, GapReason.ERROR, "too many levels of symbolic links")
            todo = [p for p in target.split("/") if p] + todo
            current = "/" if target.startswith("/") else current
        return current

    def _link_target(self, machine_path: str) -> str | None:
        try:
            target = os.readlink(self.host_path(machine_path))
        except OSError:
            return None
        self._note_link(machine_path, target)
        return target

    def _note_link(self, link: str, target: str) -> None:
        """Hook for the recorder: a symlink at machine path ``link`` was followed."""

    def _error(self, path: str, err: OSError) -> FsError:
        norm = _normalize(path)
        reason = _reason_for(err)
        if reason is GapReason.MISSING and self.failures is not None:
            reason = GapReason.NOT_RECORDED
        return FsError(norm, reason, err.strerror or str(err))


def _kernel_resolves() -> bool:
    """True where ``O_PATH`` and ``/proc/self/fd`` exist (Linux with /proc mounted)."""
    if not hasattr(os, "O_PATH"):
        return False
    try:
        fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "/"
    except OSError:
        return False
    finally:
        os.close(fd)


_KERNEL_RESOLVE = _kernel_resolves()


def links_stay_inside(root: str, cap: int = 200_000) -> bool:
    """True when every symlink under ``root`` points, as written, to a path inside ``root`` from its own
    folder (relative, never climbing above ``root``): what every recording topodoc writes holds. False
    for an absolute target, one that climbs out, or a tree of more than ``cap`` entries."""
    seen, todo = 0, [""]
    while todo:
        rel = todo.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError:
            return False
        for item in entries:
            seen += 1
            if seen > cap:
                return False
            here = f"{rel}/{item.name}" if rel else item.name
            if item.is_symlink():
                target = os.readlink(item.path)
                lexical = os.path.normpath(os.path.join(os.path.dirname(here), target))
                if target.startswith("/") or lexical == ".." or lexical.startswith("../"):
                    return False
            elif item.is_dir(follow_symlinks=False):
                todo.append(here)
    return True


def _read_capped(path: str, cap: int) -> bytes:
    """At most ``cap`` bytes, read in 64 KiB chunks: /proc/sys answers one large read() with ENOMEM
    (the kernel allocates a buffer of the size asked for)."""
    chunks, size = [], 0
    with open(path, "rb", buffering=0) as handle:
        while size < cap:
            chunk = handle.read(min(cap - size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


class NvmlError(Exception):
    """An NVML call failed; ``code`` is NVML's numeric return code (3 NotSupported, 15 GpuIsLost...)."""

    NAMES = {
        1: "Uninitialized",
        2: "InvalidArgument",
        3: "NotSupported",
        4: "NoPermission",
        5: "AlreadyInitialized",
        6: "NotFound",
        7: "InsufficientSize",
        9: "DriverNotLoaded",
        10: "Timeout",
        12: "LibraryNotFound",
        13: "FunctionNotFound",
        14: "CorruptedInforom",
        15: "GpuIsLost",
        16: "ResetRequired",
        17: "OperatingSystem",
        18: "LibRmVersionMismatch",
        999: "Unknown",
    }

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = int(code)
        self.detail = detail
        super().__init__(f"NVML error {self.code} ({self.name}){': ' + detail if detail else ''}")

    @property
    def name(self) -> str:
        return self.NAMES.get(self.code, f"code {self.code}")


class NotRecorded(NvmlError):
    """A replayed tape holds no answer for this call (code 999 for callers that only look at codes)."""

    def __init__(self, key: str) -> None:
        super().__init__(999, f"not recorded: {key}")
        self.key = key


class NvmlTimeout(NvmlError):
    """A live NVML call did not return in time, or was not made: an earlier call on the same GPU hung,
    or the overall deadline had passed (code 10, NVML's own Timeout)."""

    def __init__(self, detail: str) -> None:
        super().__init__(TIMEOUT_CODE, detail)


TIMEOUT_CODE = 10  # NVML_ERROR_TIMEOUT


@dataclass(frozen=True)
class Deadline:
    """An instant on the monotonic clock after which the probe stops asking and reports what it has."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()


@dataclass(frozen=True)
class CommandResult:
    argv: list[str]
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    timed_out: bool = False
    missing: bool = False
    truncated: bool = False  # output went past the runner's cap; the command was stopped there


MAX_OUTPUT = 4 << 20  # bytes kept per stream: nvidia-smi topo -m prints a few kB
EXIT_GRACE_S = 1.0  # how long pipes may stay open after the command exits (a descendant holds them)
REAP_S = 2.0  # how long to wait for a killed process to be reaped (D state never is)


class LiveRunner:
    """Runs commands on this machine: no shell, its own process group, and a deadline that holds.

    Both pipes are read through a selector until they close or the deadline passes, never with an
    unbounded wait: at the timeout the process group is killed and the runner stops waiting for pipes
    a descendant (outside the group, or stuck) keeps open; a stream longer than ``max_output`` bytes is
    cut there, the group killed and ``truncated`` set; when the command exits but a descendant keeps
    the pipes open, reading stops :data:`EXIT_GRACE_S` later. A process that cannot be reaped (D state
    on a GPU that fell off the bus) is left behind with ``returncode`` None.
    """

    def __init__(self, max_output: int = MAX_OUTPUT, deadline: Deadline | None = None) -> None:
        self.max_output = max_output
        self.deadline = deadline

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        if self.deadline is not None:
            left = self.deadline.remaining()
            if left <= 0:
                note = f"[topodoc: not run: the overall deadline of {self.deadline.seconds:g} s had passed]"
                return CommandResult(list(argv), stderr=note, timed_out=True)
            timeout = min(timeout, left)
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(list(argv), stderr=f"{argv[0]}: command not found", missing=True)
        except OSError as err:
            return CommandResult(list(argv), stderr=f"{argv[0]}: {err.strerror}", returncode=126)
        try:
            streams, ended = _drain(proc, time.monotonic() + timeout, self.max_output)
        finally:
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()
            _kill_group(proc)  # what is left of the command's group (a descendant holding the pipes)
        returncode = _reap(proc)
        if ended != "exit":
            returncode = None
        out, err = (_text(bytes(buf)) for buf in streams)
        if ended == "overflow":
            err += f"\n[topodoc: output cut at {self.max_output} bytes; the command was stopped]"
        return CommandResult(
            list(argv), out, err, returncode, ended == "timeout", truncated=ended == "overflow"
        )


def _drain(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[list[bytearray], str]:
    """Read both pipes until they close, the deadline, or a stream passes ``cap`` bytes; returns the
    bytes and why reading ended: ``exit``, ``timeout`` or ``overflow``."""
    buffers = [bytearray(), bytearray()]
    with selectors.DefaultSelector() as selector:
        for index, pipe in enumerate((proc.stdout, proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe, selectors.EVENT_READ, index)
        exited_at = None
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now >= min(exited_at + EXIT_GRACE_S, deadline):
                return buffers, "exit"  # the command is done; a descendant holds the pipes
            if now >= deadline:
                return buffers, "timeout"
            wait = min(deadline, exited_at + EXIT_GRACE_S if exited_at else now + 0.2) - now
            for key, _ in selector.select(max(wait, 0.0)):
                chunk = _read_some(key.fileobj, cap - len(buffers[key.data]) + 1)
                if chunk == b"":
                    selector.unregister(key.fileobj)
                elif chunk is not None:
                    buffers[key.data] += chunk
                    if len(buffers[key.data]) > cap:
                        del buffers[key.data][cap:]
                        return buffers, "overflow"
    if proc.poll() is None:  # pipes closed, process still running: wait for it within the deadline
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return buffers, "timeout"
    return buffers, "exit"


def _read_some(pipe, limit: int) -> bytes | None:
    """Up to ``limit`` bytes (64 KiB at most); ``b""`` at end of file, None when nothing is there yet."""
    try:
        return os.read(pipe.fileno(), min(max(limit, 1), 1 << 16))
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _reap(proc: subprocess.Popen) -> int | None:
    try:
        return proc.wait(timeout=REAP_S)
    except subprocess.TimeoutExpired:
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            proc.kill()


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def call_key(fn: str, args: tuple | list) -> str:
    """The tape key of one NVML call: ``["nvmlDeviceGetName", 0]`` as compact JSON."""
    return json.dumps([fn, *args], separators=(",", ":"))


class LiveNvml:
    """pynvml itself: GPU indexes become handles, ctypes results become plain data (``nvml_live``)."""

    def __init__(self) -> None:
        from topodoc.probe.nvml_live import PynvmlAdapter

        self._adapter = PynvmlAdapter()

    def call(self, fn: str, *args):
        return self._adapter.call(fn, *args)


NVML_CALL_TIMEOUT_S = 10.0  # one NVML query answers in milliseconds; a GPU that fell off the bus never does


class TimedNvml:
    """Runs each call of ``inner`` (any object with ``call``) in a worker thread and waits at most
    ``call_timeout`` seconds (less when the ``deadline`` is nearer). A call that does not return raises
    :class:`NvmlTimeout`; its worker is abandoned (a daemon thread, blocked in the driver) and a fresh
    one serves the next calls. Every later call on the same GPU, and every call once a system-wide call
    hung or the deadline passed, raises :class:`NvmlTimeout` at once without reaching ``inner``."""

    def __init__(self, inner, call_timeout: float = NVML_CALL_TIMEOUT_S, deadline: Deadline | None = None):
        self.inner = inner
        self.call_timeout = call_timeout
        self.deadline = deadline
        self.hung: set[int | str] = set()  # GPU indexes, or "system" once a call on no GPU hung
        self._worker: _Worker | None = None

    def call(self, fn: str, *args):
        gpus = _gpus_in(fn, args)
        stuck = [g for g in ("system", *gpus) if g in self.hung]
        if stuck:
            what = "an earlier NVML call" + ("" if stuck[0] == "system" else f" on GPU {stuck[0]}")
            raise NvmlTimeout(f"not asked: {what} did not return")
        budget = self.call_timeout
        if self.deadline is not None:
            budget = min(budget, self.deadline.remaining())
            if budget <= 0:
                passed = f"the overall deadline of {self.deadline.seconds:g} s had passed"
                raise NvmlTimeout(f"not asked: {passed}")
        if self._worker is None:
            self._worker = _Worker()
        done, box = self._worker.submit(lambda: self.inner.call(fn, *args))
        if not done.wait(budget):
            self._worker = None  # stuck inside the call; the next call gets a fresh thread
            self.hung.update(gpus or ("system",))
            raise NvmlTimeout(f"{fn} did not return within {budget:.3g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]


class _Worker:
    """One daemon thread running submitted functions in order."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="topodoc-nvml", daemon=True).start()

    def submit(self, job) -> tuple[threading.Event, dict]:
        done, box = threading.Event(), {}
        self._jobs.put((job, done, box))
        return done, box

    def _serve(self) -> None:
        while True:
            job, done, box = self._jobs.get()
            try:
                box["value"] = job()
            except BaseException as err:  # handed to the caller's thread, raised there
                box["error"] = err
            done.set()


def _gpus_in(fn: str, args: tuple) -> tuple[int, ...]:
    """The GPU indexes a call is about (none for system calls, two for the pair calls)."""
    from topodoc.probe.nvml_live import NO_HANDLE, PAIR_CALLS

    if not fn.startswith("nvmlDevice") or fn in NO_HANDLE or not args:
        return ()
    count = 2 if fn in PAIR_CALLS else 1
    return tuple(a for a in args[:count] if isinstance(a, int))


class TapeError(ValueError):
    """A tape (``nvml.json``, ``commands.json``) whose shape or types are not what the recorder writes."""


def _entries(tape: dict, key: str, name: str) -> list[dict]:
    entries = tape.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise TapeError(f"{name}: {key!r} must be a list of objects")
    return entries


def _typed(entry: dict, field: str, types: tuple, where: str, default=None):
    value = entry.get(field, default)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise TapeError(f"{where}: {field!r} must be {names}, got {_kind(value)}")
    return value


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


class TapeNvml:
    """Replays a tape: each call answers the recorded value or raises the recorded error code.

    The tape's shape (``fn`` a string, ``args`` a list, ``code`` an int) is checked when it is loaded
    (:class:`TapeError`); values are returned as recorded, and the collectors turn a value of the
    wrong type into a Gap."""

    def __init__(self, tape: dict) -> None:
        self.answers: dict[str, tuple[int, object]] = {}
        for n, entry in enumerate(_entries(tape, "calls", "nvml.json")):
            where = f"nvml.json call {n}"
            fn = _typed(entry, "fn", (str,), where)
            args = _typed(entry, "args", (list,), where, [])
            code = _typed(entry, "code", (int,), where, 0)
            if not -(1 << 31) <= code < 1 << 32:
                raise TapeError(f"{where}: 'code' {str(code)[:20]} is not an NVML return code")
            self.answers.setdefault(call_key(fn, args), (code, entry.get("value")))

    def call(self, fn: str, *args):
        key = call_key(fn, args)
        if key not in self.answers:
            raise NotRecorded(key)
        code, value = self.answers[key]
        if code != 0:
            raise NvmlError(code)
        return copy.deepcopy(value)


class RecordingNvml:
    """Passes calls to ``inner`` and writes each call's value or error code into ``tape``."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.tape: dict = {"format": 1, "calls": []}
        self._seen: set[str] = set()

    def call(self, fn: str, *args):
        try:
            value = self.inner.call(fn, *args)
        except NvmlError as err:
            self._add(fn, args, err.code, None)
            raise
        self._add(fn, args, 0, value)
        return value

    def _add(self, fn: str, args: tuple, code: int, value) -> None:
        key = call_key(fn, args)
        if key not in self._seen:
            self._seen.add(key)
            self.tape["calls"].append({"fn": fn, "args": list(args), "code": code, "value": value})


class TapeRunner:
    """Replays recorded commands; an unrecorded command answers as missing with a note in stderr.
    Each entry's types are checked when the tape is loaded (:class:`TapeError`)."""

    def __init__(self, tape: dict) -> None:
        self.answers: dict[str, CommandResult] = {}
        for n, entry in enumerate(_entries(tape, "commands", "commands.json")):
            where = f"commands.json command {n}"
            argv = _typed(entry, "argv", (list,), where)
            if not all(isinstance(a, str) for a in argv):
                raise TapeError(f"{where}: 'argv' must be a list of strings")
            self.answers[json.dumps(argv)] = CommandResult(
                list(argv),
                _typed(entry, "stdout", (str,), where, ""),
                _typed(entry, "stderr", (str,), where, ""),
                _typed(entry, "returncode", (int, type(None)), where),
                _typed(entry, "timed_out", (bool,), where, False),
                _typed(entry, "missing", (bool,), where, False),
                _typed(entry, "truncated", (bool,), where, False),
            )

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        entry = self.answers.get(json.dumps(list(argv)))
        if entry is None:
            return CommandResult(list(argv), stderr="not recorded", missing=True)
        return entry


class RecordingRunner:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.tape: dict = {"format": 1, "commands": []}

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        result = self.inner.run(argv, timeout)
        entry = dataclasses.asdict(result)
        if not result.truncated:
            del entry["truncated"]  # only written when set: older tapes and readers stay the same
        self.tape["commands"].append(entry)
        return result


@dataclass
class Host:
    """One machine as the collectors see it."""

    fs: RootFs
    nvml: object
    runner: object
    meta: dict = dataclasses.field(default_factory=dict)  # a recording's meta.json; {} when live

    @classmethod
    def live(cls, deadline_s: float | None = None) -> Host:
        """This machine; every NVML call in a worker thread with a per-call timeout, and, with
        ``deadline_s``, no NVML call or command started after that many seconds."""
        deadline = Deadline.after(deadline_s) if deadline_s is not None else None
        return cls(RootFs("/"), TimedNvml(LiveNvml(), deadline=deadline), LiveRunner(deadline=deadline))
