"""Text inputs as ``diagnose FILE...`` takes them: read each file, tell its kind by content, parse it.

:func:`read_inputs` returns one :class:`TextInput` per path: the kind it was taken to be (or
``unknown``), other kinds whose marks it also carries, the parse result, what the parser could not read
(``damaged``), and a parse error when the text looked like its kind but could not be read at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from topodoc.text import detect
from topodoc.text.reader import TextReadError, read_text

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
    "rdma-link",  # rdma link show: port states, like ibstat
    "nvidia-smi",  # the default table: GPU names, bus ids, persistence, MIG (also a TEXT_KINDS kind)
)
LOG_KINDS = ("nccl-log", "nccl-tests", "dmesg")
# read into the rules' ``texts`` fact: ((path, kind, parsed), ...); each parser is ``parse`` of its module
TEXT_KINDS = {
    "cuda-p2p": "cuda_samples",
    "nvidia-smi": "smi_table",
    "nccl-traceback": "pytrace",
    "nccl-env": "envlist",
    "fabric-manager": "fabricmanager",
    "setpci": "setpci",
    "ulimit": "ulimit",
    "lsmod": "lsmod",
    "shm": "shm",  # df -h /dev/shm, mount | grep shm, /proc/mounts
    "nccl1-tests": "nccl1_tests",
    "kernel-cmdline": "cmdline",
    "ibv-devices": "ibv_devices",
}
# every kind whose parse the rules read as ``texts``: the kinds above, and lspci (its ACSCtl lines)
FACT_KINDS = (*TEXT_KINDS, "lspci")


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
    # read a piece at a time (a big dmesg, :func:`_streamed`): ``text`` is then empty, and ``has_nccl``
    # says whether a line held "NCCL"
    streamed: bool = False
    has_nccl: bool = False
    read_with: tuple[TextInput, ...] = ()  # streamed: its second kinds' entries, read in the same pass

    def mentions_nccl(self) -> bool:
        """Whether a line of the text holds ``NCCL`` (the log analyzer then reads it too)."""
        return self.has_nccl if self.streamed else "NCCL" in self.text


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


class _KernelEvents(tuple):
    """A dmesg's events (:class:`~topodoc.parsers.kernel_log.Kept`), ``damaged`` saying what the bound left
    unread, if anything."""

    damaged: tuple[str, ...] = ()


def _kernel_log(text: str):
    from topodoc.parsers.kernel_log import Reader

    reader = Reader()
    reader.feed(text)
    events = _KernelEvents(reader.events)
    events.damaged = reader.kept.notes()
    return events


def _nccl_tests(text: str):
    from topodoc.parsers.nccl_tests import parse

    return parse(text)


def _module_parse(module: str) -> Callable[[str], Any]:
    def run(text: str):
        import importlib

        return importlib.import_module(f"topodoc.parsers.{module}").parse(text)

    return run


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
    "rdma-link": _module_parse("rdma_link"),
    **{kind: _module_parse(module) for kind, module in TEXT_KINDS.items()},
}


class InputError(ValueError):
    """A path could not be read at all (missing, unreadable, broken .gz, too large)."""


def read_inputs(paths: list[str]) -> list[TextInput]:
    """One entry per path, then one per other kind found in the same file that reads cleanly. A paste of
    several commands (a shell prompt and a command, its output, the next prompt ...) is read region by
    region: each command's output goes to the parser of its own kind (:func:`regions`)."""
    out = []
    for path in paths:
        item = read_input(path)
        parts = _by_region(item)
        if parts:
            out.extend(parts)
            continue
        out.append(item)
        out.extend(_secondary(item))
    return out


