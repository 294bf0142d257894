"""The code ``@dataclass`` compiles for topodoc's classes, kept per user so that a command compiles it once.

CPython's ``dataclasses`` writes every method it adds (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
a frozen class's ``__setattr__`` and ``__delattr__``) as source text and compiles it with ``exec`` when the
class is made: six compiles per frozen class, about 0.3 ms each time. The 54 classes ``diagnose --from``
loads were a third of its CPU time, paid again by every process.

:func:`install` (called by the command line before it imports a command) gives the ``dataclasses`` module
its own ``exec``: for a class of a ``topodoc`` module, the text is compiled once and its code object kept
in the user cache (:mod:`topodoc.usercache`), one file per module, keyed by the exact text and the
interpreter that compiled it; the next process runs that code instead of compiling the same text again.
The same text compiled by the same interpreter is the same code, so the classes are the ones
``dataclasses`` makes. Anything else compiles as ``dataclasses`` does: another module's class, a text not
kept yet, a file that is missing, damaged, foreign or from another Python (its header names
``sys.version``), no usable cache folder. A file holds the texts its module used in the last process that
compiled one, so an edited class leaves nothing behind. The cache file is as trusted as the user's own
files (the replay cache's model): whoever can write it can also rewrite topodoc itself.
``TOPODOC_CODE_CACHE=0`` turns it off.
"""

from __future__ import annotations

import builtins
import sys

PREFIX = "dataclass-code-"  # + module name + ".marshal", in usercache.folder()
MAX_BYTES = 4 * 1024 * 1024
_HEADER = f"topodoc dataclass code 1 {sys.implementation.name} {sys.version}\n".encode()

_kept: dict[str, dict[str, object]] = {}  # module -> text -> code, as read from its file
_used: dict[str, dict[str, object]] = {}  # module -> text -> code this process ran
_dirty: set[str] = set()  # modules whose file is written at exit (a text compiled here)


def install() -> None:
    """Give ``dataclasses`` the caching ``exec`` (once; a no-op where it has no ``exec`` call to serve, and
    with ``TOPODOC_CODE_CACHE=0``, which leaves ``dataclasses`` as it is: nothing read or written)."""
    import os

    if os.environ.get("TOPODOC_CODE_CACHE", "") == "0":
        return
    import dataclasses

    if getattr(dataclasses, "exec", None) is _exec:
        return
    dataclasses.exec = _exec  # a module global: found before the builtin by dataclasses' own code


def _exec(source, globals=None, locals=None, /):  # noqa: A002 - exec's own parameter names
    module = globals.get("__name__") if isinstance(globals, dict) else None
    if not isinstance(source, str) or not isinstance(module, str) or module.split(".")[0] != "topodoc":
        return builtins.exec(source, globals, locals)
    return builtins.exec(code_of(module, source), globals, locals)


def code_of(module: str, source: str):
    """The code ``compile`` gives for ``source`` as ``dataclasses``' ``exec`` would compile it (filename
    ``<string>``, no ``__future__`` flag: ``dataclasses`` imports none), kept for ``module``."""
    if module not in _kept:
        _kept[module] = _read(module)
    code = _kept[module].get(source)
    if code is None:
        code = compile(source, "<string>", "exec", dont_inherit=True)
        if not _dirty:
            import atexit

            atexit.register(_write_all)
        _dirty.add(module)
    _used.setdefault(module, {})[source] = code
    return code


def _name(module: str) -> str:
    return f"{PREFIX}{module}.marshal"


def _read(module: str) -> dict[str, object]:
    from topodoc import usercache

    raw = usercache.read(_name(module), MAX_BYTES)
    if raw is None or not raw.startswith(_HEADER):
        return {}
    import marshal

    try:
        table = marshal.loads(raw[len(_HEADER):])
    except (ValueError, EOFError, TypeError):
        return {}
    code_type = type(_read.__code__)
    if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, code_type) for k, v in table.items()):
        return {}
    return table


def _write_all() -> None:
    import marshal

    from topodoc import usercache

    for module in sorted(_dirty):
        data = _HEADER + marshal.dumps(_used.get(module, {}))
        if len(data) <= MAX_BYTES:
            usercache.write(_name(module), data)
    _dirty.clear()
