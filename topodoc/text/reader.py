"""Read one text input the way a user hands it over, for ``diagnose FILE...`` and ``--from file.xml``:
the bytes through :mod:`topodoc.inputs` (``-`` for stdin, ``.gz`` by name or magic bytes, UTF-8 or
UTF-16 with or without a BOM, CRLF, streamed with byte, line and line-length caps, the one ANSI
stripper), then what is particular to pastes: launcher prefixes (``[1,0]<stdout>:``, ``srun -l``'s
``0: ``, pdsh's ``host: ``) that every line carries, and NUL bytes.
"""

from __future__ import annotations

import re

import regex

MAX_BYTES = 64 * 1024 * 1024
MAX_LINES = 2_000_000  # a pasted NCCL log of a large job; topology pastes are far smaller
_MPI_PREFIX = regex.compile(r"^\[\d++,\d++\]<std(?:out|err)>:")
_COMMON_PREFIX = regex.compile(r"^(?:\d{1,5}|[A-Za-z][\w.-]{0,62}+): ")
_MPI_PREFIX_LINES = regex.compile(_MPI_PREFIX.pattern, regex.MULTILINE)  # ^: after "\n" only, as split
_PREFIX_LIKE_LINES = re.compile(r"^(?:\d{1,5}|[A-Za-z][^\s:]{0,62}): ", re.MULTILINE)
_NO_PRINTABLE_LINE = regex.compile(r"^[^\n!-~]*+$", regex.MULTILINE)


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
    if _few_prefixed(text):
        return text  # (what _strip_common_prefix would decide, without splitting a big dmesg in lines)
    return "\n".join(_strip_common_prefix(text.split("\n")))


def _few_prefixed(text: str) -> bool:
    """True when :func:`_strip_common_prefix` surely leaves ``text``'s lines as they are: fewer than 90%
    of at least 3 non-blank lines start with a prefix. Lines holding a printable ASCII character other
    than a space are surely non-blank; counted from the few lines that hold none. The prefixed lines are
    over-counted (any run of characters other than spaces and colons for the name: ``re``, fast)."""
    prefixed = sum(1 for _ in _PREFIX_LIKE_LINES.finditer(text))
    if not prefixed:
        return True
    filled = text.count("\n") + 1 - len(_NO_PRINTABLE_LINE.findall(text))
    return filled >= 3 and prefixed * 10 < filled * 9


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
