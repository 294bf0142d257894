"""Whether to colour output: ``--color always|never`` on the ``topodoc`` group, else ``NO_COLOR``
(https://no-color.org: set and not empty turns colour off), else colour only on a terminal.

The group stores the choice here (:func:`set_choice`); renderers ask :func:`use_color` for the
stream they write to. ``always`` beats ``NO_COLOR``: the user asked on this command line."""

from __future__ import annotations

import os
import sys
from typing import TextIO

CHOICES = ("auto", "always", "never")
_choice = "auto"


def set_choice(choice: str) -> None:
    global _choice
    if choice not in CHOICES:
        raise ValueError(f"--color must be one of {', '.join(CHOICES)}")
    _choice = choice


def use_color(stream: TextIO | None = None) -> bool:
    """Colour for ``stream`` (stdout when None)?"""
    if _choice != "auto":
        return _choice == "always"
    if os.environ.get("NO_COLOR", ""):
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
