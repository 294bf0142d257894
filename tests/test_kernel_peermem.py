"""The GPU peer-memory module refused by the kernel (fixtures/kernel_log/peermem-unknown-symbol.log, real
lines, sources in its README): scored blind once before this reader existed, silent on all three threads.
Each line is an event naming the module, the symbol and whether its version or its absence was the problem;
``kernel-peermem-load-failed`` says which of the RDMA core and the NVIDIA driver changed under the module."""

from __future__ import annotations

from pathlib import Path

from topodoc.parsers.kernel_log import parse, parse_line
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log" / "peermem-unknown-symbol.log"
LINES = REAL.read_text().splitlines()


def findings(text: str) -> list:
    events = tuple(("dmesg.txt", e) for e in parse(text))
    return list(evaluate(Facts(kernel=events), [registry.get("kernel-peermem-load-failed")]).findings)


def test_every_refusal_line_is_an_event_and_the_other_lines_are_not():
    events = {e.line: e for e in parse(REAL.read_text())}
    assert sorted(events) == [1, 2, 3, 4, 5, 6, 8, 9]
    assert {e.kind for e in events.values()} == {"peermem"}
    assert dict(events[2].detail) == {"module": "nvidia_peermem", "symbol": "ib_register_peer_memory_client",
                                      "why": "version", "err": "-22"}
    assert dict(events[5].detail)["why"] == "missing" and events[5].code == "ib_core"
    assert events[9].code == "nvidia"


def test_an_ib_core_version_mismatch_names_ofed_and_the_rebuild():
    (hit,) = findings("\n".join(LINES[:4]))
    assert hit.subject == "nvidia_peermem" and hit.severity.value == "error"
    assert "(4 line(s))" in hit.message and "the RDMA core (ib_core) loaded is not the one" in hit.message
    assert "GPU Direct RDMA Disabled" in hit.message
    assert "reinstall the driver" in hit.fix and "DMA-BUF" in hit.fix


def test_a_missing_peer_memory_api_and_a_driver_change_are_told_apart():
    (missing,) = findings("\n".join(LINES[4:6]))
    assert "no loaded module exports ib_register_peer_memory_client" in missing.message
    assert "has no peer-memory API" in missing.message
    (driver,) = findings("\n".join(LINES[6:]))
    assert driver.subject == "nv_peer_mem" and "the NVIDIA driver loaded is not the one" in driver.message


def test_other_modules_unknown_symbols_are_not_peermem():
    assert parse_line("[ 12.0] nvidia: Unknown symbol drm_gem_object_free (err -2)") is None
    assert parse_line("[ 12.0] mlx5_ib: Unknown symbol ib_register_device (err -22)") is None
