"""Read one text input the way a user hands it over: a path or ``-`` (stdin), plain or ``.gz`` (by its
magic bytes, not its name), UTF-8 or UTF-16 (BOM, or NUL bytes every other byte, as PowerShell's ``>``
writes), CRLF line ends, ANSI colour codes, and launcher prefixes (``[1,0]<stdout>:``, ``srun -l``'s
``0: ``, pdsh's ``host: ``) that every line carries.

This is the one place text commands (``diagnose FILE...``, ``--from file.xml``) read their inputs; it
is meant to be swapped for ``topodoc.inputs`` when that lands. Reads are capped at :data:`MAX_BYTES`.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib

import regex

MAX_BYTES = 64 * 1024 * 1024
_ANSI = regex.compile(r"\x1b\[[0-9;?]*+[A-Za-z]|\x1b\][^\x07]*+\x07")
_MPI_PREFIX = regex.compile(r"^\[\d++,\d++\]<std(?:out|err)>:")
_COMMON_PREFIX = regex.compile(r"^(?:\d{1,5}|[A-Za-z][\w.-]{0,62}+): ")


class TextReadError(ValueError):
    """The input cannot be read (missing, a broken .gz, too large)."""


def read_text(path: str) -> str:
    """The decoded, cleaned text of ``path`` (``-`` reads stdin)."""
    data = _read_bytes(path)
    return clean(decode(data))


def _read_bytes(path: str) -> bytes:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise TextReadError(f"cannot read {path}: {err.strerror or err}") from err
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(path, data)
    if len(data) > MAX_BYTES:
        raise TextReadError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
    return data


def _gunzip(path: str, data: bytes) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            return handle.read(MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise TextReadError(f"{path}: broken gzip data ({err})") from err


def decode(data: bytes) -> str:
    """Bytes -> text: UTF-16 by BOM or by NULs in the odd/even bytes, else UTF-8 (invalid bytes replaced)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    head = data[:4096]
    if len(head) >= 4 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) == 0:
        return data.decode("utf-16-le", errors="replace")
    if len(head) >= 4 and head[0::2].count(0) > len(head) // 4 and head[1::2].count(0) == 0:
        return data.decode("utf-16-be", errors="replace")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def clean(text: str) -> str:
    """Drop ANSI codes, CR line ends and NULs; drop a launcher prefix when (nearly) every line has one."""
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = [_MPI_PREFIX.sub("", line) for line in text.split("\n")]
    return "\n".join(_strip_common_prefix(lines))


def _strip_common_prefix(lines: list[str]) -> list[str]:
    """pdsh ``host: `` and ``srun -l`` ``3: ``: stripped only when at least 90% of non-empty lines start
    with such a prefix, so ``Timestamp : ...`` or ``CA 'mlx5_0'`` lines are never cut."""
    filled = [line for line in lines if line.strip()]
    if len(filled) < 3:
        return lines
    prefixed = sum(1 for line in filled if _COMMON_PREFIX.match(line))
    if prefixed * 10 < len(filled) * 9:
        return lines
    return [_COMMON_PREFIX.sub("", line, count=1) for line in lines]
