"""A big dmesg read a piece at a time (``text.inputs._streamed``) reads as the whole text does: the same
kinds, events (line numbers included), notes on stderr and "holds NCCL" answer, on generated dmesg texts
with a boot command line (a second kind) or not, with every decoration the reader cleans (CRLF, ANSI
codes, NULs, MPI prefixes, UTF-16, gzip), long lines, line breaks other than "\\n", prompts and launcher
prefixes (those two read whole again).

The sizes are made small (pieces of a few dozen characters, streaming from a few hundred) so that every
cut falls somewhere.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from topodoc import inputs as reading
from topodoc.parsers import cmdline
from topodoc.text import detect, inputs

KERNEL = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log").glob("*.log"))
LINES = [line for f in KERNEL for line in f.read_text(encoding="utf-8").splitlines()
         if line.strip() and not line.startswith("#")]
OTHER = ["[ 1.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
         "[ 2.000000] mlx5_core 0000:0c:00.0: E-Switch: Total vports 2, per vport: max uc(128)",
         "[ 2.500000] mlx5_core 0000:0c:00.0: mlx5e: interrupt moderation", "",
         "[ 3.000000] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null)"]


def _text(rng: random.Random) -> str:
    lines = [rng.choice(LINES) if rng.random() < 0.3 else rng.choice(OTHER)
             for _ in range(rng.randint(5, 120))]
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(lines))
        lines[at] = rng.choice([
            "\x1b[31m" + lines[at] + "\x1b[0m", "[0;32m" + lines[at], lines[at] + "\x00",
            "[1,0]<stdout>:" + lines[at],
            lines[at] + " NCCL INFO", "x" * rng.choice([4097, 5000]) + " NVRM: Xid (PCI:0000:3b:00): 13, x",
            lines[at] + " " + "y" * rng.choice([70_000]), lines[at] + "\x0c" + rng.choice(LINES),
            "$ lspci", "node1$ dmesg | tail",
        ])
    if rng.random() < 0.4:  # a whole dmesg prints the boot command line: read as a second kind
        lines.insert(rng.choice([0, 1, len(lines) // 2]),
                     "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz root=UUID=x ro intel_iommu=on")
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines)), "[ 0.1] Kernel command line: root=/dev/sda1 pci=noacs")
    if rng.random() < 0.15:
        lines.insert(0, "user@host:~$ sudo dmesg -T")
    if rng.random() < 0.1:
        lines = [f"node{rng.randint(1, 3)}: {line}" for line in lines]  # pdsh: stripped, read whole
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


def _write(tmp_path: Path, case: int, text: str, rng: random.Random) -> str:
    form = rng.choice(["utf-8", "utf-8", "utf-16", "gz"])
    path = tmp_path / f"{case}.{'log.gz' if form == 'gz' else 'log'}"
    data = text.encode("utf-16" if form == "utf-16" else "utf-8")
    path.write_bytes(gzip.compress(data) if form == "gz" else data)
    return str(path)


def _read(path: str, capsys) -> tuple[list, str]:
    items = inputs.read_inputs([path])
    seen = [(i.kind, i.also, i.parsed, i.error, i.damaged, i.secondary, i.mentions_nccl()) for i in items]
    return seen, capsys.readouterr().err


def test_streamed_dmesg_reads_as_the_whole_text(tmp_path, monkeypatch, capsys):
    rng = random.Random(25)
    streamed = seconds = 0
    for case in range(120):
        text = _text(rng)
        path = _write(tmp_path, case, text, rng)
        monkeypatch.setattr(detect, "HEAD_CHARS", rng.choice([100, 1000, 1 << 18]))  # for both reads
        monkeypatch.setattr(cmdline, "MAX_UNKNOWN", rng.choice([3, 1000]))
        monkeypatch.setattr(inputs, "STREAM_FROM", 1 << 40)
        monkeypatch.setattr(reading, "_PIECE", 1 << 20)
        whole = _read(path, capsys)
        monkeypatch.setattr(inputs, "STREAM_FROM", rng.choice([1, 200, 900]))
        monkeypatch.setattr(reading, "_PIECE", rng.choice([7, 64, 300]))
        if inputs._streamable(path):
            item = inputs._streamed(path)
            streamed += item is not None
            seconds += bool(item and item.read_with)
            capsys.readouterr()
        assert _read(path, capsys) == whole, (case, text[:300])
        monkeypatch.undo()
    # most cases took the streamed path (not a comparison of the whole path twice), some with a command line
    assert streamed >= 40 and seconds >= 10, (streamed, seconds)


def test_streamed_dmesg_holds_no_text(tmp_path, monkeypatch):
    lines = [rng_line for rng_line in LINES] * 40
    path = tmp_path / "dmesg.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(inputs, "STREAM_FROM", 1000)
    item = inputs.read_input(str(path))
    assert item.streamed and item.kind == "dmesg" and item.text == ""
    assert [e.line for e in item.parsed] == sorted(e.line for e in item.parsed)
    first = next(e for e in item.parsed if e.line > len(LINES))  # numbered across pieces
    assert lines[first.line - 1].strip() == first.text


@pytest.mark.parametrize("head", ["user@host:~$ dmesg\n", ""])
def test_a_second_prompt_reads_the_paste_whole_by_regions(tmp_path, monkeypatch, head):
    text = head + "\n".join(LINES * 5) + "\n$ lsmod\nModule      Size  Used by\nnvidia_uvm   1 0\n"
    path = tmp_path / "paste.txt"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(inputs, "STREAM_FROM", 100)
    assert inputs._streamed(str(path)) is None
    kinds = [i.kind for i in inputs.read_inputs([str(path)])]
    assert "dmesg" in kinds and "lsmod" in kinds


def test_only_a_regular_file_is_streamed(tmp_path, monkeypatch):
    """A pipe named *.gz is read once, whole: the streamed read could not read it again."""
    import os

    monkeypatch.setattr(inputs, "STREAM_FROM", 1)
    fifo = tmp_path / "dmesg.log.gz"
    os.mkfifo(fifo)
    assert not inputs._streamable(str(fifo)) and not inputs._streamable(str(tmp_path / "missing.gz"))
    plain = tmp_path / "dmesg.log"
    plain.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert inputs._streamable(str(plain))
