"""Recorded GPU servers for other projects' tests (public, stable API; see docs/API.md).

>>> from topodoc.testing import machine
>>> m = machine("dgx-a100")
>>> m.snapshot.gpus[0].name
'NVIDIA A100-SXM4-40GB'
>>> with m.nvml() as pynvml:
...     pynvml.nvmlInit()
...     pynvml.nvmlDeviceGetCount()
8
>>> import os; os.path.isdir(os.path.join(m.sysfs_root, "sys", "bus", "pci", "devices"))
True

A :class:`Machine` is a recording (a bundled example by name, or a ``.tar.gz`` path) opened for
replay: its snapshot and derived topology, a **sysfs root** (the recorded ``/sys`` and ``/proc``
files under one directory, for code that reads them through a configurable root like hwloc's
``HWLOC_FSROOT``), an **NVML replay** (a drop-in ``pynvml``) and a **command replay** (PATH shims).
The pytest plugin (``topodoc.pytest_plugin``) hands these to tests as the ``topodoc_machine`` fixture.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import cached_property

from topodoc.testing.nvml import Handle, NotRecordedError

__all__ = ["Machine", "machine", "NotRecordedError", "Handle"]


class Machine:
    """One recorded machine, opened for replay."""

    def __init__(self, spec: str) -> None:
        from topodoc.probe.source import resolve_source

        self.spec = spec
        source = (
            spec if spec.endswith((".tar.gz", ".tgz")) or spec.startswith("example:") else f"example:{spec}"
        )
        self.host, self.name = resolve_source(source)

    def __repr__(self) -> str:
        return f"<topodoc Machine {self.name}>"

    @cached_property
    def snapshot(self):
        """The :class:`topodoc.model.Snapshot` the collectors read from the recording."""
        from topodoc.probe.collect import collect

        return collect(self.host, self.name)

    @cached_property
    def topology(self):
        """The derived :class:`topodoc.topology.types.Topology`."""
        from topodoc.topology import derive

        return derive(self.snapshot)

    @property
    def sysfs_root(self) -> str:
        """A directory holding the recorded ``sys/`` and ``proc/`` trees: read-only (files 0444, folders
        0555) and shared through the replay cache, its content verified before it is handed out."""
        return self.host.fs.root

    def nvml_module(self):
        """A fresh drop-in ``pynvml`` module answering from the recording."""
        from topodoc.probe.host import TapeNvml
        from topodoc.testing.nvml import replay_module

        nvml = self.host.nvml
        if not isinstance(nvml, TapeNvml):
            raise TypeError(f"{self.name} has no NVML tape")
        return replay_module(nvml, self.name)

    @contextmanager
    def nvml(self):
        """``import pynvml`` answers from the recording inside the block."""
        from topodoc.testing.nvml import installed

        with installed(self.nvml_module()) as module:
            yield module

    def command_shims(self, directory: str) -> list[str]:
        """Write PATH shims for the recorded commands into ``directory``; the program names."""
        from topodoc.testing.commands import write_shims

        return write_shims(directory, self._command_tape(), self.name)

    def _command_tape(self) -> dict:
        import dataclasses

        answers = getattr(self.host.runner, "answers", {})
        return {"commands": [a if isinstance(a, dict) else dataclasses.asdict(a) for a in answers.values()]}


def machine(spec: str) -> Machine:
    """A bundled example by name (``"dgx-a100"``, ``"example:dgx-a100"``) or a recording path."""
    return Machine(os.fspath(spec))
