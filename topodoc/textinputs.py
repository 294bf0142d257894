"""Text inputs as ``diagnose FILE...`` takes them: read each file, tell its kind by content, parse it.

:func:`read_inputs` returns one :class:`TextInput` per path: the kind it was taken to be (or
``unknown``), other kinds whose marks it also carries, the parse result, what the parser could not read
(``damaged``), and a parse error when the text looked like its kind but could not be read at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from topodoc.parsers import detect
from topodoc.parsers.textread import TextReadError, read_text

HARDWARE_KINDS = (
    "topodoc-json",
    "nccl-topo-xml",
    "hwloc-xml",
    "nvidia-smi-q",
    "nvidia-smi-q-xml",
    "nvlink",
    "smi-topo",
    "lspci",
    "ibstat",
    "ibv-devinfo",
    "ibdev2netdev",
    "show-gids",
)
LOG_KINDS = ("nccl-log", "nccl-tests", "dmesg")


@dataclass(frozen=True)
class TextInput:
    path: str
    kind: str
    also: tuple[str, ...] = ()
    parsed: Any = None
    error: str | None = None
    damaged: tuple[str, ...] = ()
    text: str = ""
    secondary: bool = False  # a second kind found in the same file (a paste holding topo -m and a log)


def _smi_topo(text: str):
    from topodoc.parsers.smi_topo import parse

    return parse(text)


def _probe_json(text: str):
    from topodoc import codec

    return codec.load(text)


def _nccl_topo(text: str):
    from topodoc.parsers.nccl_topo_xml import parse

    return parse(text)


def _hwloc(text: str):
    from topodoc.parsers.hwloc_xml import parse

    return parse(text)


def _smi_q(text: str):
    from topodoc.parsers.smi_query import parse

    return parse(text)


def _nvlink(text: str):
    from topodoc.parsers.nvlink_text import parse

    return parse(text)


def _lspci(text: str):
    from topodoc.parsers.lspci import parse

    return parse(text)


def _rdma(name: str) -> Callable[[str], Any]:
    def run(text: str):
        from topodoc.parsers import rdma_text

        return getattr(rdma_text, f"parse_{name}")(text)

    return run


def _kernel_log(text: str):
    from topodoc.parsers.kernel_log import parse

    return tuple(parse(text))


def _nccl_tests(text: str):
    from topodoc.parsers.nccl_tests import parse

    return parse(text)


PARSERS: dict[str, Callable[[str], Any]] = {
    "topodoc-json": _probe_json,
    "nccl-topo-xml": _nccl_topo,
    "hwloc-xml": _hwloc,
    "nvidia-smi-q": _smi_q,
    "nvidia-smi-q-xml": _smi_q,
    "nvlink": _nvlink,
    "smi-topo": _smi_topo,
    "lspci": _lspci,
    "ibstat": _rdma("ibstat"),
    "ibv-devinfo": _rdma("ibv_devinfo"),
    "ibdev2netdev": _rdma("ibdev2netdev"),
    "show-gids": _rdma("show_gids"),
    "nccl-tests": _nccl_tests,
    "dmesg": _kernel_log,  # kernel events (Xid, AER, DMAR...): the `kernel` fact of the rules
    # "nccl-log" is read by topodoc.parsers.nccl_log.analyze from the path (streaming)
}


class InputError(ValueError):
    """A path could not be read at all (missing, unreadable, broken .gz, too large)."""


def read_inputs(paths: list[str]) -> list[TextInput]:
    """One entry per path, then one per other kind found in the same file that reads cleanly."""
    out = []
    for path in paths:
        item = read_input(path)
        out.append(item)
        out.extend(_secondary(item))
    return out


def _secondary(item: TextInput) -> list[TextInput]:
    extra = []
    for kind in item.also:
        if kind == "nccl-log":
            extra.append(TextInput(item.path, kind, text=item.text, secondary=True))
        elif kind in HARDWARE_KINDS and kind in PARSERS:
            try:
                parsed = PARSERS[kind](item.text)
            except (ValueError, KeyError, IndexError):
                continue
            damaged = tuple(getattr(parsed, "damaged", ()) or getattr(parsed, "warnings", ()) or ())
            extra.append(TextInput(item.path, kind, (), parsed, None, damaged, item.text, secondary=True))
    return extra


def read_input(path: str) -> TextInput:
    try:
        text = read_text(path)
    except TextReadError as err:
        raise InputError(str(err)) from err
    return parse_text(path, text)


def parse_text(path: str, text: str) -> TextInput:
    found = detect.detect(text)
    if found.kind == "unknown":
        return TextInput(path, "unknown", error=found.reason, text=text)
    parser = PARSERS.get(found.kind)
    if parser is None:
        note = None if found.kind == "nccl-log" else "recognized; its parser is not part of this build yet"
        return TextInput(path, found.kind, found.also, error=note, text=text)
    cut: tuple[str, ...] = ()
    if found.kind not in WHOLE_DOCUMENTS:
        text, cut = cap_lines(text, 1024 if found.kind == "nccl-tests" else MAX_LINE)
    try:
        parsed = parser(text)
    except (ValueError, KeyError, IndexError) as err:  # each parser's *ParseError is a ValueError
        return TextInput(
            path,
            found.kind,
            found.also,
            error=f"looks like {detect.title(found.kind)} but could not be read: {err}",
            text=text,
        )
    damaged = cut + tuple(getattr(parsed, "damaged", ()) or getattr(parsed, "warnings", ()) or ())
    return TextInput(path, found.kind, found.also, parsed, None, damaged, text)


MAX_LINE = 4096
WHOLE_DOCUMENTS = ("topodoc-json", "nccl-topo-xml", "hwloc-xml", "nvidia-smi-q-xml")


def _longer(text: str, most: int, piece: int = 1 << 20) -> bool:
    """Does a line of ``text`` hold more than ``most`` characters? Read a piece of about ``piece``
    characters at a time (cut after a newline), so a big text is never held as a list of its lines."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + piece)
        end = len(text) if end < 0 else end
        if max(map(len, text[start:end].split("\n"))) > most:
            return True
        start = end + 1
    return False


def cap_lines(text: str, most: int = MAX_LINE) -> tuple[str, tuple[str, ...]]:
    """Lines longer than ``most`` characters are cut there (no tool output has such lines; a pasted binary
    or a hostile input does), so every line parser's work stays bounded (the nccl-tests parser's NCCL-line
    pattern is quadratic in the line length, hence its lower cap)."""
    if not _longer(text, most):
        return text, ()
    lines = text.split("\n")
    long = [i for i, line in enumerate(lines, start=1) if len(line) > most]
    for i in long:
        lines[i - 1] = lines[i - 1][:most]
    return "\n".join(lines), (
        f"{len(long)} line(s) longer than {most} characters cut (first: line {long[0]})",
    )