# A shell prompt followed by a command topodoc reads the output of: ``$ nvidia-smi topo -m``,
# ``user@host:~$ sudo lspci -vvv``, ``[root@node ~]# ibstat``, ``(venv) $ dmesg``, ``PS C:\> nvidia-smi``.
_PROMPT_COMMAND = re.compile(
    r"^[ \t]{0,8}(?:\([\w.-]{1,40}\)[ \t]*)?"
    r"(?:\[?[\w.-]{1,64}@[\w.-]{1,64}[^\n$#>]{0,120}?\]?[ \t]*[$#]|[$#%]|PS [^\n>]{0,120}>)[ \t]+"
    r"(?P<cmd>(?:sudo[ \t]+(?:-\S+[ \t]+)*)?(?:nvidia-smi|lspci|ibstat|ibstatus|ibv_devinfo|ibv_devices|"
    r"ibdev2netdev|show_gids|dmesg|journalctl|lstopo|setpci|rdma|lsmod|ulimit|env|printenv|df|mount|systemctl|"
    r"cat|grep|mpirun|srun|torchrun|python3?|\./\S*(?:_perf|Test|P2P)\S*|all_reduce_perf|topodoc)\b[^\n]{0,400})$",
    re.M,
)
MAX_REGIONS = 64


def regions(text: str) -> list[tuple[int, int, str | None]]:
    """``(first line, last line, command)`` of each region of a paste, 1-based: what comes before the first
    prompt, then each prompt's command and its output up to the next prompt. One region when no prompt
    (or one) is found; at most :data:`MAX_REGIONS` (the rest stay in the last one)."""
    starts = []
    for m in _PROMPT_COMMAND.finditer(text):
        starts.append((text.count("\n", 0, m.start()) + 1, m["cmd"].strip()))
        if len(starts) >= MAX_REGIONS:
            break
    total = text.count("\n") + 1
    if len(starts) < 2 and not (starts and starts[0][0] > 1):
        return [(1, total, starts[0][1] if starts else None)]
    out = []
    if starts[0][0] > 1:
        out.append((1, starts[0][0] - 1, None))
    for i, (line, cmd) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else total
        out.append((line, end, cmd))
    return out


def _by_region(item: TextInput) -> list[TextInput]:
    """The regions of a multi-command paste, each read as its own kind (line numbers kept: each region is
    parsed with the lines before it blank); empty when the file is one region."""
    if item.kind in WHOLE_DOCUMENTS or not item.text:
        return []
    spans = regions(item.text)
    if len(spans) < 2:
        return []
    lines = item.text.split("\n")
    parts: list[TextInput] = []
    for first, last, cmd in spans:
        body = "\n".join(lines[first - 1:last])
        found = detect.detect(body)
        if found.kind == "unknown":
            continue
        padded = "\n" * (first - 1) + body
        # the parser reads the output without its prompt line (``$ ibstatus`` is no line of ibstatus's, and
        # was listed as damaged); the part keeps the text as pasted (a prompt names the host)
        output = "\n" * first + "\n".join(lines[first:last]) if cmd is not None else padded
        part = _parse_as(item.path, output, found.kind, found.also)
        if cmd is not None and part.text is not None:  # its prompt line put back (as _parse_as left the rest)
            part = replace(part, text="\n" * (first - 1) + lines[first - 1] + part.text[first - 1:])
        parts.append(replace(part, secondary=bool(parts)))
    if not parts:
        return []
    kinds = tuple(dict.fromkeys(k for p in parts for k in (p.kind, *p.also) if k != parts[0].kind))
    parts[0] = replace(parts[0], also=tuple(dict.fromkeys(parts[0].also + kinds)))
    return parts


def _secondary(item: TextInput) -> list[TextInput]:
    if item.streamed:
        return list(item.read_with)
    extra = []
    for kind in item.also:
        if kind == "nccl-log":
            extra.append(TextInput(item.path, kind, text=item.text, secondary=True))
        elif (kind in HARDWARE_KINDS or kind in TEXT_KINDS) and kind in PARSERS:
            try:
                parsed = PARSERS[kind](item.text)
            except (ValueError, KeyError, IndexError):
                continue
            damaged = tuple(getattr(parsed, "damaged", ()) or getattr(parsed, "warnings", ()) or ())
            extra.append(TextInput(item.path, kind, (), parsed, None, damaged, item.text, secondary=True))
    return extra


