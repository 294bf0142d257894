"""Resolve the ``--from`` spelling every command that takes a machine accepts.

``None`` or ``"live"``: this machine; a path to a ``.tar.gz``/``.tgz``: a recording, replayed;
``example:<name>``: a bundled recording (``topodoc.examples_index``). Every bad spec or archive is
one :class:`SourceError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from topodoc import model

if TYPE_CHECKING:  # imported where used: a cached replay loads neither
    from topodoc.probe.host import Host

EXAMPLE = "example:"


class SourceError(ValueError):
    """The machine spec names nothing usable (no such file, not a recording, unsafe archive...)."""


DEFAULT_DEADLINE_S = 60.0  # a live probe of an 8-GPU server takes about a second; a hung GPU never ends


def resolve_source(spec: str | None, deadline_s: float | None = DEFAULT_DEADLINE_S) -> tuple[Host, str]:
    """The Host for ``spec`` and the source name a Snapshot should carry; a live Host asks nothing of
    NVML or nvidia-smi after ``deadline_s`` seconds (what it has then is reported, the rest as gaps)."""
    if spec is None or spec == "live":
        from topodoc.probe.host import Host

        return Host.live(deadline_s), "live"
    return _open(*_recording(spec))


def recording_path(spec: str) -> str:
    """The archive ``spec`` (``NAME.tar.gz`` or ``example:NAME``) names; SourceError otherwise."""
    return _recording(spec)[0]


def _recording(spec: str) -> tuple[str, str | None]:
    """The archive path ``spec`` names and the source label it gives (None: the recording's own name)."""
    if spec.startswith(EXAMPLE):
        return _example(spec[len(EXAMPLE) :]), spec
    if not os.path.exists(spec):
        raise SourceError(f"no such recording: {spec}")
    if not os.path.isdir(spec) and not spec.endswith((".tar.gz", ".tgz")) and _is_text_machine(spec):
        raise _TextMachine(spec)
    if os.path.isdir(spec) or not spec.endswith((".tar.gz", ".tgz")):
        raise SourceError(f"not a recording archive (expected NAME.tar.gz): {spec}")
    return spec, None


def _example(name: str) -> str:
    from topodoc.examples_index import ExampleNotFound, example_path

    try:
        return str(example_path(name))
    except ExampleNotFound as err:
        raise SourceError(str(err)) from err


def _open(path: str, source: str | None, digest: str | None = None) -> tuple[Host, str]:
    from topodoc.probe.archive import ArchiveError
    from topodoc.probe.record import open_recording

    try:
        host = open_recording(path, digest)
    except ArchiveError as err:
        raise SourceError(str(err)) from err
    return host, _label(source, host.meta.get("name"), path)


def _label(source: str | None, name, path: str) -> str:
    return source or str(name or os.path.basename(path))


def host_for_root(root: str) -> tuple[Host, str]:
    """``--root DIR``: an extracted recording (``meta.json`` + ``fs/``) replays whole; any other
    directory is read as a filesystem root (like ``HWLOC_FSROOT``) with NVML and commands absent."""
    from topodoc.probe.archive import ArchiveError
    from topodoc.probe.host import Host, RootFs, TapeNvml, TapeRunner
    from topodoc.probe.record import open_directory

    if not os.path.isdir(root):
        raise SourceError(f"--root: no such directory: {root}")
    if os.path.isfile(os.path.join(root, "meta.json")) and os.path.isdir(os.path.join(root, "fs")):
        try:
            host = open_directory(root)
        except ArchiveError as err:
            raise SourceError(str(err)) from err
        return host, str(host.meta.get("name") or root)
    return Host(RootFs(root), TapeNvml({}), TapeRunner({})), f"root:{root}"


class _TextMachine(SourceError):
    """``spec`` is a machine description file (hwloc / NCCL topology XML, probe --json), not a recording."""

    def __init__(self, spec: str) -> None:
        super().__init__(f"{spec} is a machine description (hwloc or NCCL topology XML, probe --json), "
                         "not a recording: this command needs a recording")


def _is_text_machine(path: str) -> bool:
    """Starts like XML, JSON or gzip, in any encoding the text reader takes (UTF-8 with or without a BOM,
    UTF-16 with or without one: what ``diagnose FILE`` reads, ``--from FILE`` reads)."""
    from topodoc.inputs import decode

    try:
        with open(path, "rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return False
    if raw.startswith(b"\x1f\x8b"):
        return True
    return decode(raw).lstrip().startswith(("<", "{"))


def load_snapshot(spec: str | None, deadline_s: float | None = DEFAULT_DEADLINE_S) -> model.Snapshot:
    """Collect a Snapshot from the machine ``spec`` names (see :func:`resolve_source`); a hardware text
    file (hwloc XML, NCCL topology XML, ``topodoc probe --json``) is read like a recording. A
    recording's Snapshot comes from the replay cache when the same code collected it before."""
    if spec is None or spec == "live":
        from topodoc.probe.collect import collect
        from topodoc.probe.host import Host

        return collect(Host.live(deadline_s), "live")
    try:
        path, source = _recording(spec)
    except _TextMachine:
        return _text_snapshot(str(spec))
    return _replayed(path, source)


def _replayed(path: str, source: str | None) -> model.Snapshot:
    from topodoc.probe import replaycache

    try:
        digest = replaycache.file_digest(path)
    except replaycache.DigestError as err:
        raise SourceError(str(err)) from err
    cached = replaycache.cached_snapshot(digest)
    if cached is not None:
        snapshot, name = cached
        return dataclasses.replace(snapshot, source=_label(source, name, path))
    from topodoc.probe import record
    from topodoc.probe.collect import collect

    host, label = _open(path, source, digest)
    snapshot = collect(host, label)
    if host.meta.get("recorded_at"):  # else collect stamps the time now: not the same result twice
        record.store_snapshot(digest, snapshot, host.meta.get("name"))
    return snapshot


def _text_snapshot(path: str) -> model.Snapshot:
    from topodoc.text.inputs import InputError, read_input

    try:
        item = read_input(path)
    except InputError as err:
        raise SourceError(str(err)) from err
    if item.kind not in ("hwloc-xml", "nccl-topo-xml", "topodoc-json") or item.parsed is None:
        what = "not a machine description (hwloc XML, NCCL topology XML, topodoc probe --json)"
        raise SourceError(f"{path}: {item.error or what}")
    return item.parsed
