"""``--watch-log PATH|GLOB``: follow NCCL logs as jobs write them and analyse each file as it grows.

Each poll expands the patterns (new files that match are picked up; ``.gz`` files, which are rotated
logs, are ignored), reads what was appended since the last poll (at most :data:`READ_CHUNK` bytes per
file per poll), and notices rotation (the path now names another inode) and truncation (the file is
shorter than what was read): either starts the file over. Complete lines are kept per file, bounded:
the first :data:`HEAD_BYTES` (where NCCL prints its version, transports and GDR choice) plus the last
:data:`TAIL_BYTES` (recent errors); a file's analysis is the analyzer's public
``analyze_text(text, name)`` over that kept text, re-run only when the file grew (so line numbers in
evidence are within the kept text, not the whole file, once a file outgrows the cap).
"""

from __future__ import annotations

import glob
import os
from collections import deque
from dataclasses import dataclass, field

READ_CHUNK = 1 << 20
HEAD_BYTES = 1 << 20
TAIL_BYTES = 3 << 20
MAX_FILES = 64
MAX_PARTIAL = 1 << 16  # a line longer than this is cut


@dataclass
class _File:
    inode: tuple[int, int]
    offset: int = 0
    head: list[str] = field(default_factory=list)
    head_bytes: int = 0
    tail: deque = field(default_factory=deque)
    tail_bytes: int = 0
    partial: str = ""
    dirty: bool = False
    restarts: int = 0

    def add(self, lines: list[str]) -> None:
        for line in lines:
            size = len(line) + 1
            if self.head_bytes + size <= HEAD_BYTES and not self.tail:
                self.head.append(line)
                self.head_bytes += size
                continue
            self.tail.append(line)
            self.tail_bytes += size
            while self.tail_bytes > TAIL_BYTES:
                self.tail_bytes -= len(self.tail.popleft()) + 1
        self.dirty = self.dirty or bool(lines)

    def text(self) -> str:
        gap = ["[topodoc: lines between the kept head and tail were dropped]"] if self.tail_bytes and \
            self.head_bytes >= HEAD_BYTES - MAX_PARTIAL else []
        return "\n".join([*self.head, *gap, *self.tail]) + "\n"


@dataclass(frozen=True)
class FileAnalysis:
    path: str
    analysis: object  # topodoc.logmodel.LogAnalysis, or None while no NCCL line was seen
    kept_bytes: int
    restarts: int  # rotations + truncations seen
    error: str | None = None


class LogWatcher:
    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.patterns = tuple(patterns)
        self._files: dict[str, _File] = {}
        self._results: dict[str, FileAnalysis] = {}

    def paths(self) -> list[str]:
        found: list[str] = []
        for pattern in self.patterns:
            matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
            found += [p for p in sorted(matches) if not p.endswith(".gz") and os.path.isfile(p)]
        return list(dict.fromkeys(found))[:MAX_FILES]

    def poll(self) -> list[str]:
        """Read what every watched file gained; the paths that changed."""
        changed = []
        for path in self.paths():
            if self._read(path):
                changed.append(path)
        for gone in set(self._files) - set(self.paths()):
            del self._files[gone]
            self._results.pop(gone, None)
        return changed

    def analyse(self) -> dict[str, FileAnalysis]:
        """Re-analyse the files that grew since the last call; every file's latest analysis."""
        for path, state in self._files.items():
            if state.dirty:
                state.dirty = False
                self._results[path] = _analyse(path, state)
        return dict(self._results)

    def _read(self, path: str) -> bool:
        try:
            st = os.stat(path)
            inode = (st.st_dev, st.st_ino)
            state = self._files.get(path)
            if state is None or state.inode != inode or st.st_size < state.offset:
                restarts = 0 if state is None else state.restarts + 1
                state = self._files[path] = _File(inode, restarts=restarts)
                state.dirty = True  # a rotated / truncated file is analysed afresh even if still empty
            if st.st_size == state.offset:
                return state.dirty
            with open(path, "rb") as handle:
                handle.seek(state.offset)
                data = handle.read(READ_CHUNK)
        except OSError:
            return False
        state.offset += len(data)
        text = state.partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        state.partial = lines.pop()[:MAX_PARTIAL]
        state.add(lines)
        return True


def _analyse(path: str, state: _File) -> FileAnalysis:
    import io

    from topodoc import catalogue
    from topodoc.parsers.nccl_log import NoNcclLinesError, analyze

    kept = state.head_bytes + state.tail_bytes
    data = io.BytesIO(state.text().encode("utf-8", "surrogateescape"))
    try:
        return FileAnalysis(path, analyze([(path, data)], catalogue.scan_literals()), kept, state.restarts)
    except NoNcclLinesError:
        return FileAnalysis(path, None, kept, state.restarts)
    except Exception as err:  # an analyzer bug on one file must not stop the agent
        return FileAnalysis(path, None, kept, state.restarts, f"{type(err).__name__}: {err}")