def read_input(path: str) -> TextInput:
    try:
        if path != "-" and _streamable(path):
            item = _streamed(path)
            if item is not None:
                return item
        text = read_text(path)
    except TextReadError as err:
        raise InputError(str(err)) from err
    return parse_text(path, text)


# a regular file of at least this many bytes (or a .gz) is read a piece at a time when it is a dmesg
STREAM_FROM = 4 * 2**20


def _streamable(path: str) -> bool:
    """A regular file (read again from its start when the streamed read gives up) that is big or a .gz."""
    import os
    import stat

    try:
        info = os.stat(path)
    except OSError:
        return False  # read_text says why
    return stat.S_ISREG(info.st_mode) and (info.st_size >= STREAM_FROM or path.endswith(".gz"))


def _streamed(path: str) -> TextInput | None:
    """:func:`parse_text` of :func:`read_text`'s text of a big dmesg read a piece at a time, holding only
    the events, never the text (a 50 MB dmesg is mostly other drivers' lines); None when the text is not
    one that reads the same this way -- not a dmesg alone by its head, a paste of several commands,
    launcher prefixes on its lines -- and is to be read whole (again: a regular file). The same result,
    the line numbers of its evidence included: each piece of whole lines is cleaned, its long lines cut,
    searched for prompts and "NCCL", and read by the kernel log's
    :class:`~topodoc.parsers.kernel_log.Reader`, as the whole text would be."""
    from topodoc.text.reader import read_pieces

    reading, raw = read_pieces(path)
    try:
        return _stream(path, reading, raw)
    finally:
        raw.close()


def _stream(path: str, reading, raw) -> TextInput | None:
    from topodoc.parsers.kernel_log import Reader
    from topodoc.text.reader import PrefixCount, clean_lines, print_notes

    head: list[str] = []
    size = 0
    for piece in raw:  # what detect() reads of the cleaned text
        head.append(clean_lines(piece))
        size += len(head[-1])
        if size >= detect.HEAD_CHARS:
            break
    text = "".join(head)[:detect.HEAD_CHARS]
    if not detect.BY_NAME["dmesg"].test(text, text.split("\n")):
        return None  # (the dmesg marks alone first: a big NCCL log is not detected twice)
    found = detect.detect(text)
    if found.kind != "dmesg" or any(kind not in _STREAMED_SECOND for kind in found.also):
        return None
    events, prefixes, cut = Reader(), PrefixCount(), _Cut(MAX_LINE)
    second = {kind: _STREAMED_SECOND[kind]() for kind in found.also}
    lines = 0  # ended by "\n" (the kernel log's may count other breaks)
    has_nccl = False

    def pieces():
        yield from head
        for piece in raw:
            yield clean_lines(piece)

    for piece in pieces():
        prefixes.add(piece)
        piece = cut.cut(piece, lines)
        has_nccl = has_nccl or "NCCL" in piece
        if _prompt_after_first(piece, lines):
            return None  # regions: _by_region reads each command's output as its kind
        events.feed(piece)
        for reader in second.values():
            reader.feed(piece)
        lines += piece.count("\n")
    if not prefixes.few():
        return None  # clean() would strip a launcher prefix off each line
    print_notes(reading)
    extra = []
    for kind, reader in second.items():  # as _secondary reads them
        try:
            parsed = reader.result()
        except (ValueError, KeyError, IndexError):
            continue
        damaged = tuple(getattr(parsed, "damaged", ()) or getattr(parsed, "warnings", ()) or ())
        extra.append(TextInput(path, kind, (), parsed, None, damaged, secondary=True, streamed=True,
                               has_nccl=has_nccl))
    return TextInput(path, "dmesg", found.also, tuple(events.events), None, cut.notes() + events.kept.notes(),
                     streamed=True,
                     has_nccl=has_nccl, read_with=tuple(extra))


