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
# the two patterns above on the first line of a text, and after a newline (of a text ending with one)
_PREFIX_LIKE_FIRST = re.compile(_PREFIX_LIKE_LINES.pattern.removeprefix("^"))
_PREFIX_LIKE_AFTER_NEWLINE = re.compile("\n" + _PREFIX_LIKE_LINES.pattern.removeprefix("^"))
_BLANK_FIRST = re.compile(r"[^\n!-~]*\n")
_BLANK_AFTER_NEWLINE = re.compile(r"\n[^\n!-~]*(?=\n)")


class TextReadError(ValueError):
    """The input cannot be read (missing, a broken .gz)."""


def read_text(path: str) -> str:
    """The decoded, cleaned text of ``path`` (``-`` reads stdin); what the caps left out goes to stderr."""
    reading, pieces = read_pieces(path)
    text = "".join(pieces)
    print_notes(reading)
    return clean(text)


def read_pieces(path: str):
    """``(reading, pieces)``: the text of ``path`` before :func:`clean`, read a piece of whole lines at a
    time as it is iterated (:func:`topodoc.inputs.iter_text`; :class:`TextReadError` raised while
    iterating); ``reading`` holds what the caps left out once the last piece is read."""
    from topodoc.inputs import Reading, label

    reading = Reading(label(path))
    return reading, _checked(path, reading)


def _checked(path: str, reading):
    from topodoc.inputs import InputError, iter_text

    try:
        yield from iter_text(path, reading, max_bytes=MAX_BYTES, max_lines=MAX_LINES)
    except InputError as err:
        raise TextReadError(str(err)) from err


def print_notes(reading) -> None:
    import sys

    for note in reading.notes():
        print(f"note: {note}", file=sys.stderr)


def decode(data: bytes) -> str:
    """Bytes -> text (see :func:`topodoc.inputs.decode`)."""
    from topodoc.inputs import decode as _decode

    return _decode(data)


def clean(text: str) -> str:
    """Drop ANSI codes, CR line ends and NULs; drop a launcher prefix when (nearly) every line has one."""
    text = clean_lines(text)
    if _few_prefixed(text):
        return text  # (what _strip_common_prefix would decide, without splitting a big dmesg in lines)
    return "\n".join(_strip_common_prefix(text.split("\n")))


def clean_lines(text: str) -> str:
    """What :func:`clean` does to each line whatever the others hold (ANSI codes, CR, NULs, MPI launcher
    prefixes): :func:`clean` of a text but for the common prefix, the same on any cut after a newline."""
    from topodoc.inputs import strip_ansi

    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if "<std" in text:  # (every MPI prefix holds it) the prefix off each line, the text not split
        text = _MPI_PREFIX_LINES.sub("", text)
    return text


class PrefixCount:
    """:func:`_few_prefixed` of a text given a piece at a time (cut after newlines, each piece through
    :func:`clean_lines`): :meth:`add` each piece, then :meth:`few` is its answer on the whole text, so
    :func:`clean` of the whole is :func:`clean_lines` of each piece when it is True."""

    def __init__(self) -> None:
        self.prefixed = self.filled = 0

    def add(self, piece: str) -> None:
        # the patterns after a newline, so that ``re`` looks only there, and on the piece's first line
        first = _PREFIX_LIKE_FIRST.match(piece) is not None
        self.prefixed += first + sum(1 for _ in _PREFIX_LIKE_AFTER_NEWLINE.finditer(piece))
        # _few_prefixed's count + 1 less the empty lines, the one after the text's last newline included
        blank = _BLANK_FIRST.match(piece) is not None
        self.filled += piece.count("\n") - blank - sum(1 for _ in _BLANK_AFTER_NEWLINE.finditer(piece))

    def few(self) -> bool:
        return not self.prefixed or (self.filled >= 3 and self.prefixed * 10 < self.filled * 9)


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
