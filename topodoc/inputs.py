"""The one reader for every text input a command takes (``topo``, ``nccltests``, ``diagnose --nccl-tests``).

:func:`read_text` takes ``FILE`` or ``-`` (stdin) and returns a :class:`TextInput`:

- gzip is read through (a ``.gz`` name, or the gzip magic bytes on a pipe);
- UTF-16 with a BOM, or without one (NUL in every other byte: PowerShell's ``>`` and ``Out-File``),
  UTF-8 with or without a BOM; invalid bytes become U+FFFD; CRLF and lone CR end lines;
- reads are streamed, line by line, and capped at :data:`MAX_BYTES` (after decompression) and
  :data:`MAX_LINES`: ``/dev/zero``, an endless pipe or a gzip bomb stop there, and ``truncated`` says so;
- an input whose characters are more than 10% undecodable (past the first 4,096 such) is binary, an
  :class:`InputError`, found within its first few hundred KB: ``/dev/urandom`` is never held;
- a line longer than :data:`MAX_LINE` characters is read past, never held, and left blank (its line
  number kept, so evidence line numbers stay right) and listed in ``long_lines``: no parser sees it, and
  the caller reports it (:meth:`TextInput.notes`).

:func:`strip_ansi` is the one ANSI escape stripper of the text parsers.
Errors are :class:`InputError`, one line each, for the command to print.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

MAX_BYTES = 32 * 2**20  # a topology paste or an nccl-tests output is a few hundred KB at most
MAX_LINES = 100_000  # an nccl-tests run of ~300 ranks with NCCL INFO lines mixed in fits
MAX_LINE = 64 * 2**10  # characters; the widest real matrix row (76 NICs) is under 1,000
_CHUNK = 2**16
BINARY_MIN_BAD = 4096  # undecodable characters before a mostly-undecodable input is refused as binary

# CSI (colours, cursor moves), OSC (titles, links) ended by BEL or ST, a stray ESC, and a colour code whose
# ESC byte a paste lost (``[4m``, ``[0;32m``). Every repetition is bounded and possessive: linear time.
_ANSI_PATTERN = (
    r"\x1b\[[0-9;?]{0,32}+[A-Za-z]|\x1b\][^\x07\x1b\n]{0,1024}+(?:\x07|\x1b\\)|\x1b|\[[0-9;]{0,8}+m"
)
# Whether _ANSI_PATTERN can match at all (every match starts with ESC or is a lost-ESC colour code): a plain
# ``re`` search, so text without escapes (most logs) never loads the ``regex`` module's compiler.
_LOST_ESC = re.compile(r"\[[0-9;]{0,8}m")  # (a literal first: re scans for it)
_ansi = None


class InputError(ValueError):
    """An input could not be read (missing, unreadable, a broken .gz); the message is one line."""


@dataclass(frozen=True)
class TextInput:
    name: str  # the path as given, or "stdin"
    text: str
    truncated: str | None = None  # why reading stopped early ("at 33554432 bytes", "after 500000 lines")
    long_lines: tuple[tuple[int, int], ...] = ()  # (line number, length) of each blanked over-long line

    def notes(self) -> list[str]:
        """What the reader left out, one line each, for the command to print on stderr."""
        notes = []
        if self.truncated is not None:
            notes.append(f"{self.name}: input truncated {self.truncated} (the rest was not read)")
        for number, length in self.long_lines[:5]:
            notes.append(f"{self.name}: line {number} skipped: {length} characters, over the "
                         f"{MAX_LINE}-character limit")
        if len(self.long_lines) > 5:
            notes.append(f"{self.name}: {len(self.long_lines) - 5} more over-long line(s) skipped")
        return notes


def label(source: str) -> str:
    return "stdin" if source == "-" else source


def read_text(
    source: str, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES, max_line: int = MAX_LINE
) -> TextInput:
    """FILE or ``-`` -> :class:`TextInput` (see the module docstring); :class:`InputError` when unreadable.

    Streamed: at most ``max_bytes`` (decompressed) bytes and ``max_lines`` lines are read, and an
    over-long line is counted, never held."""
    reading = Reading(label(source))
    text = "".join(iter_text(source, reading, max_bytes, max_lines, max_line))
    return TextInput(reading.name, text, reading.truncated, tuple(reading.long_lines))


@dataclass
class Reading:
    """What :func:`iter_text` left out, known once its last piece was read (as :class:`TextInput`'s)."""

    name: str
    truncated: str | None = None
    long_lines: list[tuple[int, int]] = field(default_factory=list)
    capped: bool = False  # max_lines stopped the reading

    def notes(self) -> list[str]:
        return TextInput(self.name, "", self.truncated, tuple(self.long_lines)).notes()


def iter_text(
    source: str, reading: Reading, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES,
    max_line: int = MAX_LINE,
) -> Iterator[str]:
    """The text :func:`read_text` returns, a piece of whole lines at a time (about :data:`_PIECE`
    characters, each piece ending with a newline): the pieces joined are its text, and once the last one
    is read ``reading`` holds what it says besides. :class:`InputError` (raised while iterating) when
    unreadable."""
    name = reading.name
    try:
        with _opened(source) as raw:
            capped = _Capped(_maybe_gunzip(raw, source), max_bytes)
            yield from _pieces(_text_stream(capped), max_lines, max_line, reading)
    except _Binary as err:
        raise InputError(f"{name}: {err}") from None
    except (OSError, EOFError, zlib.error) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise InputError(f"cannot read {name}: {' '.join(reason.split())[:200]}") from err
    reading.truncated = f"at {max_bytes} bytes" if capped.truncated else None
    if reading.capped:
        reading.truncated = f"after {max_lines} lines"


@contextlib.contextmanager
def _opened(source: str):
    if source == "-":
        if sys.stdin is None:
            raise OSError("stdin is closed")
        yield sys.stdin.buffer  # not closed: it is the process's
        return
    with open(source, "rb") as handle:
        yield handle


def _maybe_gunzip(raw: BinaryIO, source: str) -> BinaryIO:
    peek = getattr(raw, "peek", None)
    magic = peek(2)[:2] if peek else b""
    if magic == b"\x1f\x8b" or source.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


class _Binary(ValueError):
    pass


class _Capped(io.RawIOBase):
    """``stream`` up to ``limit`` bytes, then end of file; ``truncated`` once a byte past the limit exists."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self._stream, self._left, self.truncated = stream, limit, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            self.truncated = self.truncated or bool(self._stream.read(1))
            return 0
        data = self._stream.read(min(len(buffer), self._left))
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def _text_stream(capped: _Capped) -> io.TextIOWrapper:
    """Decoded text with universal newlines; the encoding sniffed from the first bytes."""
    binary = io.BufferedReader(capped, buffer_size=_CHUNK)
    encoding = utf16_encoding(binary.peek(64)[:64]) or "utf-8-sig"
    return io.TextIOWrapper(binary, encoding=encoding, errors="replace", newline=None)


def _read_all(text: io.TextIOWrapper, max_lines: int, max_line: int) -> tuple[str, list, bool]:
    """What :func:`_read_lines` reads, as one text (each line ended by a newline, the last one too), read
    a piece of text at a time: (text, over-long lines, whether ``max_lines`` stopped us)."""
    reading = Reading("")
    text = "".join(_pieces(text, max_lines, max_line, reading))
    return text, reading.long_lines, reading.capped


def _pieces(text: io.TextIOWrapper, max_lines: int, max_line: int, reading: Reading) -> Iterator[str]:
    """:func:`_read_all`'s text a piece of whole lines at a time (``reading`` gets the over-long lines and
    whether ``max_lines`` stopped us). A piece that holds an over-long line, and whatever follows it, is
    read line by line."""
    count, carry = 0, ""
    chars = bad = 0
    while True:
        piece = text.read(_PIECE)
        if not piece:
            break
        chars, bad = chars + len(piece), bad + piece.count("\ufffd")
        _refuse_binary(chars, bad)
        piece = carry + piece
        cut = piece.rfind("\n") + 1
        carry = piece[cut:]
        whole = piece[:cut]
        lines = whole.count("\n")
        if len(carry) > max_line or count + lines > max_lines or (
                whole and max(map(len, whole.split("\n"))) > max_line):
            rest = _Prefixed(whole + carry, text)
            yield from _line_pieces(rest, max_lines - count, max_line, count, reading)
            return
        if whole:
            yield whole
        count += lines
    if carry:
        if count + 1 > max_lines:
            reading.capped = True
            return
        yield carry + "\n"


def _line_pieces(text, max_lines: int, max_line: int, before: int, reading: Reading) -> Iterator[str]:
    """:func:`_iter_lines`' lines, each ended by a newline, joined in pieces of about :data:`_PIECE`
    characters; their over-long lines numbered after the ``before`` lines already read."""
    batch: list[str] = []
    size = 0
    for line in _iter_lines(text, max_lines, max_line, reading, before):
        batch.append(line + "\n")
        size += len(line) + 1
        if size >= _PIECE:
            yield "".join(batch)
            batch, size = [], 0
    if batch:
        yield "".join(batch)


_PIECE = 1 << 20  # characters per read of _read_all


class _Prefixed:
    """``head`` then the rest of ``text``: what :func:`_read_lines` and :func:`_skip_line` call."""

    def __init__(self, head: str, text: io.TextIOWrapper) -> None:
        self._head, self._text = io.StringIO(head, newline="\n"), text

    def readline(self, size: int = -1) -> str:
        piece = self._head.readline(size)
        if piece and (piece.endswith("\n") or len(piece) == size):
            return piece
        return piece + self._text.readline(size - len(piece) if size >= 0 else -1)

    def read(self, size: int = -1) -> str:
        piece = self._head.read(size)
        if len(piece) == size:
            return piece
        return piece + self._text.read(size - len(piece) if size >= 0 else -1)


def _read_lines(text: io.TextIOWrapper, max_lines: int, max_line: int):
    """Lines (over-long ones blanked, their number and length kept), and whether ``max_lines`` stopped us."""
    reading = Reading("")
    lines = list(_iter_lines(text, max_lines, max_line, reading))
    return lines, reading.long_lines, reading.capped


def _iter_lines(text, max_lines: int, max_line: int, reading: Reading, before: int = 0) -> Iterator[str]:
    """:func:`_read_lines`' lines one at a time; ``reading`` gets the over-long ones (numbered after
    ``before`` lines) and whether ``max_lines`` stopped us."""
    chars = bad = count = 0
    while count < max_lines:
        piece = text.readline(max_line + 1)
        if not piece:
            return
        chars, bad = chars + len(piece), bad + piece.count("\ufffd")
        _refuse_binary(chars, bad)
        if len(piece) > max_line and not piece.endswith("\n"):
            length = len(piece) + _skip_line(text)
            reading.long_lines.append((before + count + 1, length))
            piece = ""
        count += 1
        yield piece.rstrip("\n")
    reading.capped = bool(text.read(1))


def _skip_line(text: io.TextIOWrapper) -> int:
    """Read past the rest of the current line without keeping it; its length (without the newline)."""
    skipped = 0
    while True:
        piece = text.readline(_CHUNK)
        if not piece or piece.endswith("\n"):
            return skipped + len(piece.rstrip("\n"))
        skipped += len(piece)


def utf16_encoding(head: bytes) -> str | None:
    """``"utf-16"`` for a BOM, ``"utf-16-le"``/``"-be"`` for mostly-ASCII UTF-16 without one, else None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    head = head[:64]
    pairs = len(head) // 2
    if pairs < 4:
        return None
    odd, even = head[1::2].count(0), head[0::2].count(0)
    if odd >= pairs * 0.9 and even == 0:
        return "utf-16-le"
    if even >= pairs * 0.9 and odd == 0:
        return "utf-16-be"
    return None


def decode(data: bytes) -> str:
    """Bytes of a capture -> text: UTF-16 (BOM or not), else UTF-8 (BOM dropped); never raises."""
    encoding = utf16_encoding(data)
    if encoding:
        return data.decode(encoding, errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (also those whose ESC byte was lost in a paste)."""
    global _ansi
    if "\x1b" not in text and ("[" not in text or not _LOST_ESC.search(text)):
        return text
    if _ansi is None:
        import regex

        _ansi = regex.compile(_ANSI_PATTERN)
    return _ansi.sub("", text)


def _refuse_binary(chars: int, bad: int) -> None:
    """More than :data:`BINARY_MIN_BAD` undecodable characters, and over 10% of what was read: binary."""
    if bad > BINARY_MIN_BAD and bad * 10 > chars:
        raise _Binary(f"binary data, not text: {bad} of the first {chars} characters are not "
                      "UTF-8 or UTF-16 (a device like /dev/urandom, or a compressed or binary file)")
