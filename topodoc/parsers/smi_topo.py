"""Parse ``nvidia-smi topo -m`` / ``topo -mp`` / ``topo -p2p <r|w|n|a|p>`` text into a ConnectionMatrix.

Input: any text that holds one such matrix: a bare capture, a terminal paste with a prompt before it
and a log after it, or a larger report (vLLM ``collect_env``, SGLang ``check_env``). The first matrix
found is parsed. Tolerated: the command pasted on the header's own line (``$ nvidia-smi topo -m   GPU0
GPU1 ...``), tabs or spaces, CRLF, ANSI colour codes (also with the ESC byte lost, as
``[4m``), a header with or without indentation or with names run together (``GPU0GPU1``), cells run
together (``NODENODE``), extra blank lines, quoted lines (``> ``), the trailing legends.

Output (:class:`topodoc.model.ConnectionMatrix`):

- ``gpus``: one ``MatrixGpu`` per ``GPU<n>`` column, with ``cpu_affinity`` (``"0-31"``,
  ``"0-55,112-167"``), ``numa_affinity`` (``"0"``, ``"0-1"``) and ``gpu_numa_id``; ``N/A`` is ``None``.
- ``nics``: one ``MatrixNic`` per other column. ``device`` comes from the ``NIC Legend``
  (``NIC0: mlx5_0``); old drivers name the column after the device itself (``mlx5_0``), and then
  ``device`` is that name.
- ``links[row][col]``: every cell exactly as printed (``"X"``, ``"NV12"``, ``"PIX"``, ``"OK"``,
  ``"N/A"``), ``SOC`` normalised to ``SYS``.
- ``kind``: ``"p2p"`` when the cells are peer-to-peer statuses (``OK``/``NS``/``CNS``/``GNS``/``TNS``/
  ``DR``/``U``), else ``"topo"``; ``p2p_mode`` from a ``topo -p2p <mode>`` command line, if pasted.
- ``warnings``: what a truncated or damaged paste lacks (missing rows, short rows, legend entries), and
  the NICs nvidia-smi left out (``76 NICs found in the topology, only displaying 56 in the matrix.``).

Raises :class:`SmiTopoParseError` only when no matrix is found at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import regex

from topodoc.inputs import strip_ansi
from topodoc.model import ConnectionMatrix, MatrixGpu, MatrixNic
from topodoc.topology.vocab import SMI_LEVELS

MAX_DEVICES = 256  # GPUs + NICs + NVSwitch columns; the widest real matrix has under 100 (76 NICs)


class SmiTopoParseError(ValueError):
    """The text holds no ``nvidia-smi topo`` matrix."""


AFFINITY_HEADS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
P2P_CELLS = frozenset({"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"})

# Every pattern is linear: possessive repeats and atomic cells never give back what they took, and a
# search that could start anywhere in a run (``_NIC_CAP``) starts only where the run does.
_QUOTE = regex.compile(r"^\s*+>++ ?")
_CELL = r"NV\d++|" + "|".join(SMI_LEVELS) + r"|SOC|CNS|GNS|TNS|NS|OK|DR|N/A|X|U"
_CELL_PART = regex.compile(_CELL)
_CELL_RUN = regex.compile(rf"(?>{_CELL})++")
_NAME_PART = regex.compile(r"(?:GPU|NIC)\d++|mlx\d_\d++")
_NAME_RUN = regex.compile(r"(?:(?:GPU|NIC)\d++|mlx\d_\d++)++")
_NAME = regex.compile(r"[A-Za-z][A-Za-z0-9_.-]*+(?<=\d)")
_GPU = regex.compile(r"GPU\d++")
_NIC_COLUMN = regex.compile(r"NIC\d++")
_AFFINITY_VALUE = regex.compile(r"[0-9][0-9,\-]*+")
_LEGEND_NIC = regex.compile(r"^\s*+(NIC\d++)\s*+:\s*+(\S++)\s*+$")
_P2P_MODE = regex.compile(r"topo\s++-p2p\s++([rwnap])\b")
_NIC_CAP = regex.compile(
    r"(?<![0-9])([0-9]++) NICs found in the topology, only displaying ([0-9]++) in the matrix"
)


@dataclass(frozen=True)
class _Header:
    line: int  # index of the header line
    names: tuple[str, ...]  # device columns, in order
    heads: tuple[str, ...]  # affinity columns present, in order


@dataclass(frozen=True)
class _Row:
    name: str
    cells: tuple[str, ...]
    extras: tuple[str, ...]  # affinity values, as printed


def parse(text: str) -> ConnectionMatrix:
    """Text holding an ``nvidia-smi topo`` matrix -> ConnectionMatrix (see the module docstring)."""
    lines = [_clean(line) for line in text.splitlines()]
    for index, line in enumerate(lines):
        header = _header(line, index)
        if header is None:
            continue
        if len(header.names) > MAX_DEVICES:  # the rendering and every comparison are quadratic in it
            raise SmiTopoParseError(f"a matrix of {len(header.names)} devices (line {index + 1}): more than "
                                    f"any machine prints (at most {MAX_DEVICES} here)")
        rows, end = _rows(lines, header)
        if rows:
            cut: list[str] = []
            if not any(line.strip() for line in lines[end:]):
                rows[-1] = _last_row(rows[-1], rows[:-1], header, cut)
            matrix = _build(header, rows, lines[: index + 1], lines[end:])
            return replace(matrix, warnings=tuple(cut) + matrix.warnings) if cut else matrix
    raise SmiTopoParseError(
        "no nvidia-smi topo matrix found: expected a header line like 'GPU0 GPU1 ... CPU Affinity' "
        "followed by one row per device"
    )


def _clean(line: str) -> str:
    return _QUOTE.sub("", strip_ansi(line)).rstrip()


def _header(line: str, index: int) -> _Header | None:
    found = sorted((line.find(head), head) for head in AFFINITY_HEADS if head in line)
    rest = line
    for _pos, head in found:
        rest = rest.replace(head, " ")
    names = _drop_command(_split_names(rest.split()))
    if not names or not _GPU.fullmatch(names[0]) or len(set(names)) != len(names):
        return None
    if not all(_NAME.fullmatch(name) and not _CELL_RUN.fullmatch(name) for name in names):
        return None
    return _Header(index, tuple(names), tuple(head for _pos, head in found))


def _drop_command(names: list[str]) -> list[str]:
    """``$ nvidia-smi topo -m      GPU0 GPU1 ...``: the command pasted on the header's own line (the
    output's first line joined to the prompt) is dropped up to the first GPU column."""
    first = next((i for i, name in enumerate(names) if _GPU.fullmatch(name)), None)
    if first is None or "topo" not in names[:first]:
        return names
    return names[first:]


