"""The lspci parser's bounds: a paste listing more PCI functions than any machine is refused as soon as
the count is passed (not after a full parse: a 64 MB paste of 292,000 GPUs took 12 s and 650 MB before),
and the notes on lines not read stop at a count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topodoc.parsers import lspci

BLOCK = ("{a} 3D controller: NVIDIA Corporation GA100 (rev a1)\n"
         "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n"
         "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x16 (ok)\n")


def _blocks(n: int) -> str:
    return "".join(BLOCK.format(a=f"{i // 256:04x}:{i % 256:02x}:00.0") for i in range(n))


def _tree(n: int) -> str:
    return "-[0000:00]-+-00.0\n" + "".join(f"           +-{i % 32:02x}.{i // 32 % 8}\n" for i in range(1, n))


def test_a_paste_of_more_functions_than_any_machine_is_refused_at_the_count(monkeypatch):
    monkeypatch.setattr(lspci, "MAX_FUNCTIONS", 8)
    assert len(lspci.parse(_blocks(8)).devices) == 8
    assert len(lspci.parse(_tree(8)).devices) == 8
    acs = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    assert len(lspci.parse(acs * 8).acs_lines) == 8  # (a fragment: ACSCtl lines without their headers)
    for text in (_blocks(9), _tree(9), acs * 9):
        with pytest.raises(lspci.LspciParseError, match="more than 8 PCI functions"):
            lspci.parse(text)


def test_the_refusal_does_not_read_the_rest_of_the_paste(monkeypatch):
    monkeypatch.setattr(lspci, "MAX_FUNCTIONS", 8)
    read = []
    real = lspci._lines

    def counted(text):
        for line in real(text):
            read.append(line)
            yield line

    monkeypatch.setattr(lspci, "_lines", counted)
    with pytest.raises(lspci.LspciParseError):
        lspci.parse(_blocks(10_000))
    assert len(read) < 400 + 40  # the tree test's head and the nine blocks, not 30,000 lines


def test_notes_on_lines_not_read_stop_at_a_count():
    junk = "".join(f"line {i} of something else\n" for i in range(500))
    result = lspci.parse(_tree(4) + junk)
    assert len(result.damaged) == lspci.NOTES_LIMIT + 1
    assert result.damaged[-1] == f"{500 - lspci.NOTES_LIMIT} more line(s) not read"
    assert result.damaged[0].startswith("line 5: not a tree line, not read: line 0 of something else")


@given(st.text(alphabet="ab\n\r ", max_size=60))
def test_lines_are_the_split_of_the_text(text):
    assert list(lspci._lines(text)) == text.split("\n")
