"""Redaction of a recording before it is written: consistent, format-preserving replacements.

Replaced everywhere in every text member (sysfs/procfs files, the NVML tape, command outputs, meta):
the hostname (read from ``/proc/sys/kernel/hostname`` and ``/etc/hostname``; the full name and its
first label, each as a whole word together with any domain written after it, so a short name never
leaves ``.cluster.example.com`` behind; ``localhost`` and the like identify nobody and stay), GPU
serials (the tape's ``nvmlDeviceGetSerial`` answers), and by pattern IPv4 addresses (except 0.0.0.0
and 127.x), IPv6 addresses in any spelling (``fe80::1``, ``2001:db8::8a2e:370:7334``, unpadded
groups; ``::1`` and ``::`` stay), MAC addresses (6-byte Ethernet and 20-byte IPoIB), UUIDs
(``GPU-``/``MIG-`` prefixes kept), 128-bit GIDs and 64-bit GUIDs. Binary PCI ``config`` files keep
everything but the Device Serial Number, which is zeroed. The same original always maps to the same
replacement, and a replacement has the original's shape (a MAC stays a MAC; a GID and the same
address written compressed map to one address; an IPv4-mapped RoCE GID maps to the redacted IPv4),
so the redacted recording still parses into a consistent snapshot.
"""

from __future__ import annotations

import ipaddress
import json
import re
from itertools import count

from topodoc.probe import pcicfg
from topodoc.probe.archive import Members

HEX = "[0-9A-Fa-f]"
EDGE_L, EDGE_R = r"(?<![0-9A-Fa-f:.])", r"(?![0-9A-Fa-f:-])"
OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
GROUPS = rf"(?:{HEX}{{1,4}}(?::{HEX}{{1,4}})*)"
PATTERN = re.compile(
    EDGE_L
    + "(?:"
    + rf"(?P<gid>{HEX}{{4}}(?::{HEX}{{4}}){{7}})"
    + rf"|(?P<mac20>{HEX}{{2}}(?::{HEX}{{2}}){{19}})"
    + rf"|(?P<uuid>{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}})"
    + rf"|(?P<guid>{HEX}{{4}}(?::{HEX}{{4}}){{3}})"
    + rf"|(?P<mac>{HEX}{{2}}(?::{HEX}{{2}}){{5}})"
    + ")"
    + EDGE_R
    + rf"|(?<![\w:.])(?P<ipv6>{GROUPS}?::{GROUPS}?|{HEX}{{1,4}}(?::{HEX}{{1,4}}){{7}})(?![\w:.-])"
    + rf"|(?<![\d.])(?P<ipv4>{OCTET}(?:\.{OCTET}){{3}})(?![\d.])"
)
KEEP_IPV4 = re.compile(r"^(?:0\.0\.0\.0|127\.\d+\.\d+\.\d+)$")
HOSTNAME_FILES = ("fs/proc/sys/kernel/hostname", "fs/etc/hostname")
GENERIC_HOSTNAMES = {"localhost", "localhost.localdomain", "localdomain", "(none)", "ubuntu", "debian"}


