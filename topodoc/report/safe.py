"""The one place input-derived text is made safe for a terminal: every human renderer's output passes
through :func:`visible` (the :func:`human` decorator), JSON escapes on its own.

A log line, a node's snapshot or a pasted file can hold terminal controls: OSC sequences (window title,
OSC 52 clipboard writes, hyperlinks), CSI (cursor moves, screen clears), lone C0/C1 control characters
and Unicode bidi overrides (text that displays in another order than it reads). Each such character is
replaced by a visible escape (``\\x1b``, ``\\x9b``, ``\\u202e``), so what was there can still be read;
newlines and tabs stay. Coloured output keeps SGR colour sequences (``ESC [ ... m``, what rich and
click.style write) and escapes everything else: an input cannot set a title, write the clipboard or
move the cursor even then.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TypeVar

# C0 controls but tab and newline, DEL, C1 controls; bidi embeddings/overrides/isolates, the marks, line
# and paragraph separators, zero-width characters and the BOM (invisible, or reorder what follows)
_UNSAFE = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0)) + [
    0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
    *range(0x2066, 0x206A), 0xFEFF,
]
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
_SGR = re.compile(r"\x1b\[[0-9;]{0,64}m")
_ANY_UNSAFE = re.compile("[" + "".join(re.escape(chr(c)) for c in _UNSAFE) + "]")

F = TypeVar("F", bound=Callable[..., str])


def visible(text: str, *, keep_sgr: bool = False) -> str:
    """``text`` with every terminal control and bidi/invisible format character escaped visibly;
    ``keep_sgr`` keeps colour sequences (our own styling) whole."""
    if not _ANY_UNSAFE.search(text):
        return text
    if not keep_sgr:
        return text.translate(_TABLE)
    out, at = [], 0
    for match in _SGR.finditer(text):
        out.append(text[at : match.start()].translate(_TABLE))
        out.append(match.group())
        at = match.end()
    out.append(text[at:].translate(_TABLE))
    return "".join(out)


def human(render: F) -> F:
    """A renderer whose text goes to a person: its result made :func:`visible` (colour kept when the
    renderer was asked for colour with ``color=True``)."""

    @functools.wraps(render)
    def wrapper(*args, **kwargs):
        return visible(render(*args, **kwargs), keep_sgr=bool(kwargs.get("color")))

    return wrapper  # type: ignore[return-value]
