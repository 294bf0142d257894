"""The kernel log's bounded event list (:class:`topodoc.parsers.kernel_log.Kept`): a dmesg of repeated
Xid / SXid / AER / IOMMU / mlx5 lines gives the same findings, their "(N lines)" and "went DOWN N times"
included, with the bounds lowered as with no bound at all; past the global bound, what was not read is said;
and a big Xid-only dmesg is read in bounded memory (it held every event: 777 MB for 60 MB of Xid lines).

The repeated lines are the real ones of fixtures/kernel_log (sources in its README), their timestamps and
pids varied."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from bounded import run_bounded

from topodoc import api, pciaddr
from topodoc.codec import to_data
from topodoc.parsers import kernel_log
from topodoc.rules import p2p
from topodoc.text import inputs

KERNEL = Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log"
LINES = [line for f in sorted(KERNEL.glob("*.log")) for line in f.read_text(encoding="utf-8").splitlines()
         if line.strip() and not line.startswith("#")]
GPUS = [f"0000:{bus:02x}:00" for bus in (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb)]
XIDS = ["79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.",
        "13, pid={pid}, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range",
        "74, pid={pid}, name=python3, NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0)",
        "74, pid={pid}, name=python3, NVLink: Nonfatal error detected on link 4(0x0, 0x0, 0x0, 0x0, 0x0)",
        "48, pid={pid}, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU"]


def _xid(rng: random.Random, time: float) -> str:
    text = rng.choice(XIDS).format(pid=rng.randint(100, 99999))
    return f"[{time:12.6f}] NVRM: Xid (PCI:{rng.choice(GPUS)}): {text}"


# mlx5e's real wording (fixtures/kernel_log/mlx5-link-state.log), on varied ports
LINK_DOWN = "[{time:12.6f}] mlx5_core 0000:{bus}:00.0 enp{bus}s0f0np0: Link down"


def _dmesg(rng: random.Random, lines: int) -> str:
    """Xid lines (varied GPU, code, pid, time; the same code Fatal and Nonfatal) mixed with the fixtures'
    lines repeated: SXid (with their info continuation lines), AER, DMAR/AMD-Vi, mlx5 errors and health;
    and ports going DOWN."""
    out, time = [], 1000.0
    for _ in range(lines):
        time += rng.random()
        pick = rng.random()
        out.append(_xid(rng, time) if pick < 0.55 else rng.choice(LINES) if pick < 0.95
                   else LINK_DOWN.format(time=time, bus=rng.choice(["0c", "8d"])))
    return "\n".join(out) + "\n"


def _findings(path: Path) -> list:
    return [to_data(f) for f in api.diagnose(files=[str(path)]).findings]


@pytest.mark.parametrize("stream", [False, True])
def test_findings_and_their_line_counts_are_those_of_every_event_kept(tmp_path, monkeypatch, stream):
    path = tmp_path / "dmesg.log"
    path.write_text(_dmesg(random.Random(22), 3000), encoding="utf-8")
    if stream:
        monkeypatch.setattr(inputs, "STREAM_FROM", 1000)
    monkeypatch.setattr(kernel_log, "PER_GROUP", 10**9)
    monkeypatch.setattr(kernel_log, "MAX_EVENTS", 10**9)
    every = kernel_log.parse(path.read_text(encoding="utf-8"))
    assert all(e.repeats == 1 for e in every) and len(every) > 2000
    unbounded = _findings(path)
    groups = {(e.kind, e.device, e.code, e.severity) for e in every}
    # (below per_group * groups events in all, a group first seen past the bound would not be read at all)
    for per_group, most in ((8, 20_000), (2, 2 * len(groups)), (3, 3 * len(groups))):
        monkeypatch.setattr(kernel_log, "PER_GROUP", per_group)
        monkeypatch.setattr(kernel_log, "MAX_EVENTS", most)
        kept = kernel_log.parse(path.read_text(encoding="utf-8"))
        assert len(kept) <= min(most, per_group * len(groups)) < len(every)
        assert sum(e.repeats for e in kept) == len(every)
        assert _findings(path) == unbounded, (per_group, most)
    messages = " ".join(f["message"] for f in unbounded)
    # counts that only the repeats make right: a group far above the bound, a flapping port
    assert max(int(n) for n in re.findall(r"\((\d+) lines\)", messages)) > 50  # (the bound: 8)
    assert re.search(r"went down \d{2,} times", messages)


def test_iommu_fault_lines_on_the_gpus_are_counted_with_their_repeats(monkeypatch):
    faults = [line for line in LINES if "DMAR: [" in line or "IO_PAGE_FAULT" in line]
    text = "\n".join(faults * 40)
    monkeypatch.setattr(kernel_log, "PER_GROUP", 10**9)
    every = kernel_log.parse(text)
    buses = {pciaddr.parse(e.device).bus for e in every if e.device}
    monkeypatch.setattr(kernel_log, "PER_GROUP", 2)
    kept = kernel_log.parse(text)
    assert len(kept) < len(every)
    causes_kept = p2p._causes(None, None, [("d", e) for e in kept], buses)
    causes_every = p2p._causes(None, None, [("d", e) for e in every], buses)
    assert causes_kept == causes_every
    assert f"holds {len(every)} IOMMU fault line(s)" in causes_kept[0][0]


def test_groups_past_the_global_bound_are_counted_and_said(tmp_path, monkeypatch):
    rng = random.Random(7)
    text = "".join(_xid(rng, 1000.0 + i) + "\n" for i in range(400))
    path = tmp_path / "dmesg.log"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(kernel_log, "PER_GROUP", 10**9)
    monkeypatch.setattr(kernel_log, "MAX_EVENTS", 10**9)
    every = kernel_log.parse(text)
    monkeypatch.setattr(kernel_log, "PER_GROUP", 8)
    monkeypatch.setattr(kernel_log, "MAX_EVENTS", 6)
    reader = kernel_log.Reader()
    reader.feed(text)
    kept = reader.events
    assert len(kept) == 6
    # a line of a group seen before is counted on its group; the others in the overflow, said in a note
    assert sum(e.repeats for e in kept) + reader.kept.overflow == len(every)
    assert reader.kept.overflow > 0
    for stream in (False, True):
        if stream:
            monkeypatch.setattr(inputs, "STREAM_FROM", 1000)
        item = inputs.read_input(str(path))
        assert item.streamed == stream and item.kind == "dmesg"
        assert tuple(item.parsed) == tuple(kept)
        assert item.damaged == (f"{reader.kept.overflow} kernel-log event line(s) not read: they came after "
                                "6 events were kept, in groups (kind, device, code) not seen before them",)


def test_a_big_xid_only_dmesg_is_read_in_bounded_memory(tmp_path):
    """About 20 MB of Xid lines (170,000 events over 40 groups): the events held are a few hundred, and
    every line is still counted in the findings."""
    rng = random.Random(60)
    path = tmp_path / "xid.log"
    with path.open("w", encoding="utf-8") as out:
        for block in range(170):
            out.write("".join(_xid(rng, 1000.0 + block + i / 1000) + "\n" for i in range(1000)))
    assert path.stat().st_size > 18_000_000
    result = run_bounded("diagnose", "--json", str(path), limit_mb=1024, timeout=300)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    found = json.loads(result.stdout)["findings"]
    counted = sum(int(re.search(r"\((\d+) lines\)", f["message"])[1])
                  for f in found if f["rule"] == "kernel-xid")
    assert counted == 170_000
    assert result.peak_mb < 120, result.peak_mb  # every event held: about 270 MB
