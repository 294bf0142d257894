"""Read one text input the way a user hands it over, for ``diagnose FILE...`` and ``--from file.xml``:
the bytes through :mod:`topodoc.inputs` (``-`` for stdin, ``.gz`` by name or magic bytes, UTF-8 or
UTF-16 with or without a BOM, CRLF, streamed with byte, line and line-length caps, the one ANSI
stripper), then what is particular to pastes: launcher prefixes (``[1,0]<stdout>:``, ``srun -l``'s
``0: ``, pdsh's ``host: ``) that every line carries, and NUL bytes.
"""

from __future__ import annotations

import regex

MAX_BYTES = 64 * 1024 * 1024
MAX_LINES = 2_000_000  # a pasted NCCL log of a large job; topology pastes are far smaller
_MPI_PREFIX = regex.compile(r"^\[\d++,\d++\]<std(?:out|err)>:")
_COMMON_PREFIX = regex.compile(r"^(?:\d{1,5}|[A-Za-z][\w.-]{0,62}+): ")
_MPI_PREFIX_LINES = regex.compile(_MPI_PREFIX.pattern, regex.MULTILINE)  # ^: after "\n" only, as split
_COMMON_PREFIX_LINES = regex.compile(_COMMON_PREFIX.pattern, regex.MULTILINE)


class TextReadError(ValueError):
    """The input cannot be read (missing, a broken .gz)."""


def read_text(path: str) -> str:
    """The decoded, cleaned text of ``path`` (``-`` reads stdin); what the caps left out goes to stderr."""
    import sys

    from topodoc.inputs import InputError
    from topodoc.inputs import read_text as read_input

    try:
        item = read_input(path, max_bytes=MAX_BYTES, max_lines=MAX_LINES)
    except InputError as err:
        raise TextReadError(str(err)) from err
    for note in item.notes():
        print(f"note: {note}", file=sys.stderr)
    return clean(item.text)


def decode(data: bytes) -> str:
    """Bytes -> text (see :func:`topodoc.inputs.decode`)."""
    from topodoc.inputs import decode as _decode

    return _decode(data)


def clean(text: str) -> str:
    """Drop ANSI codes, CR line ends and NULs; drop a launcher prefix when (nearly) every line has one."""
    from topodoc.inputs import strip_ansi

    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if "<std" in text:  # (every MPI prefix holds it) the prefix off each line, the text not split
        text = _MPI_PREFIX_LINES.sub("", text)
    if not _COMMON_PREFIX_LINES.search(text):
        return text  # no line starts with a prefix: nothing to strip (a big dmesg is never split in lines)
    return "\n".join(_strip_common_prefix(text.split("\n")))


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
