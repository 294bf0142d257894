"""Decoding JSON that came from input: the one ``loads`` readers use.

Python's decoder recurses once per ``[`` or ``{``: ``[[[[...`` a few thousand deep raises RecursionError,
which no reader expects (it became ``internal error``). Here it is a :class:`json.JSONDecodeError` like
any other broken JSON, so every ``except json.JSONDecodeError`` / ``except ValueError`` already in place
turns it into one clear line.
"""

from __future__ import annotations

import json
from typing import Any


class TooDeep(json.JSONDecodeError):
    def __str__(self) -> str:
        return self.msg


def loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        message = "nested too deep (thousands of [ or {): not a topodoc input"
        raise TooDeep(message, "", 0) from None
