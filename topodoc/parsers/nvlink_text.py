"""``nvidia-smi nvlink -s`` (link speeds, ``<inactive>``), ``-e`` (error counters) and ``-c``
(capabilities): per GPU index, its links. Only ``-s`` says whether a link is up; the other forms give
the link numbers with ``active`` unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from topodoc.model import NvLink


class NvlinkParseError(ValueError):
    """No ``GPU N: name (UUID: ...)`` section with ``Link N:`` lines."""


@dataclass(frozen=True)
class NvlinkGpu:
    index: int
    name: str | None
    uuid: str | None
    line: int
    links: tuple[NvLink, ...] = ()
    speeds_gbs: dict[int, float] = field(default_factory=dict)
    link_lines: dict[int, int] = field(default_factory=dict)  # link number -> line in the input


@dataclass(frozen=True)
class NvlinkResult:
    form: str  # "status" (-s), "errors" (-e), "capabilities" (-c)
    gpus: tuple[NvlinkGpu, ...] = ()
    damaged: tuple[str, ...] = ()


_GPU = regex.compile(r"^GPU (?P<i>\d++): (?P<name>[^(\n]*+)\(UUID: (?P<uuid>[^)]*+)\)")
_LINK = regex.compile(r"^\s+Link (?P<n>\d+)(?::|,)\s*(?P<rest>.*?)\s*$")
_SPEED = regex.compile(r"^(?P<s>[\d.]+)\s*GB/s$")


def parse(text: str) -> NvlinkResult:
    gpus: list[dict] = []
    damaged: list[str] = []
    form = "status"
    for number, line in enumerate(text.split("\n"), start=1):
        head = _GPU.match(line)
        if head:
            name = head["name"].strip()
            gpus.append(
                {
                    "i": int(head["i"]),
                    "name": name or None,
                    "uuid": head["uuid"] or None,
                    "line": number,
                    "links": {},
                    "speeds": {},
                    "lines": {},
                }
            )
            continue
        link = _LINK.match(line)
        if link and gpus:
            n, rest = int(link["n"]), link["rest"]
            gpus[-1]["lines"][n] = number
            speed = _SPEED.match(rest)
            if speed:
                gpus[-1]["links"][n] = True
                gpus[-1]["speeds"][n] = float(speed["s"])
            elif rest.startswith("<inactive>"):
                gpus[-1]["links"][n] = False
            elif "P2P is supported" in rest or "is supported" in rest:
                form = "capabilities"
                gpus[-1]["links"].setdefault(n, None)
            elif "Errors" in rest or "Replay" in rest or "Recovery" in rest or "CRC" in rest:
                form = "errors"
                gpus[-1]["links"].setdefault(n, None)
            elif rest:
                damaged.append(f"line {number}: link {n} value not read: {rest[:60]}")
        elif link:
            damaged.append(f"line {number}: Link line before any GPU line (header cut): not read")
    if not gpus:
        raise NvlinkParseError("no 'GPU N: <name> (UUID: ...)' line: not nvidia-smi nvlink output")
    _drop_cut(gpus, form, damaged)
    out = tuple(
        NvlinkGpu(
            g["i"],
            g["name"],
            g["uuid"],
            g["line"],
            tuple(NvLink(link=n, active=a) for n, a in sorted(g["links"].items())),
            dict(g["speeds"]),
            dict(g["lines"]) if g["links"] else {},
        )
        for g in gpus
    )
    for g, raw in zip(out, gpus, strict=True):
        if not g.links and not raw.get("cut"):
            damaged.append(f"GPU {g.index} (line {g.line}): no Link lines (cut paste, or NVLink absent)")
    return NvlinkResult(form, out, tuple(damaged))


def _drop_cut(gpus: list[dict], form: str, damaged: list[str]) -> None:
    """``-s`` prints every link, ``<inactive>`` ones too: a GPU with fewer link lines than a peer was cut
    out of the paste, so its partial list is dropped (unknown) rather than read as links down."""
    most = max(len(g["links"]) for g in gpus)
    for g in gpus:
        if form == "status" and 0 < len(g["links"]) < most:
            damaged.append(
                f"GPU {g['i']} (line {g['line']}): {len(g['links'])} link line(s) where other GPUs "
                f"have {most}: the paste is cut, so its link states are not used"
            )
            g["links"], g["speeds"], g["cut"] = {}, {}, True
