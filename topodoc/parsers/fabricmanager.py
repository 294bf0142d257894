"""NVIDIA Fabric Manager's own log (``/var/log/fabricmanager.log``: ``[Mon DD YYYY HH:MM:SS] [LEVEL] [tid N]
message``), ``journalctl -u nvidia-fabricmanager`` (``Mon DD HH:MM:SS host nv-fabricmanager[pid]: message``),
``systemctl status nvidia-fabricmanager`` and ``systemctl start``'s failure line.

Schema (:class:`FabricManagerText`, every element with its 1-based ``line``):

- ``fm_version`` / ``driver_version``: from the version check (``fabric manager NVIDIA GPU driver interface
  version X don't match with driver version Y``) or the log's ``Fabric Manager version is : X``;
- ``state``: what the service did last: ``running`` (``Active: active``, ``Started ...``, NVSwitches
  configured), ``failed`` (``Active: failed``, ``Control process exited ... FAILURE``, ``Job for ...
  failed``), ``stopped``; ``None`` when the text does not say;
- ``events``: each line that says something, classified: ``version_mismatch``, ``no_nvswitch``
  (``NV_WARN_NOTHING_TO_DO``: no NVSwitch in this machine), ``config_invalid``, ``training_failed`` (NVLink
  training / NVSwitch / NVLSM errors), ``not_initialized`` (CUDA's ``system not yet initialized``), ``error``
  (other ``[ERROR]`` lines), ``start_failed``, ``started``, ``configured``, ``stopped``;
- ``unknown``: the other non-blank lines, kept with their numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class FabricManagerParseError(ValueError):
    """No Fabric Manager line."""


@dataclass(frozen=True, kw_only=True)
class FmEvent:
    kind: str
    text: str
    line: int


@dataclass(frozen=True, kw_only=True)
class FabricManagerText:
    fm_version: str | None = None
    driver_version: str | None = None
    state: str | None = None
    state_line: int = 0
    events: tuple[FmEvent, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()


_JOURNAL = re.compile(
    r"^\S{1,6} {1,2}\d{1,2} [\d:]{8} \S{1,80} (?P<proc>[\w.@/-]{1,80})\[\d{1,9}\]: (?P<msg>.*)$"
)
_FM_LOG = re.compile(
    r"^\[[A-Z][a-z]{2} \d{1,2} \d{4} [\d:]{8}\] \[(?P<level>[A-Z]{3,8})\] \[tid \d{1,9}\] (?P<msg>.*)$"
)
_V = r"\d{1,4}(?:\.\d{1,4}){1,3}"
_MISMATCH = re.compile(
    r"fabric manager NVIDIA GPU driver interface version (?P<fm>" + _V + r") do(?:n['’]t|esn['’]t) match "
    r"with driver version (?P<drv>" + _V + r")"
)
_FM_VERSION = re.compile(r"Fabric Manager version is\s*:\s*(?P<v>" + _V + r")")
_DRV_VERSION = re.compile(r"(?:Driver|driver) version is\s*:\s*(?P<v>" + _V + r")")
_KINDS = (
    ("no_nvswitch", re.compile(r"NV_WARN_NOTHING_TO_DO")),
    ("config_invalid", re.compile(r"config file item: \S{1,80} has an invalid value|Unknown option: ")),
    ("not_initialized", re.compile(r"system not yet initialized")),
    ("start_failed", re.compile(
        r"Control process exited, code=exited, status=\d{1,3}/FAILURE|^Job for nvidia-fabricmanager\S* failed"
        r"|\" failed! Exit code: \d{1,3}|Failed to start .{0,40}[Ff]abric [Mm]anager")),
    ("training_failed", re.compile(
        r"(?i)(?:nvlink|link) training (?:failed|error)|failed to train|trunk link.{0,40}(?:down|fail)"
        r"|NVSwitch.{0,60}\b(?:fatal|failure|failed|error)\b|nvlsm.{0,80}\b(?:error|failed)\b")),
    ("configured", re.compile(r"Successfully configured all the available NVSwitches")),
    ("started", re.compile(r"Started (?:\"Nvidia Fabric Manager\"|nvidia-fabricmanager\.service)")),
    ("stopped", re.compile(r"Stopped \"Nvidia Fabric Manager\"|Stopped nvidia-fabricmanager\.service")),
)
_ACTIVE = re.compile(r"^\s*Active: (?P<state>active|failed|inactive|activating)\b")
_MARK = re.compile(
    r"nv-fabricmanager|nvidia-fabricmanager|fabricmanager\.log|Fabric Manager|fabric manager|NVSwitch"
)
_STATE = {"started": "running", "configured": "running", "start_failed": "failed", "stopped": "stopped"}


def looks_like(lines: list[str]) -> bool:
    """A line of Fabric Manager's service, journal or log."""
    for line in lines:
        if _MISMATCH.search(line) or _FM_VERSION.search(line):
            return True
        j = _JOURNAL.match(line)
        if j and j["proc"] in ("nv-fabricmanager", "nvidia-fabricmanager-start.sh"):
            return True
        service = "nvidia-fabricmanager.service" in line
        if service and ("systemd" in line or line.lstrip().startswith(("●", "Job"))):
            return True
    return False


def parse(text: str) -> FabricManagerText:
    events: list[FmEvent] = []
    unknown: list[tuple[int, str]] = []
    fm = drv = state = None
    state_line = 0
    seen = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        msg, level = _message(line)
        seen = seen or bool(_MARK.search(line)) or level is not None
        m = _MISMATCH.search(msg)
        if m:
            fm, drv = m["fm"], m["drv"]
            events.append(FmEvent(kind="version_mismatch", text=msg.strip()[:400], line=number))
            state, state_line = "failed", number
            continue
        v = _FM_VERSION.search(msg)
        if v:
            fm = fm or v["v"]
        d = _DRV_VERSION.search(msg)
        if d:
            drv = drv or d["v"]
        active = _ACTIVE.match(line)
        if active:
            state = {"active": "running", "failed": "failed", "inactive": "stopped"}.get(active["state"])
            state_line = number
            continue
        kind = next((k for k, p in _KINDS if p.search(msg)), None)
        if kind is None and level in ("ERROR", "FATAL"):
            kind = "error"
        if kind is not None:
            events.append(FmEvent(kind=kind, text=msg.strip()[:400], line=number))
            if kind in _STATE:
                state, state_line = _STATE[kind], number
        elif not (v or d or _known(line)):
            unknown.append((number, line))
    if not seen:
        raise FabricManagerParseError("no Fabric Manager service, journal or log line")
    return FabricManagerText(fm_version=fm, driver_version=drv, state=state, state_line=state_line,
                             events=tuple(events), unknown=tuple(unknown))


def _message(line: str) -> tuple[str, str | None]:
    j = _JOURNAL.match(line)
    if j:
        return j["msg"], None
    f = _FM_LOG.match(line)
    if f:
        return f["msg"], f["level"]
    return line, None


_KNOWN_LINE = re.compile(
    r"Starting (?:NVIDIA fabric manager|nvidia-fabricmanager)|Stopping (?:NVIDIA fabric manager|nvidia-"
    r"fabricmanager)|^See \"systemctl status|Detected (?:Pre-)?NVL\d system|Connected to \d{1,4} node"
    r"|^\s*(?:Loaded|Main PID|Process|Tasks|Memory|CPU|CGroup|Docs):|^\S*[#$] |^\[[^\]]{1,80}\][#$] |^●|^#\s"
)


def _known(line: str) -> bool:
    return bool(_KNOWN_LINE.search(line))
