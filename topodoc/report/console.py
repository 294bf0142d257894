"""What topodoc says on stderr besides errors: notes (off with ``-q``), detail such as timings (on with
``-v``), and a progress line for long work (only when stderr is a terminal, and not with ``-q``).

The ``topodoc`` group stores ``-q``/``-v`` here (:func:`set_level`); commands call :func:`note`,
:func:`detail` and :func:`progress` instead of echoing to stderr themselves."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import click

from topodoc.report.safe import visible

QUIET, NORMAL, VERBOSE = -1, 0, 1
_level = NORMAL
SPINNER = "|/-\\"
PROGRESS_DELAY_S = 1.0  # work shorter than this shows no progress line at all
PROGRESS_EVERY_S = 0.2


def set_level(level: int) -> None:
    global _level
    _level = level


def quiet() -> bool:
    return _level <= QUIET


def verbose() -> bool:
    return _level >= VERBOSE


def note(prefix: str, message: str) -> None:
    """``PREFIX: note: MESSAGE`` on stderr, unless ``-q``."""
    if not quiet():
        click.echo(visible(f"{prefix}: note: {message}"), err=True)


def detail(prefix: str, message: str) -> None:
    """``PREFIX: MESSAGE`` on stderr, only with ``-v``."""
    if verbose():
        click.echo(visible(f"{prefix}: {message}"), err=True)


class Progress:
    """One self-erasing status line (``label  3.2s |``) on a terminal; nothing anywhere else."""

    def __init__(self, label: str, stream: TextIO | None = None):
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.active = not quiet() and _isatty(self.stream)
        self.started = time.monotonic()
        self.ticks = 0
        self.shown = False

    def tick(self, now: float | None = None) -> None:
        """Redraw the line (the worker thread calls it every ``PROGRESS_EVERY_S``)."""
        if not self.active:
            return
        elapsed = (time.monotonic() if now is None else now) - self.started
        spin = SPINNER[self.ticks % len(SPINNER)]
        self.ticks += 1
        self.stream.write(f"\r{self.label}  {elapsed:.1f}s {spin}\x1b[K")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


@contextmanager
def progress(label: str, stream: TextIO | None = None) -> Iterator[Progress]:
    """Show ``label`` with the elapsed time while the block runs longer than ``PROGRESS_DELAY_S``, when
    the stream is a terminal; erase it at the end. Silent when piped, redirected or ``-q``."""
    bar = Progress(label, stream)
    if not bar.active:
        yield bar
        return
    done = threading.Event()

    def run() -> None:
        if done.wait(PROGRESS_DELAY_S):
            return
        while not done.is_set():
            bar.tick()
            done.wait(PROGRESS_EVERY_S)

    worker = threading.Thread(target=run, name="topodoc-progress", daemon=True)
    worker.start()
    try:
        yield bar
    finally:
        done.set()
        worker.join(timeout=1.0)
        bar.clear()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
