"""Whether to colour terminal output: a terminal, and no ``NO_COLOR`` (https://no-color.org: any
non-empty value turns colour off)."""

from __future__ import annotations

import os
from typing import TextIO


def use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
