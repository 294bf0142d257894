"""Fleet inputs: each input is one node. Expand directories, decode each node once, fingerprint it.

An input is a recording (``.tar.gz``/``.tgz``), a bundled ``example:NAME``, a ``topodoc probe --json``
snapshot, a saved agent ``/findings`` document that carries a ``snapshot``, a directory of those
(walked; regular files only), or an agent URL (``http(s)://node:9612``: ``/snapshot`` is fetched within
the node's deadline, see :mod:`topodoc.fleet.fetch`). Every input is decoded at this edge into one
:class:`topodoc.model.Snapshot` (:mod:`topodoc.codec`); everything after reads the typed model.

A node is named by the shortest distinct part of its input's path (``h1/recording.tar.gz`` and
``h2/recording.tar.gz`` are ``h1`` and ``h2``) and shows its recorded host name beside it: two inputs
are never merged into one node, whatever their host names say.

Identical inputs are folded before they are decoded: a recording by the SHA-256 of its bytes (before it
is unpacked), a JSON file by the digest of its bytes with the identity values blanked. Loading is a pure
function of the input, so :func:`load_all` fans the inputs out over processes; each worker folds
identical fingerprints before sending them back, so what crosses a process boundary grows with the
number of distinct nodes. :func:`node_facts` is the one per-node step (snapshot -> what is compared).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from topodoc.fleet.fetch import FetchError, fetch, file_kind, loads, read_file
from topodoc.fleet.fingerprint import Prop, findings, fingerprint, nvlink_domain

MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_URL_BYTES = 8 * 1024 * 1024  # an 8-GPU snapshot is ~100 KB; 16 URLs in flight hold 128 MiB at most
URL_TIMEOUT_S = 10.0  # the whole fetch of one node, not one read
URL_WORKERS = 16
SUFFIXES = (".tar.gz", ".tgz", ".json")
EXAMPLE = "example:"


@dataclass(frozen=True)
class NodeRef:
    name: str  # the shortest distinct part of the input: what tells nodes apart
    input: str  # the path or URL as given
    hostname: str | None = None  # as recorded (may repeat, may be redacted)
    kind: str = "snapshot"  # "recording", "snapshot", "agent"
    domain: str | None = None  # NVLink domain "cluster_uuid/clique" (NVL72 trays), see fingerprint


@dataclass(frozen=True)
class InputError:
    input: str
    message: str


Fingerprint = tuple[tuple[str, Prop], ...]


def is_url(item: str) -> bool:
    return item.startswith(("http://", "https://"))


def expand(inputs: Iterable[str]) -> tuple[list[str], list[InputError]]:
    """URLs, examples and paths, with directories walked for recordings and JSON files (sorted); a path
    that is not a regular file (a FIFO, a device) is an error line, never opened."""
    out: list[str] = []
    errors: list[InputError] = []
    for item in inputs:
        if is_url(item) or item.startswith(EXAMPLE):
            out.append(item)
        elif "://" in item:
            errors.append(InputError(item, "not an http(s) URL: only http:// and https:// are fetched"))
        elif os.path.isdir(item):
            found, refused = _walk(item)
            errors.extend(refused)
            if not found and not refused:
                errors.append(
                    InputError(item, "directory holds no recordings (.tar.gz) or snapshots (.json)")
                )
            out.extend(sorted(found))
        else:
            problem = _not_regular(item)
            if problem:
                errors.append(InputError(item, problem))
            else:
                out.append(item)
    return out, errors


def _not_regular(path: str) -> str | None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file or directory"
    except OSError as err:
        return f"cannot read: {err.strerror or err}"
    return None if stat.S_ISREG(mode) else f"not a regular file ({file_kind(mode)}): refused"


def _walk(root: str) -> tuple[list[str], list[InputError]]:
    found: list[str] = []
    refused: list[InputError] = []
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            if name.endswith(SUFFIXES):
                path = os.path.join(base, name)
                problem = _not_regular(path)
                if problem:
                    refused.append(InputError(path, problem))
                else:
                    found.append(path)
    return found, refused


def _stem(item: str) -> str:
    if is_url(item):
        return item.rstrip("/")
    if item.startswith(EXAMPLE):
        return item[len(EXAMPLE) :]
    for suffix in SUFFIXES:
        if item.endswith(suffix):
            return item[: -len(suffix)]
    return item


def node_names(items: list[str]) -> dict[str, str]:
    """Each input's name: its file stem, or, where stems repeat, the shortest part of the path that
    tells the inputs apart (``a/h1/recording.tar.gz``, ``a/h2/recording.tar.gz``: ``h1``, ``h2``)."""
    parts = {item: tuple(p for p in os.path.normpath(_stem(item)).split(os.sep) if p) for item in items}
    by_base: dict[str, list[str]] = {}
    for item in items:
        by_base.setdefault(parts[item][-1] if parts[item] and not is_url(item) else item, []).append(item)
    names: dict[str, str] = {}
    for base, group in by_base.items():
        if len(group) == 1 or is_url(group[0]):
            for item in group:
                names[item] = _stem(item) if is_url(item) else base
            continue
        names.update(_distinct(group, parts))
    seen: dict[str, int] = {}
    for name in names.values():
        seen[name] = seen.get(name, 0) + 1
    return {item: (name if seen[name] == 1 else _stem(item)) for item, name in names.items()}


def _distinct(group: list[str], parts: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Drop the path components every input of ``group`` shares at the front and at the back."""
    paths = [parts[i] for i in group]
    short = min(len(p) for p in paths)
    front = 0
    while front < short and len({p[front] for p in paths}) == 1:
        front += 1
    back = 0
    while back < short - front and len({p[-1 - back] for p in paths}) == 1:
        back += 1
    out = {}
    for item in group:
        middle = parts[item][front : len(parts[item]) - back]
        out[item] = "/".join(middle) or _stem(item)
    return out


