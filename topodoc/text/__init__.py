"""Pasted texts, the way ``diagnose FILE...`` reads them: one folder, one entry point.

A paste is read once (:mod:`.reader`, through :mod:`topodoc.inputs`: ``-``, ``.gz``, UTF-16, CRLF, ANSI,
launcher prefixes), cut into regions at shell prompts and told apart by content (:mod:`.detect`, the one
registry of recognizers; ``topo``'s and ``nccltests``' parsers as recognizers of last resort), parsed by
each kind's parser (:mod:`.inputs`), and the hardware it describes becomes a partial
:class:`~topodoc.model.Snapshot` (:mod:`.machine`; a pasted ``topo -m`` alone is placed on the stand-in tree
of :mod:`.placement`) whose facets and evidence citations are :mod:`.facets`.

The entry point: :func:`read` (paths -> ``TextInput`` per file and region), :func:`build` (texts -> the
partial machine), :func:`cite` (a report's evidence pointed at the input lines), :func:`title` (a kind's name
for people). Everything imports lazily: ``diagnose --from`` loads none of it.
"""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """A path could not be read at all (missing, unreadable, broken .gz, too large)."""


def read(paths: list[str]) -> list:
    """One ``TextInput`` per path and per region of a multi-command paste (:func:`.inputs.read_inputs`)."""
    from topodoc.text import inputs

    try:
        return inputs.read_inputs(paths)
    except inputs.InputError as err:
        raise InputError(str(err)) from err


def build(texts: list, logs: Any = None, base: Any = None):
    """The partial machine the texts describe (None when none describes hardware)."""
    from topodoc.text.machine import build as _build

    return _build(texts, logs, base)


def cite(report, machine, given: tuple[str, ...] = ()):
    """``report`` with its evidence pointed at the input lines that gave each value."""
    from topodoc.text.facets import cite as _cite

    return _cite(report, machine, given)


def title(kind: str) -> str:
    """What the report calls a kind: ``nvidia-smi topo -m``, ``lspci -vvv`` ..."""
    from topodoc.text.detect import title as _title

    return _title(kind)
