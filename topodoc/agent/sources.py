"""The event-source seam: every hardware event the agent reacts to comes through a :class:`Source`.

A source has a ``name``, ``poll(timeout) -> list[RawEvent]`` (waits at most ``timeout`` seconds) and
``close()``; ``done`` is true once it can yield nothing more (a replay at its end). Live sources:

- :class:`UdevSource` — a pyudev ``Monitor`` on the pci, net and infiniband subsystems (add / remove /
  change / bind / unbind); needs libudev;
- :class:`KmsgSource` — ``/dev/kmsg`` followed from its end (one record per read; needs root or
  CAP_SYSLOG when ``kernel.dmesg_restrict=1``);
- :class:`NvmlSource` — NVML critical-Xid events (no root needed); the agent opens it only when the
  kernel log is closed to it, so an Xid is not counted twice. Each event becomes the kernel-log line
  ``NVRM: Xid (PCI:<bus id>): <xid>, (NVML critical Xid)`` so one reader explains both.

:class:`ReplaySource` plays a recorded or scripted stream (JSON lines), which is how tests and
``--replay-events`` drive the agent; nothing patches pyudev or NVML. Opening a live source that cannot
work raises :class:`SourceUnavailable` with the reason, which the agent lists as a disabled check.

Replay format, one JSON object per line (``after`` = seconds since the agent started, default 0)::

    {"after": 0.5, "source": "udev", "action": "remove", "subsystem": "pci", "device": "0000:07:00.0"}
    {"after": 1.0, "source": "kmsg", "line": "NVRM: Xid (PCI:0000:07:00): 79, pid=0, name=x, ..."}
"""

from __future__ import annotations

import errno
import json
import os
import select
import time
from dataclasses import dataclass

from topodoc import jsontext

MAX_KMSG_RECORD = 8192
MAX_REPLAY_EVENTS = 100_000
MAX_REPLAY_LINE = 65_536  # a longer line is cut, fails to parse, and the run stops with exit 2
UDEV_SUBSYSTEMS = ("pci", "net", "infiniband")


class SourceUnavailable(Exception):
    """This source cannot run here; the message says why (shown as a disabled check)."""


@dataclass(frozen=True)
class RawEvent:
    """What a source saw: a udev action on a device, or one kernel-log line."""

    source: str  # "udev", "kmsg"
    time: float  # epoch seconds when the agent received it
    action: str | None = None  # udev: add / remove / change / bind / unbind
    subsystem: str | None = None  # udev: pci / net / infiniband
    device: str | None = None  # udev: the sysfs name (0000:07:00.0, mlx5_0, ib0)
    line: str | None = None  # kmsg: the record's text


class UdevSource:
    name = "udev"
    done = False

    def __init__(self, subsystems: tuple[str, ...] = UDEV_SUBSYSTEMS) -> None:
        try:
            import pyudev

            self._monitor = pyudev.Monitor.from_netlink(pyudev.Context())
            for subsystem in subsystems:
                self._monitor.filter_by(subsystem)
            self._monitor.start()
        except (ImportError, OSError) as err:  # no libudev, or no netlink socket in this sandbox
            raise SourceUnavailable(f"udev device events off: {type(err).__name__}: {err}") from err

    def poll(self, timeout: float) -> list[RawEvent]:
        device = self._monitor.poll(timeout=timeout)
        if device is None:
            return []
        return [RawEvent("udev", time.time(), action=device.action, subsystem=device.subsystem,
                         device=device.sys_name)]

    def close(self) -> None:
        self._monitor.stop()


class KmsgSource:
    name = "kmsg"
    done = False

    def __init__(self, path: str = "/dev/kmsg") -> None:
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as err:
            why = "permission denied (needs root, or CAP_SYSLOG when kernel.dmesg_restrict=1)" \
                if err.errno in (errno.EACCES, errno.EPERM) else (err.strerror or str(err))
            raise SourceUnavailable(f"kernel log ({path}) off: {why}") from err
        os.lseek(self._fd, 0, os.SEEK_END)  # follow from now: history is what `diagnose --kernel-log` reads

    def poll(self, timeout: float) -> list[RawEvent]:
        ready, _, _ = select.select([self._fd], [], [], timeout)
        events: list[RawEvent] = []
        while ready and len(events) < 256:
            try:
                record = os.read(self._fd, MAX_KMSG_RECORD)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.EPIPE:  # records were overwritten before we read them; go on
                    continue
                raise
            if not record:
                break
            first = record.decode("utf-8", errors="replace").split("\n", 1)[0]
            events.append(RawEvent("kmsg", time.time(), line=first))
        return events

    def close(self) -> None:
        os.close(self._fd)


class NvmlSource:
    name = "nvml"
    done = False

    def __init__(self) -> None:
        from topodoc.probe.host import NvmlError
        from topodoc.probe.nvml_live import XidEvents

        try:
            self._events = XidEvents()
        except NvmlError as err:
            raise SourceUnavailable(f"NVML Xid events off: {err}") from err

    def poll(self, timeout: float) -> list[RawEvent]:
        now = time.time()
        return [RawEvent("nvml", now, device=bus, line=f"NVRM: Xid (PCI:{bus}): {xid}, (NVML critical Xid)")
                for bus, xid in self._events.wait(timeout)]

    def close(self) -> None:
        self._events.close()


class ReplaySource:
    """Plays a JSON-lines stream; each event is due ``after`` seconds after the source was opened."""

    name = "replay"

    def __init__(self, path: str, clock=time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._pending = sorted(_read_replay(path), key=lambda item: item[0])

    @property
    def done(self) -> bool:
        return not self._pending

    def poll(self, timeout: float) -> list[RawEvent]:
        if not self._pending:
            time.sleep(min(timeout, 0.05))
            return []
        wait = self._pending[0][0] - (self._clock() - self._start)
        if wait > 0:
            time.sleep(min(wait, timeout))
        due = []
        while self._pending and self._pending[0][0] <= self._clock() - self._start:
            due.append(self._pending.pop(0)[1])
        now = time.time()
        return [RawEvent(time=now, **item) for item in due]

    def close(self) -> None:
        self._pending = []


_FIELDS = {"source", "action", "subsystem", "device", "line"}


def _read_replay(path: str) -> list[tuple[float, dict]]:
    """``(after, fields)`` for every event in the file; a malformed line raises ``ValueError``."""
    out: list[tuple[float, dict]] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for lineno, text in enumerate(iter(lambda: handle.readline(MAX_REPLAY_LINE), ""), 1):
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            if len(out) >= MAX_REPLAY_EVENTS:
                raise ValueError(f"{path}: more than {MAX_REPLAY_EVENTS} events")
            try:
                item = jsontext.loads(text)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not JSON: {err.msg}") from err
            if not isinstance(item, dict) or item.get("source") not in ("udev", "kmsg"):
                raise ValueError(f"{path}:{lineno}: needs \"source\": \"udev\" or \"kmsg\"")
            after = item.get("after", 0)
            if not isinstance(after, (int, float)) or after < 0:
                raise ValueError(f"{path}:{lineno}: \"after\" must be a number of seconds >= 0")
            fields = {k: str(v)[:4096] for k, v in item.items() if k in _FIELDS and v is not None}
            out.append((float(after), fields))
    return out