def node_name(item: str) -> str:
    return node_names([item])[item]


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


def node_facts(snapshot) -> tuple[Fingerprint, str | None]:
    """The one per-node step: a decoded snapshot -> its fingerprint (with the findings of the one diagnosis
    pipeline that no property already stands for) and NVLink domain."""
    topology = _derived(snapshot)  # once, for the fingerprint's paths and the diagnosis
    props = fingerprint(snapshot, topology)
    props.update(findings(snapshot, topology))
    return tuple(sorted(props.items())), nvlink_domain(snapshot)


def _derived(snapshot):
    """The node's derived topology, or None when derivation fails (the fingerprint then says so)."""
    from topodoc.topology.derive import derive

    try:
        return derive(snapshot)
    except Exception:  # noqa: BLE001 - reported by the fingerprint's own attempt
        return None


def load_one(
    item: str,
    cache: dict | None = None,
    name: str | None = None,
    deadline: float | None = None,
    token: str | None = None,
) -> tuple[NodeRef, Fingerprint] | InputError:
    """One input -> its node and fingerprint, or one clear error line. ``deadline``: a
    ``time.monotonic()`` instant after which nothing more is read for this node."""
    cache = {} if cache is None else cache
    name = name or node_name(item)
    try:
        if deadline is not None and time.monotonic() >= deadline:
            raise FetchError("not read: the --deadline was reached first")
        if is_url(item):
            return _from_url(item, name, deadline, token)
        if item.startswith(EXAMPLE) or item.endswith((".tar.gz", ".tgz")):
            return _from_recording(item, name, cache)
        return _from_json_file(item, name, cache)
    except (OSError, ValueError) as err:  # FetchError, CodecError and SourceError are ValueErrors
        return InputError(item, _short(str(err) or type(err).__name__))


def _from_json_file(item: str, name: str, cache: dict) -> tuple[NodeRef, Fingerprint]:
    raw = read_file(item, MAX_JSON_BYTES)
    digest = hashlib.blake2b(_IDENTITY.sub(b"", raw), digest_size=16).digest()
    host = _HOSTNAME.search(raw)
    hostname = host.group(1).decode("utf-8", "replace") if host else None
    known = cache.get(("json", digest))
    if known is None:
        snapshot, kind = _decode(loads(raw))
        known = cache[("json", digest)] = (kind, *node_facts(snapshot))
    kind, props, domain = known
    return NodeRef(name, item, hostname, kind, domain), props


