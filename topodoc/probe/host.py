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

import copy
import dataclasses
import errno
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from topodoc.model import GapReason

MAX_LINK_HOPS = 40


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

    def __init__(self, root: str | Path, failures: dict[str, tuple[GapReason, str]] | None = None) -> None:
        self.root = os.path.abspath(str(root))
        self.failures = failures

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
        real = self._open_path(path)
        try:
            with open(self.host_path(real), "rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        except OSError as err:
            raise self._error(path, err) from err

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


@dataclass(frozen=True)
class CommandResult:
    argv: list[str]
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    timed_out: bool = False
    missing: bool = False


class LiveRunner:
    """Runs commands on this machine: no shell, its own process group, killed at the timeout."""

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        try:
            proc = subprocess.Popen(
                argv,
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
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            timed_out = True
        return CommandResult(
            list(argv), _text(out), _text(err), None if timed_out else proc.returncode, timed_out
        )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
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


class TapeNvml:
    """Replays a tape: each call answers the recorded value or raises the recorded error code."""

    def __init__(self, tape: dict) -> None:
        self.answers: dict[str, tuple[int, object]] = {}
        for entry in tape.get("calls", []):
            key = call_key(entry["fn"], entry.get("args", []))
            self.answers.setdefault(key, (int(entry.get("code", 0)), entry.get("value")))

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
    """Replays recorded commands; an unrecorded command answers as missing with a note in stderr."""

    def __init__(self, tape: dict) -> None:
        self.answers = {json.dumps(c["argv"]): c for c in tape.get("commands", [])}

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        entry = self.answers.get(json.dumps(list(argv)))
        if entry is None:
            return CommandResult(list(argv), stderr="not recorded", missing=True)
        return CommandResult(
            list(argv),
            entry.get("stdout", ""),
            entry.get("stderr", ""),
            entry.get("returncode"),
            bool(entry.get("timed_out")),
            bool(entry.get("missing")),
        )


class RecordingRunner:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.tape: dict = {"format": 1, "commands": []}

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        result = self.inner.run(argv, timeout)
        self.tape["commands"].append(dataclasses.asdict(result))
        return result


@dataclass
class Host:
    """One machine as the collectors see it."""

    fs: RootFs
    nvml: object
    runner: object
    meta: dict = dataclasses.field(default_factory=dict)  # a recording's meta.json; {} when live

    @classmethod
    def live(cls) -> Host:
        return cls(RootFs("/"), LiveNvml(), LiveRunner())
