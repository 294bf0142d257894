"""The kernel-log reader on real dmesg / journalctl excerpts (fixtures/kernel_log, sources in its README).

Goldens: ``<case>.log`` -> ``<case>.json`` (``codec.to_data`` of ``parse()``); rewrite them with
``python tests/test_kernel_log.py --regen`` after a reviewed behaviour change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.codec import to_data
from topodoc.parsers import xid_catalog
from topodoc.parsers.kernel_log import MAX_LINE, parse, parse_line

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log"
LOGS = sorted(CASES.glob("*.log"))
REQUIRED_XIDS = (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 149, 154)


def _golden(log: Path):
    return json.loads(json.dumps(to_data(parse(log.read_text(encoding="utf-8")))))


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_golden(log):
    expected = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))
    assert _golden(log) == expected


def test_every_case_has_a_source():
    readme = (CASES / "README.md").read_text(encoding="utf-8")
    for log in LOGS:
        row = next((line for line in readme.splitlines() if f"`{log.stem}`" in line), "")
        assert "https://github.com/" in row, log.stem


def test_xid_from_real_line_is_explained_and_joined_to_a_pci_address():
    events = parse((CASES / "xid-48-64-syslog.log").read_text())
    dbe = next(e for e in events if e.code == "48")
    assert dbe.device == "0000:07:00.0" and dbe.time == "219.470994"
    assert dbe.action == "reset_gpu" and "ECC" in dbe.message
    assert next(e for e in events if e.code == "64").action == "rma"


def test_aer_classes_and_devices():
    events = parse((CASES / "aer-uncorrectable-nonfatal-journalctl.log").read_text())
    received = [e for e in events if e.kind == "aer"]
    assert [e.code for e in received] == ["corrected", "uncorrected_nonfatal"]
    assert {e.device for e in received} == {"0000:80:1b.4"}
    assert [e.kind for e in events].count("aer_detail") == 1


def test_benign_lines_make_no_event():
    assert parse((CASES / "efa-benign.log").read_text()) == []
    mlx5 = parse((CASES / "mlx5-errors.log").read_text())
    assert not any("firmware version" in e.text or "Link INIT" in e.text for e in mlx5)
    # a port that came up is an info event (what says a port that went down came back), never a finding
    (active,) = [e for e in mlx5 if "Link ACTIVE" in e.text]
    assert (active.code, active.severity) == ("link_up", "info")


def test_fallen_off_the_bus_without_xid_spans_lines():
    lost = [e for e in parse((CASES / "xid-79-fallen-off-bus.log").read_text()) if e.kind == "gpu_lost"]
    assert len(lost) == 1 and lost[0].device == "0000:b3:00.0" and lost[0].severity == "critical"


def test_catalogue_covers_the_codes_operators_see():
    for code in REQUIRED_XIDS:
        info = xid_catalog.lookup(code)
        assert info is not None and info.action in xid_catalog.ACTIONS and info.meaning, code
    assert xid_catalog.lookup(74).nvlink


def test_unknown_xid_is_reported_not_guessed():
    event = parse_line("NVRM: Xid (PCI:0000:3b:00): 9999, pid=1, name=x, something")
    assert event.code == "9999" and event.action is None and "not in topodoc's catalogue" in event.message


def test_kmsg_record_prefix():
    event = parse_line("3,1234,5678901,-;NVRM: Xid (PCI:0000:07:00): 79, pid=0, name=x, GPU has fallen off")
    assert event.code == "79" and event.time == "5.678901" and event.device == "0000:07:00.0"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=20))
def test_any_text_parses_without_raising(lines):
    for event in parse(lines):
        assert len(event.text) <= MAX_LINE


def test_long_hostile_line_is_cut():
    line = "NVRM: Xid (PCI:0000:07:00): 13, " + "(" * 100_000
    event = parse_line(line)
    assert event is not None and len(event.text) <= MAX_LINE


if __name__ == "__main__" and "--regen" in sys.argv:
    for path in LOGS:
        path.with_suffix(".json").write_text(json.dumps(_golden(path), indent=2) + "\n", encoding="utf-8")


def test_reading_only_lines_holding_a_literal_finds_every_event_line_by_line_finds():
    """parse(text) reads only the lines holding one of its literals; the same events (numbers included)
    as every line read through every parser, on every fixture mixed with other drivers' lines."""
    import random
    from pathlib import Path

    from topodoc.parsers import kernel_log

    def every_line(text):  # the reference: each line through the whole grammar, no literal guard
        kept, pending = kernel_log.Kept(), None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw[: kernel_log.MAX_LINE]
            if pending and "fallen off the bus" in line:
                kept.add(kernel_log._gpu_lost(line, number, pending))
                pending = None
                continue
            found = kernel_log._NVRM_GPU.search(line)
            if found:
                pending = kernel_log._pci(found["pci"])
                if "fallen off the bus" in line:
                    kept.add(kernel_log._gpu_lost(line, number, pending))
                    pending = None
                continue
            event = next((e for _, p in kernel_log._PARSERS if (e := p(line, number))), None)
            if event is not None:
                kept.add(event)
        return kept.result()  # (within the same bounds: tests below check the bounds against every event)

    lines = [line for f in sorted(Path("fixtures/kernel_log").glob("*.log"))
             for line in f.read_text().splitlines()]
    rng = random.Random(3)
    other = ["[ 1.0] audit: apparmor=\"STATUS\" name=\"docker-default\"", "", "efa", "[ 2.0] default efa x",
             "mlx5_core 0000:0c:00.0: E-Switch: Total vports 2", "no newline at the end",
             # a driver's name and a word of _DRIVER_BAD in other cases or on the line's other side
             "mlx5_core 0000:0c:00.0: mlx5e: interrupt moderation", "[ 3.0] FAIL: mlx5_core 0000:0c:00.0: ok",
             "mlx5_core 0000:0c:00.0: Port module event: Link Down", "efa 0000:10:1d.0: ERR 5 TimeOut",
             "mlx5_cmd_check:810:(pid 9): create_mkey(0x200) op_mod(0x0) FAILED, status bad parameter"]
    unicode = ["mlx5_core 0000:0c:00.0: ſyndrome 0x1 (a long s: a case-insensitive s)",
               "efa 0000:10:1d.0: TİMEOUT é", "[ 4.0] ﬀ mlx5_core 0000:0c:00.0: health compromised"]
    for case in range(40):
        pool = other + unicode if case % 2 else other
        text = "\n".join(rng.choice(lines) if rng.random() < 0.5 else rng.choice(pool) for _ in range(200))
        assert kernel_log.parse(text) == every_line(text)
        odd = text.replace("\n", "\x0c", 3)  # a line break str.splitlines() knows: the line-by-line path
        assert kernel_log.parse(odd) == every_line(odd)