def _split_names(tokens: list[str]) -> list[str]:
    names: list[str] = []
    for token in tokens:
        names.extend(_NAME_PART.findall(token) if _NAME_RUN.fullmatch(token) else [token])
    return names


def _rows(lines: list[str], header: _Header) -> tuple[list[_Row], int]:
    """The rows under ``header``, and the index of the first line after the matrix."""
    rows: list[_Row] = []
    known = set(header.names)
    index = header.line + 1
    while index < len(lines):
        tokens = lines[index].split()
        if tokens and tokens[0] in known:
            rows.append(_row(tokens, len(header.names)))
        elif tokens:
            break
        index += 1
    return rows, index


def _row(tokens: list[str], width: int) -> _Row:
    cells: list[str] = []
    rest = tokens[1:]
    while rest and len(cells) < width:
        token = rest[0]
        if _CELL_RUN.fullmatch(token):
            cells.extend(_CELL_PART.findall(token))
        elif _AFFINITY_VALUE.fullmatch(token):
            break
        else:
            cells.append(token)
        rest = rest[1:]
    extras = cells[width:] + rest
    return _Row(tokens[0], tuple(cells[:width]), tuple(extras))


def _build(header: _Header, rows: list[_Row], before: list[str], after: list[str]) -> ConnectionMatrix:
    warnings: list[str] = []
    by_name = _unique_rows(rows, warnings)
    links = {name: _links(header.names, row.cells) for name, row in by_name.items()}
    legend = _nic_legend(after)
    gpus = tuple(_gpu(name, by_name.get(name), header.heads) for name in header.names if _GPU.fullmatch(name))
    nics = tuple(_nic(name, legend) for name in header.names if not _GPU.fullmatch(name))
    kind = "p2p" if any(cell in P2P_CELLS for row in links.values() for cell in row.values()) else "topo"
    warnings += _missing_rows(header.names, by_name)
    warnings += _short_rows(header.names, by_name)
    warnings += _missing_legend(nics)
    warnings += _nics_not_shown(before)
    return ConnectionMatrix(
        kind=kind,
        gpus=gpus,
        nics=nics,
        links=links,
        p2p_mode=_p2p_mode(before) if kind == "p2p" else None,
        warnings=tuple(warnings),
    )


_WHOLE_CELL = regex.compile(rf"(?:{_CELL})")


