"""Human and JSON output of ``topodoc topo``: the matrix, then a plain-language reading of it."""

from __future__ import annotations

import io
from typing import Any

from topodoc.codec import to_data
from topodoc.model import ConnectionMatrix
from topodoc.report.safe import human
from topodoc.topology.nccl_policy import p2p_default
from topodoc.topology.reading import PCIE_ORDER, PairLink, Reading

_WIDE = 10_000  # columns: wider than any matrix (76 NICs is under 1,000)
_STYLE = {"PIX": "cyan", "PXB": "cyan", "PHB": "yellow", "NODE": "yellow", "SYS": "red", "OK": "green"}


def json_data(matrix: ConnectionMatrix, reading: Reading) -> dict[str, Any]:
    """The ``--json`` document: the matrix as the model holds it, plus the reading."""
    return {**to_data(matrix), "reading": to_data(reading)}


@human
def render_text(matrix: ConnectionMatrix, reading: Reading, *, color: bool = False, width: int = 100) -> str:
    table = None if color else _plain_table(*_grid(matrix))
    lines = [(f"[bold]{_title(matrix)}[/bold]", False)]
    lines += [(f"[bold yellow]warning:[/bold yellow] {warning}", False) for warning in matrix.warnings]
    tail = [(line, not color) for line in reading_lines(reading, matrix.p2p_mode)]  # piped: one per line
    if table is not None:
        head, rest = _plain_lines(lines, width), _plain_lines(tail, width)
        if head is not None and rest is not None:
            return head + table + rest  # what rich prints, without loading it (the fixed cost of topo)
    return _rich_text(matrix, lines, table, tail, color, width)


def _rich_text(matrix: ConnectionMatrix, lines: list[tuple[str, bool]], table: str | None,
               tail: list[tuple[str, bool]], color: bool, width: int) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    text = Console(file=buffer, force_terminal=color, width=width, highlight=False)
    for line, soft in lines:
        text.print(line, soft_wrap=soft)
    if table is not None:
        buffer.write(table)
    else:
        # the table never wraps: it is printed at its natural width (a table does not expand to its console's)
        wide = Console(file=buffer, force_terminal=color, width=max(width, _WIDE), highlight=False)
        wide.print(_table(matrix))
    for line, soft in tail:
        text.print(line, soft_wrap=soft)
    return buffer.getvalue()


# the markup the reading and the title use; any other "[" goes to rich
_TAGS = ("[bold]", "[/bold]", "[yellow]", "[/yellow]", "[bold yellow]", "[/bold yellow]")


def _plain_lines(lines: list[tuple[str, bool]], width: int) -> str | None:
    """The lines as rich prints them without colour (their markup tags dropped; ``soft``: never wrapped),
    or None where that equivalence is not established: another ``[`` or a backslash (markup), two colons
    with no space between (an emoji code), a character that is not printable (rich drops or expands some),
    a line rich would wrap (a non-ASCII one, whose cell width is not its length, or one as wide as the
    console). ``tests/test_cli_startup.py`` compares the two."""
    out = []
    for line, soft in lines:
        text = _untagged(line)
        if text is None or "[" in text or "\\" in text or not text.isprintable() or _emoji_like(text):
            return None
        if not soft and (not text.isascii() or len(text) >= width):
            return None
        out.append(text + "\n")
    return "".join(out)


def _untagged(line: str) -> str | None:
    """The line without its :data:`_TAGS`, or None when they do not nest (rich refuses that markup)."""
    stack: list[str] = []
    out, rest = [], line
    while True:
        start = rest.find("[")
        tag = next((t for t in _TAGS if rest.startswith(t, start)), None) if start != -1 else None
        if tag is None:
            out.append(rest)
            return None if stack else "".join(out)
        out.append(rest[:start])
        rest = rest[start + len(tag):]
        if not tag.startswith("[/"):
            stack.append(tag[1:])
        elif not stack or stack.pop() != tag[2:]:
            return None


