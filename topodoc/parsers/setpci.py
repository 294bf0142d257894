"""``setpci`` reads and writes of the PCIe ACS Control register, as people paste them: ``sudo setpci -s
00:01.0 ECAP_ACS+6.w`` (or ``+0x6.w``) followed by the value it printed, ``setpci -v`` lines (``BDF ... =
001d``), the writes that clear it (``ECAP_ACS+6.w=0000``), PLX switches' raw offset (``f2a.w=0000``, the
ACS Control register of PEX 87xx ports as NVIDIA's scripts write it), and ``for bdf in 00:03.1 ...; do``
loops whose ``$bdf`` the writes use.

Schema (:class:`SetpciText`): ``accesses``, one :class:`AcsAccess` per setpci command (the bus address or
``None`` when it is a shell variable the text does not resolve, the register as written, ``op`` read or
write, the value read or written, ``acs_ctl`` true when the register is ACS Control, and the bits set
decoded: SrcValid, TransBlk, ReqRedir, CmpltRedir, UpstreamFwd, EgressCtrl, DirectTrans); ``loop_bdfs``:
bus addresses of a ``for ... in`` loop around them; ``unknown``: other non-blank lines with their numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


class SetpciParseError(ValueError):
    """No setpci command on an ACS register."""


@dataclass(frozen=True, kw_only=True)
class AcsAccess:
    bdf: str | None  # "00:01.0" as written; None for "$bdf" / "{}"
    register: str  # "ECAP_ACS+6", "f2a"
    op: str  # "read", "write"
    value: int | None = None
    acs_ctl: bool = False
    bits: tuple[str, ...] = ()  # ACS Control bits set, decoded
    line: int
    value_line: int = 0
    scripted: bool = False  # a command inside a script (redirected, piped): no value is printed here


@dataclass(frozen=True, kw_only=True)
class SetpciText:
    accesses: tuple[AcsAccess, ...] = ()
    loop_bdfs: tuple[str, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


_BDF = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_CMD = re.compile(
    r"\bsetpci\s+(?:-[a-zA-Z]{1,3}\s+)*-s\s+(?P<bdf>\S{1,40})\s+(?:-[a-zA-Z]{1,3}\s+)*"
    r"(?P<reg>ECAP_ACS\s?\+\s?(?:0x)?[0-9a-fA-F]{1,3}|ECAP0*d\+(?:0x)?[0-9a-fA-F]{1,3}|[0-9a-fA-F]{2,4})"
    r"\.(?P<w>[bwl])(?:=(?P<val>[0-9a-fA-F]{1,8}))?"
)
_VALUE = re.compile(r"^\s*(?P<val>[0-9a-fA-F]{4})\s*$")
_VERBOSE = re.compile(r"^(?P<bdf>" + _BDF + r")\b.{0,60}=\s*(?P<val>[0-9a-fA-F]{4})\s*$")
_LOOP = re.compile(r"\bfor\s+\w{1,20}\s+in\s+(?P<list>(?:" + _BDF + r"\s*){1,64})")
_PLX_ACS = ("f2a",)  # PEX 87xx: ACS Control at 0xf2a (NVIDIA/caffe#10, NVIDIA/nccl#304)


def looks_like(lines: list[str]) -> bool:
    return any(_CMD.search(line) and _is_acs(_CMD.search(line)["reg"]) for line in lines)


def parse(text: str) -> SetpciText:
    accesses: list[dict] = []
    loop: list[str] = []
    unknown: list[tuple[int, str]] = []
    waiting: dict | None = None  # a read whose value is on the next line
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _LOOP.search(line)
        if m:
            loop.extend(m["list"].split())
        cmd = _CMD.search(line)
        if cmd and _is_acs(cmd["reg"]):
            access = _access(cmd, number)
            accesses.append(access)
            # a read inside a script (redirected, piped, in backticks) prints nothing here
            scripted = any(c in line[cmd.end():] for c in ">|`") or "`" in line[:cmd.start()]
            access["scripted"] = scripted
            waiting = access if access["op"] == "read" and not scripted else None
            continue
        value = _VALUE.match(line) or _VERBOSE.match(line)
        if value and waiting is not None and waiting["value"] is None:
            waiting["value"], waiting["value_line"] = int(value["val"], 16), number
            waiting = None
            continue
        if value and _VERBOSE.match(line):  # setpci -v output whose command was not pasted
            accesses.append({"bdf": value["bdf"], "register": "ECAP_ACS+6", "op": "read", "scripted": False,
                             "value": int(value["val"], 16), "line": number, "value_line": number})
            continue
        if not m and not re.match(r"^\s*(?:do|done|fi|then|else)\b", line):
            unknown.append((number, line))
    if not accesses:
        raise SetpciParseError("no setpci command on the ACS Control register (ECAP_ACS+6)")
    out = tuple(_finish(a) for a in accesses)
    damaged = tuple(
        f"line {a.line}: setpci read of {a.bdf or 'a device'} with no value after it" for a in out
        if a.op == "read" and a.value is None and not a.scripted
    )
    return SetpciText(accesses=out, loop_bdfs=tuple(loop), unknown=tuple(unknown), damaged=damaged)


def _is_acs(register: str) -> bool:
    reg = register.replace(" ", "").lower()
    return reg.startswith(("ecap_acs", "ecap0d", "ecapd")) or reg in _PLX_ACS


def _access(cmd: re.Match, number: int) -> dict:
    bdf = cmd["bdf"].strip("\"'")
    return {
        "bdf": bdf if re.fullmatch(_BDF, bdf) else None,
        "register": cmd["reg"].replace(" ", ""),
        "op": "write" if cmd["val"] is not None else "read",
        "value": int(cmd["val"], 16) if cmd["val"] is not None else None,
        "line": number,
        "value_line": number if cmd["val"] is not None else 0,
    }


def _finish(a: dict) -> AcsAccess:
    reg = a["register"].lower()
    offset = reg.split("+", 1)[1] if "+" in reg else None
    ctl = (offset is not None and int(offset, 16) == 6) or reg in _PLX_ACS
    bits = tuple(n for i, n in enumerate(ACS_BITS) if ctl and a["value"] is not None and a["value"] >> i & 1)
    return AcsAccess(bdf=a["bdf"], register=a["register"], op=a["op"], value=a["value"], acs_ctl=ctl,
                     bits=bits, line=a["line"], value_line=a["value_line"], scripted=a.get("scripted", False))
