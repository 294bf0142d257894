"""mlx5 port and module state in the kernel log: the real ``Link down`` wording (lower case, the netdev
named: fixtures/kernel_log/mlx5-link-state.log, sources in its README) is a link event, not "the driver
reported an error"; whether the port came back is read from the ``Link up`` lines that follow; a cable
module's error and the adapter's temperature warning are named. The module-error and temperature lines are
not from a thread: they are built in the form ``drivers/net/ethernet/mellanox/mlx5/core/events.c`` prints
them (``port_module``, ``temp_warn``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from topodoc.parsers.kernel_log import PER_GROUP, parse
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "kernel_log" / "mlx5-link-state.log"
# the driver's format strings (events.c): "Port module event[error]: module %u, %s, %s" and
# "High temperature on sensors with bit set %llx %llx", after dev_info's "mlx5_core <bdf>: "
MODULE_ERROR = "[ 5203.100000] mlx5_core 0000:41:00.0: Port module event[error]: module 0, Cable error, {why}"
UNPLUGGED = "[ 5100.000000] mlx5_core 0000:41:00.0: Port module event: module 0, Cable unplugged"
TEMPERATURE = "[ 5000.000000] mlx5_core 0000:41:00.0: High temperature on sensors with bit set 0 1"
DOWN = "[{t}.000000] mlx5_core 0000:41:00.0 enp65s0f0np0: Link down"
UP = "[{t}.000000] mlx5_core 0000:41:00.0 enp65s0f0np0: Link up"


def hits(text: str, path: str = "dmesg.txt") -> list:
    events = tuple((path, e) for e in parse(text))
    return list(evaluate(Facts(kernel=events), [registry.get("kernel-hca-events")]).findings)


def test_real_link_down_is_a_link_event_and_says_whether_the_port_came_back():
    hs = {h.subject: h for h in hits(REAL.read_text(), str(REAL))}
    assert set(hs) == {"0000:01:00.0", "0000:01:00.1"}
    for h in hs.values():
        assert h.severity.value == "warning"
        assert "the driver reported an error" not in h.message and "Link down" in h.message
        assert "cable" in h.fix
    assert "enp1s0f0np0" in hs["0000:01:00.0"].message
    assert "no 'Link up' of this port follows" in hs["0000:01:00.0"].message
    assert f"came back up ({REAL}:4)" in hs["0000:01:00.1"].message


def test_real_link_lines_through_the_cli():
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", str(REAL), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr  # warnings only: exit 0
    found = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "kernel-hca-events"]
    assert sorted(f["subject"] for f in found) == ["0000:01:00.0", "0000:01:00.1"]
    assert {f["severity"] for f in found} == {"warning"}


def test_link_up_alone_and_plugged_cables_are_no_finding():
    plugged = "[ 11.0] mlx5_core 0000:41:00.0: Port module event: module 0, Cable plugged"
    text = "\n".join([UP.format(t=10), plugged])
    assert hits(text) == []
    (event,) = parse(text)
    assert (event.code, event.severity) == ("link_up", "info")


def test_a_failure_that_mentions_link_up_stays_an_error():
    (event,) = parse("[ 9.0] mlx5_core 0000:41:00.0: failed to bring link up, err -110")
    assert (event.code, event.severity) == ("error", "error")


def test_module_error_is_named_and_the_link_down_after_it_points_back():
    text = "\n".join([MODULE_ERROR.format(why="High Temperature"), DOWN.format(t=5204)])
    by_code = {h.severity.value: h for h in hits(text)}
    module, down = by_code["error"], by_code["warning"]
    assert "over its temperature threshold" in module.message and "ethtool -m" in module.fix
    assert "after its module reported 'Cable error, High Temperature' (dmesg.txt:1)" in down.message
    event = parse(text)[0]
    assert dict(event.detail) == {"module": "0", "status": "Cable error", "error": "High Temperature"}


def test_each_module_error_type_of_the_driver_has_its_own_explanation():
    for why, words in [("Power budget exceeded", "more power"), ("Enforce part number list", "allowed part"),
                       ("Bad or shorted cable/module", "bad or shorted"),
                       ("No EEPROM/retry timeout", "EEPROM"),
                       ("Bus stuck(I2C or data shorted)", "bus is stuck"),
                       ("Unknown status", "reported an error")]:
        (hit,) = hits(MODULE_ERROR.format(why=why))
        assert words in hit.message, (why, hit.message)


def test_unplugged_cable_and_adapter_temperature_are_warnings():
    found = {h.message.split(": ", 1)[1][:30]: h for h in hits("\n".join([TEMPERATURE, UNPLUGGED]))}
    assert {h.severity.value for h in found.values()} == {"warning"}
    assert any("temperature over its warning threshold" in h.message for h in found.values())
    assert any("unplugged" in h.message for h in found.values())


def test_a_flapping_port_counts_every_down_and_reads_the_last_state_past_the_kept_events():
    downs_then_up = [DOWN.format(t=100 + 2 * i) + "\n" + UP.format(t=101 + 2 * i)
                     for i in range(3 * PER_GROUP)]
    (hit,) = hits("\n".join(downs_then_up))
    assert f"went down {3 * PER_GROUP} times" in hit.message
    assert f"came back up (dmesg.txt:{6 * PER_GROUP})" in hit.message
    still_down = "\n".join(downs_then_up + [DOWN.format(t=999)])
    (hit,) = hits(still_down)
    assert f"went down {3 * PER_GROUP + 1} times" in hit.message
    assert f"its last 'Link down' (dmesg.txt:{6 * PER_GROUP + 1})" in hit.message
    assert "may still be down" in hit.message