class Redactor:
    def __init__(self, hostnames: set[str], serials: set[str]) -> None:
        self.mapping: dict[str, str] = {}
        self.counters = {kind: count(1) for kind in ("gid", "mac20", "uuid", "guid", "mac", "ipv4", "serial")}
        self.literals = sorted(
            [(_hostname_pattern(h), "redacted-host") for h in hostnames if h and h not in GENERIC_HOSTNAMES]
            + [(re.compile(rf"(?<!\w){re.escape(s)}(?!\w)"), self._serial(s)) for s in serials if s],
            key=lambda item: -len(item[0].pattern),
        )

    def _serial(self, serial: str) -> str:
        number = next(self.counters["serial"])
        return f"{number:0{max(len(serial), 4)}d}" if serial.isdigit() else f"SERIAL{number:06d}"

    def text(self, text: str) -> str:
        for pattern, replacement in self.literals:
            text = pattern.sub(replacement, text)
        return PATTERN.sub(self._replace, text)

    def _replace(self, match: re.Match) -> str:
        kind = match.lastgroup
        original = match.group(0)
        if kind == "ipv4" and KEEP_IPV4.match(original) or not original.strip("0:-."):
            return original  # loopback, any-address and all-zero identifiers identify nobody
        if kind in ("gid", "ipv6"):
            return self._ipv6(original, exploded=kind == "gid")
        key = f"{kind}:{original.lower()}"
        if key not in self.mapping:
            self.mapping[key] = self._fresh(kind, original)
        return self.mapping[key]

    def _fresh(self, kind: str, original: str) -> str:
        n = next(self.counters[kind])
        if kind == "ipv4":
            return f"192.0.2.{n}" if n < 255 else f"198.18.{n // 256}.{n % 256}"
        if kind in ("mac", "mac20"):
            octets = 6 if kind == "mac" else 20
            return ":".join(f"{b:02x}" for b in (b"\x02" + n.to_bytes(octets - 1, "big")))
        if kind == "uuid":
            return f"00000000-0000-4000-8000-{n:012x}"
        return f"0000:0000:{n >> 16 & 0xFFFF:04x}:{n & 0xFFFF:04x}"

    def _ipv6(self, original: str, exploded: bool) -> str:
        """One replacement per address however it is written (GID, compressed, unpadded)."""
        try:
            address = ipaddress.IPv6Address(original)
        except ValueError:
            return original  # looked like an address, is not one
        if address.is_loopback or address.is_unspecified:
            return original
        key = f"ipv6:{address.exploded}"
        if key not in self.mapping:
            self.mapping[key] = self._fresh_ipv6(address).exploded
        fresh = ipaddress.IPv6Address(self.mapping[key])
        return fresh.exploded if exploded else fresh.compressed

    def _fresh_ipv6(self, address: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
        mapped = address.ipv4_mapped
        if mapped is not None:  # RoCE v2 GID of an IPv4 address: follows that address
            ipv4 = str(mapped)
            return ipaddress.IPv6Address(f"::ffff:{self.text(ipv4) if not KEEP_IPV4.match(ipv4) else ipv4}")
        prefix = "fe80" if address.is_link_local else "2001:db8"  # "d0c": a documentation address
        fresh = address
        while fresh == address:
            n = next(self.counters["gid"])
            fresh = ipaddress.IPv6Address(f"{prefix}::d0c:{n >> 16 & 0xFFFF:x}:{n & 0xFFFF:x}")
        return fresh


def _hostname_pattern(name: str) -> re.Pattern:
    """``name`` as a whole word, with any domain labels written after it."""
    return re.compile(rf"(?<![\w.-]){re.escape(name)}(?:\.[A-Za-z0-9-]+)*(?![\w-])")


def redact_members(members: Members) -> Redactor:
    """Redact ``members`` in place; returns the Redactor (its ``mapping`` says what was replaced)."""
    redactor = Redactor(_hostnames(members), _serials(members))
    for name, data in list(members.files.items()):
        if name.endswith("/config"):
            members.files[name] = pcicfg.zero_serial(data)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        members.files[name] = redactor.text(text).encode("utf-8")
    return redactor


def _hostnames(members: Members) -> set[str]:
    names = set()
    for path in HOSTNAME_FILES:
        raw = members.files.get(path, b"").decode("utf-8", errors="replace").strip()
        if raw:
            names.add(raw)
            names.add(raw.split(".")[0])
    return names


def _serials(members: Members) -> set[str]:
    try:
        tape = json.loads(members.files.get("nvml.json", b"{}"))
    except ValueError:
        return set()
    return {
        str(call["value"]).strip()
        for call in tape.get("calls", [])
        if call.get("fn") == "nvmlDeviceGetSerial" and call.get("value")
    }