def _cmdline_reader():
    from topodoc.parsers.cmdline import Reader

    return Reader()


# the second kinds a dmesg's head may show that are read in the same pass (a whole dmesg prints the boot
# command line): kind -> a reader of pieces (``feed``, ``result()`` as the kind's parse of the whole)
_STREAMED_SECOND = {"kernel-cmdline": _cmdline_reader}


# _PROMPT_COMMAND after a newline (its ^), so that ``re`` looks only there; every prompt holds one of these
_PROMPT_AFTER_NEWLINE = re.compile("\n(?:" + _PROMPT_COMMAND.pattern.removeprefix("^") + ")", re.M)
_PROMPT_CHARS = ("$", "#", "%", "PS ")


def _prompt_after_first(piece: str, before: int) -> bool:
    """Whether :func:`regions` finds a prompt in ``piece`` (whole lines, ``before`` lines before it) that
    is not on the text's first line: the text then has regions (:func:`_by_region`)."""
    if not any(char in piece for char in _PROMPT_CHARS):
        return False
    if before and _PROMPT_COMMAND.match(piece):
        return True
    return _PROMPT_AFTER_NEWLINE.search(piece) is not None


class _Cut:
    """:func:`cap_lines` a piece at a time: ``cut(piece, before)`` is the piece with its lines cut at
    ``most`` characters (lines numbered after ``before``), ``notes()`` what :func:`cap_lines` of the
    whole would say."""

    def __init__(self, most: int) -> None:
        self.most, self.count, self.first = most, 0, 0

    def cut(self, piece: str, before: int) -> str:
        if not _longer(piece, self.most):
            return piece
        lines = piece.split("\n")
        for i, line in enumerate(lines):
            if len(line) > self.most:
                lines[i] = line[:self.most]
                self.count += 1
                self.first = self.first or before + i + 1
        return "\n".join(lines)

    def notes(self) -> tuple[str, ...]:
        if not self.count:
            return ()
        return (f"{self.count} line(s) longer than {self.most} characters cut (first: line {self.first})",)


def parse_text(path: str, text: str) -> TextInput:
    found = detect.detect(text)
    if found.kind == "unknown":
        return _last_resort(path, text) or TextInput(path, "unknown", error=found.reason, text=text)
    return _parse_as(path, text, found.kind, found.also)


# the kinds another command reads whole (``topodoc topo FILE``, ``topodoc nccltests FILE``): what their parser
# reads, diagnose reads, whatever the detector's marks say
LAST_RESORT = ("smi-topo", "nccl-tests")


def _last_resort(path: str, text: str) -> TextInput | None:
    for kind in LAST_RESORT:
        item = _parse_as(path, text, kind)
        if item.parsed is not None and not item.error and _has_content(kind, item.parsed):
            return item
    return None


def _has_content(kind: str, parsed) -> bool:
    if kind == "nccl-tests":
        return bool(getattr(parsed, "rows", None))
    return bool(getattr(parsed, "links", None))


def _parse_as(path: str, text: str, kind: str, also: tuple[str, ...] = ()) -> TextInput:
    parser = PARSERS.get(kind)
    if parser is None:
        note = None if kind == "nccl-log" else "recognized; its parser is not part of this build yet"
        return TextInput(path, kind, also, error=note, text=text)
    cut: tuple[str, ...] = ()
    if kind not in WHOLE_DOCUMENTS:
        text, cut = cap_lines(text, 1024 if kind == "nccl-tests" else MAX_LINE)
    try:
        parsed = parser(text)
    except (ValueError, KeyError, IndexError) as err:  # each parser's *ParseError is a ValueError
        error = f"looks like {detect.title(kind)} but could not be read: {err}"
        return TextInput(path, kind, also, error=error, text=text)
    damaged = cut + tuple(getattr(parsed, "damaged", ()) or getattr(parsed, "warnings", ()) or ())
    return TextInput(path, kind, also, parsed, None, damaged, text)


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
