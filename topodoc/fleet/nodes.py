"""Fleet inputs: each input is one node. Expand directories, load each node, fingerprint it.

An input is a recording (``.tar.gz``/``.tgz``), a ``topodoc probe --json`` snapshot, a saved agent
``/findings`` document that carries a ``snapshot``, a directory of those (walked), or an agent URL
(``http://node:9612``: ``/snapshot`` is fetched, with a timeout). A node is named by its input (file
stem or URL) and shows its recorded host name beside it: two inputs are never merged into one node,
whatever their host names say (redacted recordings and copies of one golden image share them).

Loading is a pure function of the input, so :func:`load_all` fans the inputs out over processes;
each worker folds identical fingerprints together before sending them back, so what crosses a
process boundary grows with the number of distinct nodes, not with the fleet.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from topodoc.fleet.fingerprint import Prop, fingerprint

MAX_JSON_BYTES = 64 * 1024 * 1024
URL_TIMEOUT_S = 10.0
SUFFIXES = (".tar.gz", ".tgz", ".json")


@dataclass(frozen=True)
class NodeRef:
    name: str  # the input's stem or URL: what tells nodes apart
    input: str  # the path or URL as given
    hostname: str | None = None  # as recorded (may repeat, may be redacted)
    kind: str = "snapshot"  # "recording", "snapshot", "agent"


@dataclass(frozen=True)
class InputError:
    input: str
    message: str


Fingerprint = tuple[tuple[str, Prop], ...]


def expand(inputs: Iterable[str]) -> tuple[list[str], list[InputError]]:
    """Paths and URLs, with directories walked for recordings and JSON files (sorted)."""
    out: list[str] = []
    errors: list[InputError] = []
    for item in inputs:
        if item.startswith(("http://", "https://")):
            out.append(item)
        elif os.path.isdir(item):
            found = sorted(_walk(item))
            if not found:
                errors.append(
                    InputError(item, "directory holds no recordings (.tar.gz) or snapshots (.json)")
                )
            out.extend(found)
        elif os.path.exists(item):
            out.append(item)
        else:
            errors.append(InputError(item, "no such file or directory"))
    return out, errors


def _walk(root: str) -> Iterator[str]:
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            if name.endswith(SUFFIXES):
                yield os.path.join(base, name)


def node_name(item: str) -> str:
    if item.startswith(("http://", "https://")):
        return item.rstrip("/")
    base = os.path.basename(item)
    for suffix in SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


# Keys whose values identify one machine and that the fingerprint never reads (a test holds it to
# that): a JSON file that equals another once these values are blanked has the same fingerprint.
IDENTITY_KEYS = (
    "hostname",
    "boot_id",
    "recorded_at",
    "serial",
    "uuid",
    "node_guid",
    "mac",
    "gid",
    "cluster_uuid",
    "source",
    "cmdline",
    "topodoc_version",
)
# Unrolled-loop string bodies: the two alternatives are disjoint, so matching is linear (stdlib ``re``
# scans these 5x faster than the ``regex`` module here).
_IDENTITY = re.compile(
    rb'"(?:' + b"|".join(k.encode() for k in IDENTITY_KEYS) + rb')": *"[^"\\]*(?:\\.[^"\\]*)*"'
)
_HOSTNAME = re.compile(rb'"hostname": *"([^"\\]*(?:\\.[^"\\]*)*)"')


def load_one(item: str, cache: dict | None = None) -> tuple[NodeRef, Fingerprint] | InputError:
    """One input -> its node and fingerprint, or one clear error line.

    A JSON input is first looked up by the digest of its bytes with the identity values blanked:
    a fleet of like nodes parses and fingerprints each distinct machine once."""
    cache = {} if cache is None else cache
    raw = None
    if not item.startswith(("http://", "https://")) and not item.endswith((".tar.gz", ".tgz")):
        try:
            raw = _read_json_bytes(item)
        except (OSError, ValueError) as err:
            return InputError(item, _short(str(err) or type(err).__name__))
        digest = hashlib.blake2b(_IDENTITY.sub(b"", raw), digest_size=16).digest()
        known = cache.get(("fp", digest))
        if known is not None:
            host = _HOSTNAME.search(raw)
            name = host.group(1).decode("utf-8", "replace") if host else None
            return NodeRef(node_name(item), item, name, known[0]), known[1]
    try:
        data, kind = _snapshot_data(item, raw)
    except (OSError, ValueError) as err:
        return InputError(item, _short(str(err) or type(err).__name__))
    host = (data.get("host") or {}).get("hostname") if isinstance(data.get("host"), dict) else None
    ref = NodeRef(node_name(item), item, host if isinstance(host, str) else None, kind)
    try:
        props = tuple(sorted(fingerprint(data, cache).items()))
    except (TypeError, AttributeError, KeyError, ValueError) as err:
        return InputError(item, f"not a topodoc snapshot: {_short(str(err) or type(err).__name__)}")
    if raw is not None:
        cache[("fp", digest)] = (kind, props)
    return ref, props


def _read_json_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        raw = fh.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES // (1024 * 1024)} MiB: not a snapshot")
    return raw


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _snapshot_data(item: str, raw: bytes | None = None) -> tuple[dict, str]:
    if item.startswith(("http://", "https://")):
        return _from_url(item), "agent"
    if item.endswith((".tar.gz", ".tgz")):
        return _from_recording(item), "recording"
    if raw is None:
        raw = _read_json_bytes(item)
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"not JSON: {err}") from err
    return _snapshot_of(doc)


def _snapshot_of(doc: object) -> tuple[dict, str]:
    """A probe snapshot, or a document (agent /findings, diagnose --json) that carries one."""
    if isinstance(doc, dict) and isinstance(doc.get("snapshot"), dict):
        return doc["snapshot"], "agent"
    if isinstance(doc, dict) and "gpus" in doc and "pci" in doc:
        return doc, "snapshot"
    raise ValueError("neither a topodoc snapshot (probe --json) nor a document carrying one")


def _from_recording(path: str) -> dict:
    from topodoc.codec import to_data
    from topodoc.probe.collect import collect
    from topodoc.probe.source import SourceError, resolve_source

    try:
        host, name = resolve_source(path)
    except SourceError as err:
        raise ValueError(str(err)) from err
    return to_data(collect(host, name))


def _from_url(url: str) -> dict:
    import urllib.error
    import urllib.request

    target = url.rstrip("/") + "/snapshot"
    try:
        with urllib.request.urlopen(target, timeout=URL_TIMEOUT_S) as resp:  # noqa: S310 - http(s) only
            raw = resp.read(MAX_JSON_BYTES + 1)
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise ValueError(f"cannot fetch {target}: {getattr(err, 'reason', err)}") from err
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{target} did not answer JSON: {err}") from err
    return _snapshot_of(doc)[0]


Groups = dict[Fingerprint, list[NodeRef]]


def _load_chunk(items: list[str]) -> tuple[Groups, list[InputError]]:
    cache: dict = {}
    # A fingerprint served from the digest cache is the same tuple object each time: group by identity
    # first (no hashing of ~200 properties per node), then by value once per distinct object.
    by_object: dict[int, tuple[Fingerprint, list[NodeRef]]] = {}
    errors: list[InputError] = []
    for item in items:
        got = load_one(item, cache)
        if isinstance(got, InputError):
            errors.append(got)
        else:
            by_object.setdefault(id(got[1]), (got[1], []))[1].append(got[0])
    groups: Groups = {}
    for fp, refs in by_object.values():
        groups.setdefault(fp, []).extend(refs)
    return groups, errors


def load_all(items: list[str], jobs: int | None = None) -> tuple[Groups, list[InputError]]:
    """Every input loaded and grouped by identical fingerprint; URLs fetched concurrently."""
    urls = [i for i in items if i.startswith(("http://", "https://"))]
    files = [i for i in items if i not in set(urls)] if urls else items
    parts = [_load_urls(urls)] if urls else []
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(files) < 64:
        parts.append(_load_chunk(files))
    else:
        size = max(16, len(files) // (jobs * 4))
        chunks = [files[i : i + size] for i in range(0, len(files), size)]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            parts.extend(pool.map(_load_chunk, chunks))
    return _merge(parts)


def _load_urls(urls: list[str]) -> tuple[Groups, list[InputError]]:
    groups: Groups = {}
    errors: list[InputError] = []
    with ThreadPoolExecutor(max_workers=min(32, len(urls))) as pool:
        for got in pool.map(load_one, urls):
            if isinstance(got, InputError):
                errors.append(got)
            else:
                groups.setdefault(got[1], []).append(got[0])
    return groups, errors


def _merge(parts: list[tuple[Groups, list[InputError]]]) -> tuple[Groups, list[InputError]]:
    groups: Groups = {}
    errors: list[InputError] = []
    for part_groups, part_errors in parts:
        for fp, refs in part_groups.items():
            groups.setdefault(fp, []).extend(refs)
        errors.extend(part_errors)
    return groups, errors
