"""The one reader for every text input a command takes (``topo``, ``nccltests``, ``diagnose --nccl-tests``).

:func:`read_text` takes ``FILE`` or ``-`` (stdin) and returns a :class:`TextInput`:

- gzip is read through (a ``.gz`` name, or the gzip magic bytes on a pipe);
- UTF-16 with a BOM, or without one (NUL in every other byte: PowerShell's ``>`` and ``Out-File``),
  UTF-8 with or without a BOM; invalid bytes become U+FFFD; CRLF and lone CR end lines;
- reads are streamed and capped at :data:`MAX_BYTES` (after decompression): ``/dev/zero``, an endless
  pipe or a gzip bomb stop there, and ``truncated_at`` says how many bytes were read;
- a line longer than :data:`MAX_LINE` characters is blanked (its line number kept, so evidence line
  numbers stay right) and listed in ``long_lines``: no parser ever sees it, and the caller reports it.

:func:`strip_ansi` is the one ANSI escape stripper of the text parsers.
Errors are :class:`InputError`, one line each, for the command to print.
"""

from __future__ import annotations

import contextlib
import gzip
import sys
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import regex

MAX_BYTES = 32 * 2**20  # a topology paste or an nccl-tests output is a few hundred KB at most
MAX_LINE = 64 * 2**10  # characters; the widest real matrix row (76 NICs) is under 1,000
_CHUNK = 2**20

# CSI (colours, cursor moves), OSC (titles, links) ended by BEL or ST, a stray ESC, and a colour code whose
# ESC byte a paste lost (``[4m``, ``[0;32m``). Every repetition is bounded and possessive: linear time.
_ANSI = regex.compile(
    r"\x1b\[[0-9;?]{0,32}+[A-Za-z]|\x1b\][^\x07\x1b\n]{0,1024}+(?:\x07|\x1b\\)|\x1b|\[[0-9;]{0,8}+m"
)


class InputError(ValueError):
    """An input could not be read (missing, unreadable, a broken .gz); the message is one line."""


@dataclass(frozen=True)
class TextInput:
    name: str  # the path as given, or "stdin"
    text: str
    truncated_at: int | None = None  # bytes read when MAX_BYTES stopped the read, else None
    long_lines: tuple[tuple[int, int], ...] = ()  # (line number, length) of each blanked over-long line

    def notes(self) -> list[str]:
        """What the reader left out, one line each, for the command to print on stderr."""
        notes = []
        if self.truncated_at is not None:
            notes.append(f"{self.name}: input truncated at {self.truncated_at} bytes (the rest was not read)")
        for number, length in self.long_lines[:5]:
            notes.append(f"{self.name}: line {number} skipped: {length} characters, over the "
                         f"{MAX_LINE}-character limit")
        if len(self.long_lines) > 5:
            notes.append(f"{self.name}: {len(self.long_lines) - 5} more over-long line(s) skipped")
        return notes


def label(source: str) -> str:
    return "stdin" if source == "-" else source


def read_text(source: str, max_bytes: int = MAX_BYTES, max_line: int = MAX_LINE) -> TextInput:
    """FILE or ``-`` -> :class:`TextInput` (see the module docstring); :class:`InputError` when unreadable."""
    name = label(source)
    try:
        with _opened(source) as raw:
            data, truncated = _read_capped(_maybe_gunzip(raw, source), max_bytes)
    except (OSError, EOFError, zlib.error) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise InputError(f"cannot read {name}: {reason}") from err
    text, long_lines = cap_lines(decode(data), max_line)
    return TextInput(name, text, len(data) if truncated else None, long_lines)


@contextlib.contextmanager
def _opened(source: str):
    if source == "-":
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


def _read_capped(stream: BinaryIO, max_bytes: int) -> tuple[bytes, bool]:
    """At most ``max_bytes`` bytes of ``stream``, read in chunks; True when more were there."""
    buffer = bytearray()
    while len(buffer) <= max_bytes:
        chunk = stream.read(min(_CHUNK, max_bytes + 1 - len(buffer)))
        if not chunk:
            return bytes(buffer), False
        buffer += chunk
    return bytes(buffer[:max_bytes]), True


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


def cap_lines(text: str, max_line: int = MAX_LINE) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``text`` with every line over ``max_line`` characters blanked; the blanked lines' numbers, lengths."""
    lines = text.splitlines()
    long_lines = tuple((n, len(line)) for n, line in enumerate(lines, start=1) if len(line) > max_line)
    if not long_lines:
        return text, ()
    blank = {n for n, _length in long_lines}
    return "\n".join("" if n in blank else line for n, line in enumerate(lines, start=1)), long_lines


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (also those whose ESC byte was lost in a paste)."""
    return _ANSI.sub("", text) if ("\x1b" in text or "[" in text) else text