def _from_recording(item: str, name: str, cache: dict) -> tuple[NodeRef, Fingerprint]:
    """A recording, folded by the SHA-256 of its bytes before it is unpacked."""
    from topodoc.probe import replaycache
    from topodoc.probe.source import SourceError, load_snapshot

    path = item
    if item.startswith(EXAMPLE):
        from topodoc.examples_index import ExampleNotFound, example_path

        try:
            path = str(example_path(item[len(EXAMPLE) :]))
        except ExampleNotFound as err:
            raise ValueError(str(err)) from err
    try:
        digest = replaycache.file_digest(path)
    except replaycache.DigestError as err:
        raise ValueError(str(err).replace(f"{path}: ", "")) from err
    known = cache.get(("rec", digest))
    if known is None:
        try:
            snapshot = load_snapshot(path)
        except SourceError as err:
            raise ValueError(str(err)) from err
        known = cache[("rec", digest)] = (snapshot.host.hostname, *node_facts(snapshot))
    hostname, props, domain = known
    return NodeRef(name, item, hostname, "recording", domain), props


def _from_url(url: str, name: str, deadline: float | None, token: str | None) -> tuple[NodeRef, Fingerprint]:
    target = url.rstrip("/") + "/snapshot"
    until = time.monotonic() + URL_TIMEOUT_S
    until = until if deadline is None else min(until, deadline)
    try:
        raw = fetch(target, until, MAX_URL_BYTES, token)
    except FetchError as err:
        raise FetchError(f"cannot fetch {target}: {err}") from err
    try:
        doc = loads(raw)
    except FetchError as err:
        raise FetchError(f"{target} did not answer a snapshot: {err}") from err
    snapshot, _kind = _decode(doc)
    props, domain = node_facts(snapshot)
    return NodeRef(name, url, snapshot.host.hostname, "agent", domain), props


def _decode(doc: object):
    """A probe snapshot, or a document (agent /findings, diagnose --json) that carries one, decoded."""
    from topodoc.codec import CodecError, snapshot_from_data

    if isinstance(doc, dict) and isinstance(doc.get("snapshot"), dict):
        data, kind = doc["snapshot"], "agent"
    elif isinstance(doc, dict) and "gpus" in doc and "pci" in doc:
        data, kind = doc, "snapshot"
    else:
        raise ValueError("neither a topodoc snapshot (probe --json) nor a document carrying one")
    try:
        return snapshot_from_data(data), kind
    except CodecError as err:
        raise ValueError(f"not a topodoc snapshot: {err}") from err


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


Groups = dict[Fingerprint, list[NodeRef]]


def _load_chunk(job: tuple[list[tuple[str, str]], float | None]) -> tuple[Groups, list[InputError]]:
    items, deadline = job
    cache: dict = {}
    # A fingerprint served from the digest cache is the same tuple object each time: group by identity
    # first (no hashing of ~200 properties per node), then by value once per distinct object.
    by_object: dict[int, tuple[Fingerprint, list[NodeRef]]] = {}
    errors: list[InputError] = []
    for item, name in items:
        got = load_one(item, cache, name, deadline)
        if isinstance(got, InputError):
            errors.append(got)
        else:
            by_object.setdefault(id(got[1]), (got[1], []))[1].append(got[0])
    groups: Groups = {}
    for fp, refs in by_object.values():
        groups.setdefault(fp, []).extend(refs)
    return groups, errors


def load_all(
    items: list[str], jobs: int | None = None, deadline_s: float | None = None, token: str | None = None
) -> tuple[Groups, list[InputError]]:
    """Every input loaded and grouped by identical fingerprint; URLs fetched concurrently. With
    ``deadline_s``, what is not read within that many seconds is listed as an error, not waited for."""
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    names = node_names(items)
    urls = [i for i in items if is_url(i)]
    files = [(i, names[i]) for i in items if not is_url(i)]
    parts = [_load_urls([(u, names[u]) for u in urls], deadline, token)] if urls else []
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(files) < 64:
        parts.append(_load_chunk((files, deadline)))
    else:
        size = max(16, len(files) // (jobs * 4))
        chunks = [(files[i : i + size], deadline) for i in range(0, len(files), size)]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            parts.extend(pool.map(_load_chunk, chunks))
    return _merge(parts)


def _load_urls(
    urls: list[tuple[str, str]], deadline: float | None, token: str | None
) -> tuple[Groups, list[InputError]]:
    groups: Groups = {}
    errors: list[InputError] = []
    with ThreadPoolExecutor(max_workers=min(URL_WORKERS, len(urls))) as pool:
        for got in pool.map(lambda u: load_one(u[0], None, u[1], deadline, token), urls):
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