def _emoji_like(text: str) -> bool:
    """Two colons with no whitespace between them: what rich's emoji-code pattern could replace."""
    start = text.find(":")
    while start != -1:
        end = text.find(":", start + 1)
        if end == -1:
            return False
        if not any(c.isspace() for c in text[start + 1:end]):
            return True
        start = end
    return False


# A column: its header, whether it is centred (the matrix cells) and whether its cells are matrix links.
_Column = tuple[str, bool, bool]


def _grid(matrix: ConnectionMatrix) -> tuple[list[_Column], list[list[str | None]]]:
    """The table's columns and rows: row name, one link cell per device (None: not in the matrix), and for a
    ``topo -m`` matrix the GPU's affinity columns ("N/A" when unknown; a NIC row has none)."""
    names = [gpu.name for gpu in matrix.gpus] + [nic.name for nic in matrix.nics]
    columns: list[_Column] = [("", False, False), *((name, True, True) for name in names)]
    affinity = matrix.kind == "topo"
    if affinity:
        columns += [(head, False, False) for head in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    gpus = {gpu.name: gpu for gpu in matrix.gpus}
    rows: list[list[str | None]] = []
    for row in (name for name in names if name in matrix.links):
        cells = [matrix.links.get(row, {}).get(col) for col in names]
        gpu = gpus.get(row)
        values = (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id) if gpu else ()
        extras = [value or "N/A" for value in values]
        rows.append([row, *cells, *(extras if affinity else [])])
    return columns, rows


def _table(matrix: ConnectionMatrix):
    from rich import box
    from rich.table import Table

    columns, rows = _grid(matrix)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for head, centred, _link in columns:
        if centred:
            table.add_column(head, justify="center", no_wrap=True)
        else:
            table.add_column(head, no_wrap=bool(head))
    for row in rows:
        table.add_row(*(_styled(cell) if columns[i][2] else cell for i, cell in enumerate(row)))
    return table


def _plain_table(columns: list[_Column], rows: list[list[str | None]]) -> str | None:
    """The table exactly as rich prints :func:`_table` without colour (box SIMPLE_HEAD: a space for every
    edge and column divider, one space of padding except at the outer edges, a rule under the header),
    without rich's per-cell rendering; ``tests/test_cli_startup.py`` compares the two. None where that
    equivalence is not established (text that is not :func:`_plain`; a table wider than the console rich
    would print it on): rich prints those."""
    texts = [[("?" if cell is None and columns[i][2] else cell or "") for i, cell in enumerate(row)]
             for row in rows]
    texts = [row + [""] * (len(columns) - len(row)) for row in texts]
    every = [head for head, _c, _l in columns] + [cell for row in texts for cell in row]
    if not rows or not all(_plain(text) for text in every):
        return None
    widths = [max(len(head), *(len(row[i]) for row in texts)) for i, (head, _c, _l) in enumerate(columns)]
    last = len(columns) - 1

    def line(cells: list[str]) -> str:
        parts = []
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
            if columns[i][1]:
                left = (width - len(cell)) // 2
                cell = " " * left + cell + " " * (width - len(cell) - left)
            else:
                cell = cell.ljust(width)
            parts.append(("" if i == 0 else " ") + cell + ("" if i == last else " "))
        return " " + " ".join(parts) + " "

    head = line([h for h, _c, _l in columns])
    if len(head) > _WIDE:
        return None
    blank = " " * len(head)
    body = [line(row) for row in texts]
    return "\n".join([blank, head, " " + "\u2500" * (len(head) - 2) + " ", *body, blank]) + "\n"


def _plain(text: str) -> bool:
    """Text rich prints as it is: printable ASCII, no markup (``[``), no emoji code (``:name:``), no
    whitespace its wrapping folds."""
    return (text.isascii() and text.isprintable() and "[" not in text and text.count(":") < 2
            and " ".join(text.split()) == text)


def _title(matrix: ConnectionMatrix) -> str:
    if matrix.kind == "p2p":
        mode = f" (-p2p {matrix.p2p_mode})" if matrix.p2p_mode else ""
        return f"GPU peer-to-peer status{mode}: {len(matrix.gpus)} GPUs"
    return f"Connection matrix: {len(matrix.gpus)} GPUs, {len(matrix.nics)} NICs"


def _styled(cell: str | None):
    """The cell as rich Text styled the way ``[style]cell[/style]`` markup would be (without parsing it)."""
    from rich.text import Span, Text

    if cell is None:
        cell, style = "?", "dim"
    elif cell.startswith("NV"):
        style = "bold green"
    else:
        style = _STYLE.get(cell)
    return Text(cell, spans=[Span(0, len(cell), style)] if style and cell else [])


def reading_lines(reading: Reading, p2p_mode: str | None = None) -> list[str]:
    """The plain-language reading, one rich-markup line per item (``p2p_mode``: the ``-p2p`` letter)."""
    if reading.kind == "p2p":
        return _p2p_lines(reading, p2p_mode)
    lines = ["", "[bold]NVLink[/bold]", *_nvlink_lines(reading)]
    lines += ["", "[bold]PCIe paths between GPUs[/bold]", *_pcie_lines(reading)]
    if reading.nearest_nics:
        lines += ["", "[bold]NIC per GPU (NCCL's choice)[/bold]", *_nic_lines(reading)]
    lines += ["", "[bold]CPU / NUMA affinity[/bold]", *_affinity_lines(reading)]
    if reading.asymmetric:
        pairs = ", ".join(f"{a}/{b}" for a, b in reading.asymmetric)
        lines += ["", f"[yellow]The matrix is not symmetric for {pairs}: the paste may be damaged.[/yellow]"]
    return lines


def _nvlink_lines(reading: Reading) -> list[str]:
    shape, pairs = reading.nvlink_shape, reading.nvlink_pairs
    if shape == "none":
        return [
            "  No GPU pair shares NVLink: GPU traffic goes over PCIe "
            "(a `topo -mp` matrix never shows NVLink, even where it exists)."
        ]
    counts = "/".join(f"NV{n}" for n in reading.nvlink_counts)
    total = len(reading.gpus) * (len(reading.gpus) - 1) // 2
    if shape == "all-to-all":
        shown = f"all {len(pairs)} GPU pairs" + ("" if len(pairs) == total else f" shown (of {total})")
        return [
            f"  All-to-all: {shown} have {counts} ({_links(reading)}), "
            "the pattern of NVSwitch on an HGX/DGX baseboard."
        ]
    if shape == "pairs":
        bridged = ", ".join(f"{p.a}-{p.b} (NV{p.links})" for p in pairs)
        return [f"  Bridged pairs: {bridged}. Any other pair has no NVLink and goes over PCIe."]
    lines = [f"  Partial mesh: {len(pairs)} of {total} GPU pairs have NVLink ({counts}); the rest use PCIe."]
    for gpu in reading.gpus:
        peers = [f"{p.b if p.a == gpu else p.a} NV{p.links}" for p in pairs if gpu in (p.a, p.b)]
        lines.append(f"    {gpu}: {', '.join(peers) if peers else 'no NVLink'}")
    return lines


def _links(reading: Reading) -> str:
    counts = reading.nvlink_counts
    spread = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"{spread} NVLinks per GPU, each pair at that count through the switches"


def _pcie_lines(reading: Reading) -> list[str]:
    lines = []
    if reading.cross_socket_pairs:
        lines.append(f"  Cross a CPU socket (SYS), slowest: {_pair_list(reading.cross_socket_pairs)}")
    if reading.host_bridge_pairs:
        lines.append(
            f"  Through a host bridge only (PHB/NODE): {_pair_list(reading.host_bridge_pairs)}. "
            + _p2p_default(len(reading.gpus))
        )
    if reading.pcie_switch_pairs:
        lines.append(f"  Through PCIe switches only (PIX/PXB): {_pair_list(reading.pcie_switch_pairs)}")
    return lines or ["  Every GPU pair is on NVLink; no pair depends on PCIe alone."]


def _p2p_default(gpus: int) -> str:
    """What NCCL's default P2P level means for PHB/NODE pairs; a matrix does not say which CPU it is."""
    default, why = p2p_default(None, gpus)
    if default is None:
        return why[0].upper() + why[1:] + ": NCCL_P2P_LEVEL=PHB (or SYS) decides it explicitly."
    return f"{why[0].upper() + why[1:]}, which excludes these pairs unless NCCL_P2P_LEVEL is raised."


def _pair_list(pairs: tuple[PairLink, ...]) -> str:
    mixed = len({pair.link for pair in pairs}) > 1
    by_first: dict[str, list[str]] = {}
    for pair in pairs:
        by_first.setdefault(pair.a, []).append(f"{pair.b} {pair.link}" if mixed else pair.b)
    return "; ".join(f"{a} ↔ {', '.join(bs)}" for a, bs in by_first.items())


def _nic_lines(reading: Reading) -> list[str]:
    """Each GPU's NIC as NCCL takes it (the answer ``fleet`` and the rules give), the ties beside it."""
    lines = []
    for nearest in reading.nearest_nics:
        named = dict(zip(nearest.nics, nearest.devices, strict=True))
        pick = nearest.nccl_nic or nearest.nics[0]
        shown = pick if named.get(pick) in (None, pick) else f"{pick} ({named[pick]})"
        far = PCIE_ORDER.index(nearest.distance) > PCIE_ORDER.index("PXB")
        note = "  [yellow]beyond PXB: NCCL skips GPUDirect RDMA by default[/yellow]" if far else ""
        why = "nearest"
        if len(nearest.nics) > 1:
            why = (f"{len(nearest.nics)} tie ({', '.join(nearest.nics)}): NCCL takes this one for this CUDA "
                   "device on channel 0")
        lines.append(f"  {nearest.gpu}: {shown} at {nearest.distance}, {why}{note}")
    return lines


def _affinity_lines(reading: Reading) -> list[str]:
    lines = []
    for group in reading.affinity:
        cpus = group.cpu_affinity or "unknown"
        numa = f"NUMA node {group.numa_affinity}" if group.numa_affinity else "no NUMA node reported"
        lines.append(f"  {', '.join(group.gpus)}: CPUs {cpus}, {numa}")
    if len({g.numa_affinity for g in reading.affinity if g.numa_affinity}) > 1:
        lines.append("  Pin each rank's process to the CPUs of its GPU (e.g. numactl --cpunodebind).")
    return lines


P2P_MODE_TOPIC = {"r": "P2P reads", "w": "P2P writes", "p": "PCIe P2P", "n": "NVLink", "a": "P2P atomics"}


def _p2p_heading(mode: str | None) -> str:
    """What a status other than OK means in this ``-p2p`` matrix: only r/w/p speak of P2P itself."""
    if mode in ("r", "w", "p"):
        return (f"[bold]Pairs without {P2P_MODE_TOPIC[mode]}[/bold] (NCCL's P2P transport is unavailable "
                "between them, so it copies through host memory (SHM)):")
    if mode == "n":
        return ("[bold]Pairs without NVLink[/bold] (NS here means no NVLink between the pair, not no P2P: "
                "PCIe P2P may still work; `nvidia-smi topo -p2p r` tells):")
    if mode == "a":
        return ("[bold]Pairs without P2P atomics[/bold] (NS here means no atomics, not no P2P reads or "
                "writes; `nvidia-smi topo -p2p r` tells):")
    return ("[bold]Pairs whose status is not OK[/bold] (which capability depends on the -p2p mode, not "
            "pasted: r/w/p mean P2P itself, n NVLink, a atomics):")


def _p2p_lines(reading: Reading, mode: str | None = None) -> list[str]:
    if not reading.p2p_blocked:
        topic = P2P_MODE_TOPIC.get(mode or "", "peer-to-peer access")
        return ["", f"Every GPU pair reports OK: {topic} is available between all GPUs."]
    meaning = {"CNS": "chipset not supported", "GNS": "GPU not supported", "TNS": "topology not supported",
               "NS": "not supported", "DR": "disabled by regkey", "U": "unknown"}
    lines = ["", _p2p_heading(mode)]
    for pair in reading.p2p_blocked:
        lines.append(f"  {pair.a}-{pair.b}: {pair.link} ({meaning.get(pair.link, 'as printed')})")
    return lines