def test_reading_a_text_a_piece_at_a_time_is_reading_it_line_by_line(monkeypatch):
    """inputs._read_all (pieces) against inputs._read_lines (one line at a time) on generated bytes:
    CR/CRLF, over-long lines, line caps, bad UTF-8, pieces of a few characters."""
    import io
    import random

    from topodoc import inputs

    def stream(data):
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=None)

    rng = random.Random(4)
    for piece in (3, 7, 64, 1 << 20):
        monkeypatch.setattr(inputs, "_PIECE", piece)
        for _ in range(400):
            words = [b"a", b"bb\n", b"\r\n", b"\r", b"\n", b"x" * 12, b"\xff", "é".encode()]
            data = b"".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
            most_lines, most = rng.randint(0, 8), rng.randint(1, 14)
            lines, long_lines, capped = inputs._read_lines(stream(data), most_lines, most)
            expected = ("".join(line + "\n" for line in lines), long_lines, capped)
            assert inputs._read_all(stream(data), most_lines, most) == expected


def test_reader_fed_pieces_cut_after_newlines_reads_as_parse_of_the_whole():
    """kernel_log.Reader (a big dmesg read a piece at a time) against parse() of the whole text, on the
    fixtures mixed, cut after random newlines, with str.splitlines()'s other breaks in some pieces."""
    import random

    from topodoc.parsers.kernel_log import Reader

    lines = [line for f in LOGS for line in f.read_text().splitlines()]
    rng = random.Random(5)
    for _ in range(30):
        text = "\n".join(rng.choice(lines + ["", "a\x0cb NVRM: Xid (PCI:0000:3b:00): 13, x"])
                         for _ in range(150)) + "\n"
        cuts = sorted(rng.sample([i + 1 for i, c in enumerate(text) if c == "\n"], 6))
        reader = Reader()
        for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
            reader.feed(text[start:end])
        assert reader.events == parse(text)
        assert reader.lines == len(text.splitlines())


def test_cmdline_reader_reads_as_every_line_read_and_keeps_the_first_unknown_lines():
    """parsers.cmdline.parse (and its Reader fed pieces cut after newlines) against every line read by the
    three patterns: the same command lines, and the first MAX_UNKNOWN other lines (a whole dmesg holds
    its boot command line among half a million others)."""
    import random
    import re

    from topodoc.parsers import cmdline

    def every_line(text):
        found, unknown = [], []
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.rstrip()
            if not line.strip():
                continue
            patterns = (("grub", cmdline._GRUB), ("boot", cmdline._BOOT), ("proc", cmdline._PROC))
            for source, pattern in patterns:
                m = pattern.search(line) if source == "boot" else pattern.match(line)
                if m and ("=" in m["cmd"]):
                    found.append(cmdline.CmdlineLine(source=source, params=cmdline._params(m["cmd"]),
                                                     line=number))
                    break
            else:
                if not re.search(r"(?:^|[$#] )cat /proc/cmdline\s*$", line):
                    unknown.append((number, line))
        return tuple(found), tuple(unknown[: cmdline.MAX_UNKNOWN])

    pool = ["[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz root=UUID=abc ro iommu=pt",
            "[    0.012345] Kernel command line: BOOT_IMAGE=/vmlinuz intel_iommu=on pci=noacs", "",
            'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt"', "BOOT_IMAGE=/vmlinuz-6.5 ro quiet",
            "$ cat /proc/cmdline", "[    1.0] pci 0000:00:00.0: [8086:09a2] type 00 class 0x088000",
            "Command line: noequals", "  ", "[ 2.0] x BOOT_IMAGE= y",
            "[    0.0] Kernel command line: root=/dev/sda1 iommu=pt"]
    rng = random.Random(6)
    for case in range(30):
        size = rng.choice([5, 50, 3000])
        lines = pool[:2] + pool[-1:] + pool[2:] * 30  # command lines rare
        text = "\n".join(rng.choice(lines) for _ in range(size)) + rng.choice(["", "\n"])
        want = every_line(text)
        for cuts in (0, 5):
            reader = cmdline.Reader()
            newlines = [i + 1 for i, c in enumerate(text) if c == "\n"]
            ends = sorted(rng.sample(newlines, min(cuts, len(newlines))))
            for start, end in zip([0, *ends], [*ends, len(text)], strict=True):
                reader.feed(text[start:end])
            if not want[0]:
                with pytest.raises(cmdline.CmdlineParseError):
                    reader.result()
                continue
            got = reader.result()
            assert (got.lines, got.unknown) == want, case
