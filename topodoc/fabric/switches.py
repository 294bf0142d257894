"""The switches a fabric plan can be built from: ports, port speed and where those figures come from.

One row per switch model, each with its public source. ``ports`` counts the logical ports a cable
plugs into at ``port_gbps`` (a QM9700's 32 OSFP cages are 64 NDR ports: ``ports_per_cage`` = 2, which
halves the switch-side transceivers). Any other switch: ``--switch-radix N --port-speed 200G``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class SwitchError(ValueError):
    """An unknown switch name or a port speed that is not a speed."""


@dataclass(frozen=True)
class Switch:
    name: str
    ports: int  # logical ports at port_gbps
    port_gbps: float
    ports_per_cage: int = 1  # logical ports sharing one transceiver cage (twin-port OSFP: 2)
    fabric: str = "InfiniBand"  # or "Ethernet"
    source: str = ""


SWITCHES: dict[str, Switch] = {
    s.name: s
    for s in (
        Switch(
            "QM8700",
            40,
            200.0,
            1,
            "InfiniBand",
            "NVIDIA QM87xx 1U HDR 200Gb/s InfiniBand Switch Systems User Manual "
            "(https://docs.nvidia.com/networking/display/QM87XX): 40 QSFP56 ports of HDR 200 Gb/s; "
            "the seed text (shared/seed, 'QM8700 ... 40 ports of 25 GB/s')",
        ),
        Switch(
            "QM8790",
            40,
            200.0,
            1,
            "InfiniBand",
            "NVIDIA QM87xx user manual (https://docs.nvidia.com/networking/display/QM87XX): the externally "
            "managed QM8700, 40 HDR 200 Gb/s ports; the switch of the DGX A100 SuperPOD",
        ),
        Switch(
            "QM9700",
            64,
            400.0,
            2,
            "InfiniBand",
            "NVIDIA QM97xx 1U NDR 400Gb/s InfiniBand Switch Systems User Manual "
            "(https://docs.nvidia.com/networking/display/QM97X0PUB/Interfaces): 32 OSFP cages, each 2 "
            "logical NDR 400 Gb/s ports",
        ),
        Switch(
            "QM9790",
            64,
            400.0,
            2,
            "InfiniBand",
            "NVIDIA QM97xx user manual (https://docs.nvidia.com/networking/display/QM97X0PUB): the "
            "externally managed QM9700, 64 NDR 400 Gb/s ports in 32 twin-port OSFP cages",
        ),
        Switch(
            "Q3400",
            144,
            800.0,
            2,
            "InfiniBand",
            "NVIDIA Quantum-X800 "
            "(https://www.nvidia.com/en-us/networking/products/infiniband/quantum-x800/): "
            "144 XDR 800 Gb/s ports in 72 OSFP cages",
        ),
        Switch(
            "SN5600",
            64,
            800.0,
            1,
            "Ethernet",
            "NVIDIA Spectrum-4 SN5000 2U Switch Systems Hardware User Manual: SN5600, 64 OSFP ports of "
            "800GbE (51.2 Tb/s)",
        ),
        Switch(
            "SN4700",
            32,
            400.0,
            1,
            "Ethernet",
            "NVIDIA Spectrum-3 SN4000 1U and 2U Switch Systems Hardware User Manual: SN4700, 32 QSFP-DD "
            "ports of 400GbE",
        ),
    )
}

_SPEED = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:g|gb/s|gbps|gbit/s|gbe|g/s)?\s*", re.IGNORECASE)


def parse_speed(text: str) -> float:
    """ "200G", "200", "400Gb/s", "800GbE" -> Gb/s."""
    match = _SPEED.fullmatch(text or "")
    if not match or float(match.group(1)) <= 0 or float(match.group(1)) > 100_000:
        raise SwitchError(f"not a port speed: {text!r} (give Gb/s, e.g. 200G or 400)")
    return float(match.group(1))


def lookup(name: str) -> Switch:
    key = name.strip().upper()
    key = key[1:] if key.startswith(("MQM", "MSN")) else key  # NVIDIA order codes start with M
    key = re.sub(r"^(QM\d{4}|SN\d{4}|Q\d{4}).*$", r"\1", key)  # order codes: MQM8700-HS2F -> QM8700
    if key not in SWITCHES:
        raise SwitchError(
            f"unknown switch {name!r} (known: {', '.join(SWITCHES)}; "
            "or give --switch-radix N --port-speed 200G)"
        )
    return SWITCHES[key]


def custom(radix: int, port_gbps: float) -> Switch:
    if radix < 2 or radix > 4096:
        raise SwitchError(f"--switch-radix must be 2..4096 ports, got {radix}")
    return Switch(f"{radix}-port {port_gbps:g}G", radix, port_gbps, 1, "unknown", "given on the command line")
