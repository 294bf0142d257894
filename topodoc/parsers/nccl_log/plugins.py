"""Plugin lines: which net / coll / tuner / profiler plugins NCCL tried, and what became of each.

Formats (REFERENCE.md §1.7 by NCCL version; §1.8 aws-ofi-nccl; §1.9 GCP; HPC-X from NVIDIA/nccl#1291):

- 2.3: ``No network plugin found.``; 2.4-2.16: ``NET/Plugin : No plugin found (libnccl-net.so)[, using
  internal implementation]``; 2.18: ``NET/Plugin : Plugin load (LIB) returned N : DLERROR``; 2.19-2.20:
  ``NET/Plugin : dlerror=DLERROR No plugin found (LIB), ...``; 2.21: ``NET/Plugin: Plugin load returned N :
  DLERROR [: ]when loading LIB``; 2.23+: ``NET/Plugin: Could not find: LIB...``; 2.28+: ``NET/Plugin: LIB:
  DLERROR``; the same shapes with ``TUNER/``, ``PROFILER/`` and ``ENV/`` in front;
- ``NET/Plugin: Loaded net|coll|collnet plugin NAME (vN)``, ``NET/Plugin: Failed to find ncclNetPlugin_vN
  symbol.``, ``... symbol (>= v5) ...``; 2.27+: ``Initialized NET plugin NAME``, ``Assigned NET plugin NAME to
  comm``, ``Failed to initialize NET plugin NAME``; HPC-X: ``Plugin Path : PATH``,
  ``P2P plugin [v8] IBext_v8``;
- the plugins' own lines: ``NET/OFI Initializing aws-ofi-nccl 1.9.1-aws`` (older ``NET/OFI Using aws-ofi-nccl
  1.3.0aws``) and its init failures, ``NET/gIB : Initializing gIB v1.0.3``, ``NET/FasTrak v1.0.15``,
  ``Initializing network FasTrak, version: 1.0.17``, ``NET/GPUDirectTCPX ver. 3.1.8.``.

:func:`note` records one observation into ``LogState.plugin_rows``; :func:`freeze` turns the rows into
:class:`~topodoc.logmodel.PluginInfo` once the networks NCCL chose are known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoc.logmodel import Evidence, PluginInfo

# how strongly an observation speaks: the strongest wins (a later "Loaded (v6)" beats a "no v7 symbol"
# probe; the plugin's own init failure beats its "Initializing" line)
NOT_FOUND, PROBE_FAILED, LOADED, FAILED = 0, 1, 2, 3
_STATUS = {NOT_FOUND: "not_found", PROBE_FAILED: "failed", LOADED: "loaded", FAILED: "failed"}
_KINDS = {"NET": "net", "TUNER": "tuner", "PROFILER": "profiler", "ENV": "env", "GIN": "gin", "RMA": "rma"}
_DEFAULT_LIB = {"net": "libnccl-net.so", "tuner": "libnccl-tuner.so", "profiler": "libnccl-profiler.so"}
_ALIASES = {"aws libfabric": "aws-ofi-nccl", "libfabric": "aws-ofi-nccl", "ofi": "aws-ofi-nccl"}
_NO_FILE = "No such file or directory"
_PATH = ("path", "")  # where HPC-X's "Plugin Path : ..." line is kept until its "P2P plugin" line

_PREFIXED = re.compile(r"^([A-Z]+)/Plugin ?: ?(.*)$")
_LOADED = re.compile(r"Loaded (net|coll|collnet) plugin (.+?) \(v(\d+)\)")
_LOAD_18 = re.compile(r"Plugin load \((\S+)\) returned \d+ : (.*)")
_LOAD_21 = re.compile(r"Plugin load returned \d+ : (.*?)(?: :)? when loading (\S+)")
_DLERROR_19 = re.compile(r"dlerror=(.*?) No plugin found \((\S+?)\)")
_NO_PLUGIN = re.compile(r"No plugin found \((\S+?)\)")
_COULD_NOT_FIND = re.compile(r"Could not find: (.+?)\.?(?: Using internal .*)?\s*$")
_SYMBOL = re.compile(r"Failed to find (nccl(\w*?)Plugin)(?:_v(\d+))? symbol")
_LIB_ERROR = re.compile(r"^(\S+\.so\S*): (.+)$")
_NCCL_27 = re.compile(r"^(Initialized|Assigned|Failed to initialize) NET plugin (\S+)")
_OWN_VERSION = (
    re.compile(r"(?:Initializing|Using) (aws-ofi-nccl) (\S+)"),
    re.compile(r"^NET/(gIB) : Initializing gIB (v?[\d.]+)"),
    re.compile(r"^NET/(FasTrak) (v[\d.]+)"),
    re.compile(r"^Initializing network (FasTrak), version: (\S+)"),
    re.compile(r"^NET/(GPUDirectTCPX) ver\. ([\d.]+?)\.?$"),
)
_OFI_FAILED = re.compile(
    r"Initializing plugin failed|aws-ofi-nccl initialization failed|Could not find any optimal provider|"
    r"No eligible providers|fi_getinfo\(\) call failed|Couldn't open a fabric provider"
)
_TCPX_FAILED = re.compile(r"^NET/GPUDirectTCPX(?: :)? (?:disabled|no interface found|no ctrl interface)")


@dataclass
class PluginRow:
    """One plugin as seen so far (mutable; :func:`freeze` makes the :class:`PluginInfo`)."""

    kind: str
    name: str
    strength: int
    evidence: Evidence
    version: str | None = None
    api: str | None = None
    library: str | None = None
    detail: str | None = None
    failure: Evidence | None = None


def key(name: str) -> str:
    """The name a plugin goes by in every line: lower case, API suffix dropped, OFI aliases folded."""
    plain = re.sub(r"_v\d+$", "", name.strip()).lower()
    return _ALIASES.get(plain, plain)


def note(rows: dict, msg: str, ev: Evidence, env_plugin: str | None = None) -> bool:
    """Record what a plugin line says; ``True`` when ``msg`` was a plugin line."""
    prefixed = _PREFIXED.match(msg)
    if prefixed:
        kind = _KINDS.get(prefixed[1], prefixed[1].lower())
        return _plugin_body(rows, kind, prefixed[2], ev, env_plugin)
    found = _NCCL_27.match(msg)
    if found:
        strength = FAILED if found[1].startswith("Failed") else LOADED
        _see(rows, "net", found[2], strength, ev, detail=msg if strength == FAILED else None)
        return True
    if msg.startswith("P2P plugin ") and len(msg.split()) > 2:  # the loaded plugin's network name
        name = msg.split()[-1]  # "P2P plugin IBext_v8"; HPC-X 2.2x: "P2P plugin v8 IBext_v8"
        _rename_loaded(rows, name)
        _see(rows, "net", name, LOADED, ev, library=rows.get(_PATH))
        return True
    if msg.startswith("Plugin Path : "):
        rows[_PATH] = msg.split(" : ", 1)[1].strip()
        return True
    if msg.startswith("No network plugin found"):  # NCCL 2.3
        _see(rows, "net", "libnccl-net.so", NOT_FOUND, ev, library="libnccl-net.so")
        return True
    return _own_line(rows, msg, ev)


def _plugin_body(rows: dict, kind: str, body: str, ev: Evidence, env_plugin: str | None) -> bool:
    loaded = _LOADED.search(body)
    if loaded:
        kind = "net" if loaded[1] == "net" else "coll"
        probed = _pop_probed(rows, kind)
        _see(rows, kind, loaded[2], LOADED, probed.evidence if probed else ev, api=f"v{loaded[3]}",
             library=probed.library if probed else None)
        return True
    symbol = _SYMBOL.search(body)
    if symbol:
        coll = "CollNet" in symbol[1]
        name = env_plugin or _DEFAULT_LIB["net"]
        # a net plugin without CollNet entry points is normal (aws-ofi-nccl); a missing net symbol is not
        _see(rows, "coll" if coll else kind, name, NOT_FOUND if coll else PROBE_FAILED, ev, library=name,
             detail=body)
        return True
    for pattern, lib_group, err_group in ((_LOAD_18, 1, 2), (_LOAD_21, 2, 1), (_DLERROR_19, 2, 1)):
        found = pattern.search(body)
        if found:
            _dlopen(rows, kind, found[lib_group], found[err_group], ev)
            return True
    return _not_found(rows, kind, body, ev)


def _not_found(rows: dict, kind: str, body: str, ev: Evidence) -> bool:
    found = _NO_PLUGIN.search(body)
    if found:
        _see(rows, kind, found[1], NOT_FOUND, ev, library=found[1])
        return True
    found = _COULD_NOT_FIND.match(body)
    if found:
        for lib in found[1].split():
            _see(rows, kind, lib.rstrip("."), NOT_FOUND, ev, library=lib.rstrip("."))
        return True
    found = _LIB_ERROR.match(body)
    if found:
        _dlopen(rows, kind, found[1], found[2], ev)
        return True
    return False


def _pop_probed(rows: dict, kind: str) -> PluginRow | None:
    """A library row whose symbol probe failed just before a successful load of an older API version."""
    for row_key, row in list(rows.items()):
        if isinstance(row, PluginRow) and row.kind == kind and row.strength == PROBE_FAILED:
            return rows.pop(row_key)
    return None


def _rename_loaded(rows: dict, name: str) -> None:
    """Fold a ``Loaded net plugin <display name>`` row into the network name the plugin then prints."""
    for row_key, row in list(rows.items()):
        if isinstance(row, PluginRow) and row.kind == "net" and row.api and row_key[1] != key(name):
            rows.pop(row_key)
            row.name = name
            rows.setdefault(("net", key(name)), row)
            return


def _dlopen(rows: dict, kind: str, lib: str, dlerror: str, ev: Evidence) -> None:
    strength = NOT_FOUND if _NO_FILE in dlerror else FAILED
    _see(rows, kind, lib, strength, ev, library=lib, detail=dlerror.strip().rstrip("."))


def _own_line(rows: dict, msg: str, ev: Evidence) -> bool:
    for pattern in _OWN_VERSION:
        found = pattern.search(msg)
        if found:
            _see(rows, "net", found[1], LOADED, ev, version=found[2])
            return True
    if msg.startswith("NET/OFI") and _OFI_FAILED.search(msg):
        _see(rows, "net", "aws-ofi-nccl", FAILED, ev, detail=msg[len("NET/OFI ") :])
        return True
    if _TCPX_FAILED.match(msg):
        _see(rows, "net", "GPUDirectTCPX", FAILED, ev, detail=msg)
        return True
    return False


def _see(rows: dict, kind: str, name: str, strength: int, ev: Evidence, **facts) -> None:
    row = rows.get((kind, key(name)))
    if row is None:
        row = rows[(kind, key(name))] = PluginRow(kind, name, strength, ev)
    if strength >= FAILED:
        row.failure = row.failure or ev
    elif strength == PROBE_FAILED and row.strength < LOADED:
        row.failure = ev  # of several symbol probes the last one is the verdict
    if strength > row.strength:
        row.strength = strength
        if strength >= LOADED and row.library is None and row.name.endswith(".so"):
            row.name = name
    for field, value in facts.items():
        if value and getattr(row, field) is None:
            setattr(row, field, value)


def freeze(rows: dict, networks: set[str]) -> tuple[PluginInfo, ...]:
    """The plugin table; ``networks`` are the NET names NCCL chose (``Using network``, ``via NET/<name>``)."""
    chosen = {key(n) for n in networks}
    out = []
    for (kind, name_key), row in rows.items():
        if not isinstance(row, PluginRow):
            continue
        status = _STATUS[row.strength]
        out.append(PluginInfo(
            kind=row.kind, name=row.name, status=status, version=row.version or row.api,
            library=row.library, selected=_selected(kind, name_key, status, row.name, chosen),
            detail=row.detail, evidence=row.evidence, failure=row.failure if status == "failed" else None,
        ))
    return tuple(sorted(out, key=lambda p: (p.kind, p.evidence.file, p.evidence.line, p.name)))


def _selected(kind: str, name_key: str, status: str, name: str, chosen: set[str]) -> bool | None:
    if kind != "net" or not chosen:
        return None
    if name_key in chosen:
        return True
    if status == "loaded" and name.endswith(".so"):
        return None  # a library loaded under its file name: which network it provides is not said
    return False


def chosen_networks(conn_nets: set[str], announced: set[str]) -> set[str]:
    """The NET names NCCL used: those its connections went through, else those it announced."""
    return conn_nets or announced


def fallback_errors(table: tuple[PluginInfo, ...], chosen: set[str], taken: set[tuple[str, int]]) -> list:
    """``plugin_error`` findings for net plugins that failed or loaded and were not used, unless a line
    already reported them (``taken``: (file, line) of errors found line by line)."""
    from topodoc.logmodel import LogError

    used = ", ".join(sorted(chosen)) or "another network"
    out = []
    for plugin in table:
        if plugin.kind != "net" or plugin.selected is not False or plugin.status == "not_found":
            continue
        ev = plugin.failure or plugin.evidence
        if (ev.file, ev.line) in taken:
            continue
        text = _fallback_text(plugin, used)
        out.append(
            LogError(
                category="plugin_error",
                level="derived",
                file=ev.file,
                line=ev.line,
                text=ev.text,
                explanation=text,
            )
        )
    return out


def _fallback_text(plugin: PluginInfo, used: str) -> str:
    if plugin.status == "failed":
        head = f"The {plugin.name} net plugin failed ({plugin.detail or 'see the line'})"
    else:
        head = (f"The {plugin.name} net plugin loaded but found no usable device (or was not chosen), so it "
                "carried no traffic")
    return (f"{head}; NCCL silently used {used} instead. Check that the plugin's devices are visible "
            "(/dev/infiniband in containers, the EFA/RDMA drivers, its provider libraries) and set NCCL_NET "
            "to the plugin's network name so a fallback fails loudly instead of running slowly.")


def merge(rows: dict, later: dict) -> None:
    """Fold ``later`` (the rows of a later part of the input, read by another process) into ``rows``, as
    if its lines had been read after them."""
    for row_key, row in later.items():
        mine = rows.get(row_key)
        if not isinstance(row, PluginRow) or mine is None:
            rows[row_key] = row if mine is None or not isinstance(row, PluginRow) else mine
            continue
        if row.strength == PROBE_FAILED and mine.strength < LOADED:
            mine.failure = row.failure or mine.failure  # of several symbol probes the last one is the verdict
        else:
            mine.failure = mine.failure or row.failure
        if row.strength > mine.strength:
            mine.strength = row.strength
            if row.strength >= LOADED and mine.library is None and mine.name.endswith(".so"):
                mine.name = row.name
        for name in ("version", "api", "library", "detail"):
            if getattr(mine, name) is None and getattr(row, name) is not None:
                setattr(mine, name, getattr(row, name))