def _last_row(row: _Row, others: list[_Row], header: _Header, cut: list[str]) -> _Row:
    """The paste's last line, when it is a row: a paste that ends there may end inside its last value. A last
    value that is the start of a longer one other rows print in that place (``NV1`` where the matrix holds
    ``NV18``, a CPU Affinity ``0-23,4`` where the others read ``0-23,48-71``) is taken as cut and left out,
    with a warning; a row whose values are whole ends where nvidia-smi ends it."""
    width = len(header.names)
    if row.extras:
        column = len(row.extras) - 1
        seen = {o.extras[column] for o in others if len(o.extras) > column}
        if _cut_value(row.extras[-1], seen):
            cut.append(f"the paste ends inside row {row.name}: its last value '{row.extras[-1]}' is cut "
                       "and left out")
            return _Row(row.name, row.cells, row.extras[:-1])
        return row
    if row.cells and len(row.cells) < width:
        seen = {c for o in others for c in o.cells}
        if _cut_value(row.cells[-1], seen):
            cut.append(f"the paste ends inside row {row.name}: its last cell '{row.cells[-1]}' is cut and "
                       "left out")
            return _Row(row.name, row.cells[:-1], ())
    return row


def _cut_value(value: str, seen: set[str]) -> bool:
    return value not in seen and any(len(v) > len(value) and v.startswith(value) for v in seen)


def _unique_rows(rows: list[_Row], warnings: list[str]) -> dict[str, _Row]:
    by_name: dict[str, _Row] = {}
    for row in rows:
        if row.name in by_name:
            warnings.append(f"row {row.name} appears twice; the first one is kept")
            continue
        by_name[row.name] = row
    return by_name


def _links(names: tuple[str, ...], cells: tuple[str, ...]) -> dict[str, str]:
    """Each column's cell; a token that is no cell nvidia-smi prints (``NV`` without its count, a stray
    word) is no cell either."""
    return {name: ("SYS" if cell == "SOC" else cell) for name, cell in zip(names, cells, strict=False)
            if _WHOLE_CELL.fullmatch(cell)}


def _gpu(name: str, row: _Row | None, heads: tuple[str, ...]) -> MatrixGpu:
    values = dict(zip(heads, row.extras, strict=False)) if row else {}

    def value(head: str) -> str | None:
        text = values.get(head)
        return None if text in (None, "N/A") else text

    return MatrixGpu(
        name=name,
        cpu_affinity=value("CPU Affinity"),
        numa_affinity=value("NUMA Affinity"),
        gpu_numa_id=value("GPU NUMA ID"),
    )


def _nic(name: str, legend: dict[str, str]) -> MatrixNic:
    if _NIC_COLUMN.fullmatch(name):
        return MatrixNic(name=name, device=legend.get(name))
    return MatrixNic(name=name, device=name)


def _nic_legend(lines: list[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    for line in lines:
        match = _LEGEND_NIC.match(line)
        if match and match.group(1) not in legend:
            legend[match.group(1)] = match.group(2)
    return legend


def _p2p_mode(lines: list[str]) -> str | None:
    for line in reversed(lines):
        match = _P2P_MODE.search(line)
        if match:
            return match.group(1)
    return None


def _missing_rows(names: tuple[str, ...], rows: dict[str, _Row]) -> list[str]:
    missing = [name for name in names if name not in rows]
    if not missing:
        return []
    return [f"matrix truncated: no row for {_listing(missing)} ({len(rows)} of {len(names)} rows present)"]


def _short_rows(names: tuple[str, ...], rows: dict[str, _Row]) -> list[str]:
    warnings = []
    for name, row in rows.items():
        if len(row.cells) < len(names):
            lost = names[len(row.cells) :]
            warnings.append(f"row {name} is cut short: no cell for {_listing(list(lost))}")
    return warnings


def _missing_legend(nics: tuple[MatrixNic, ...]) -> list[str]:
    unnamed = [nic.name for nic in nics if nic.device is None]
    if not unnamed:
        return []
    return [f"NIC Legend missing for {_listing(unnamed)}: their device names are unknown"]


def _nics_not_shown(lines: list[str]) -> list[str]:
    """nvidia-smi caps the NIC columns and says so above the matrix (vLLM collect_env pastes show it)."""
    for line in lines:
        match = _NIC_CAP.search(line)
        if match:
            found, shown = match.groups()
            return [f"nvidia-smi found {found} NICs but shows only {shown}: the others are not in the matrix"]
    return []


def _listing(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])} and {len(names) - 5} more"
