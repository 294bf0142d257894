"""A :class:`RootFs` that remembers everything it was asked, so a recording holds exactly what the
collectors read: file contents as read (one read, so a recording never disagrees with the probe that
made it), directory listings with the kind of each entry, every symlink followed on the way, and
every failure with its reason (replayed as the same :class:`FsError`).
"""

from __future__ import annotations

import os

from topodoc.model import GapReason
from topodoc.probe.host import FsError, RootFs, _normalize


class RecordingFs(RootFs):
    def __init__(self, inner: RootFs) -> None:
        super().__init__(inner.root, inner.failures)
        self.inner_is_live = inner.is_live
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.empty_files: set[str] = set()
        self.unreadable: dict[str, tuple[GapReason, str]] = {}

    @property
    def is_live(self) -> bool:
        # Enumerate through sysfs (never udev) while recording, so the listing lands in the archive.
        return False

    def _note_link(self, link: str, target: str) -> None:
        self.links[link] = target

    def _failed(self, err: FsError) -> FsError:
        self.unreadable.setdefault(err.path, (err.reason, err.detail))
        return err

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        try:
            data = super().read_bytes(path, limit)
        except FsError as err:
            raise self._failed(err) from err
        self.files[self._resolve(_normalize(path))] = data
        return data

    def listdir(self, path: str) -> list[str]:
        try:
            entries = super().listdir(path)
        except FsError as err:
            raise self._failed(err) from err
        real = self._resolve(_normalize(path))
        self.dirs.add(real)
        for entry in entries:
            self._note_kind(os.path.join(real, entry))
        return entries

    def readlink(self, path: str) -> str:
        try:
            return super().readlink(path)
        except FsError as err:
            raise self._failed(err) from err

    def realpath(self, path: str) -> str:
        real = super().realpath(path)
        if os.path.isdir(self.host_path(real)):
            self.dirs.add(real)
        return real

    def exists(self, path: str) -> bool:
        found = super().exists(path)
        if found:
            self._note_kind(self._resolve(_normalize(path)))
        return found

    def is_dir(self, path: str) -> bool:
        found = super().is_dir(path)
        if found:
            self.dirs.add(self._resolve(_normalize(path)))
        return found

    def _note_kind(self, real: str) -> None:
        host = self.host_path(real)
        if os.path.islink(host):
            self.links.setdefault(real, os.readlink(host))
        elif os.path.isdir(host):
            self.dirs.add(real)
        elif os.path.lexists(host):
            self.empty_files.add(real)
