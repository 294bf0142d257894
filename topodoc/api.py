"""topodoc's public Python API. Everything not re-exported from ``topodoc`` is internal.

>>> import topodoc
>>> snap = topodoc.load("example:dgx-a100")
>>> len(snap.gpus), snap.gpus[0].name
(8, 'NVIDIA A100-SXM4-40GB')
>>> topo = topodoc.derive(snap)
>>> topo.connection("GPU0", "GPU1").smi
'NV12'
>>> report = topodoc.diagnose("example:dgx-a100-degraded-gpu-x8")      # no argument: this machine
>>> [f.rule for f in report.findings if f.severity.value == "error"]
['pcie-width-reduced']
>>> "dgx-a100" in topodoc.examples()
True

The functions take and return the typed model (``topodoc.model``, ``topodoc.topology.types``,
``topodoc.logmodel``, ``topodoc.rules.engine.Report``); ``topodoc.codec.to_data`` turns any of them
into the JSON the CLI prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["load", "derive", "analyze_logs", "diagnose", "examples", "TopodocError"]


class TopodocError(ValueError):
    """A source, recording or input that cannot be used; the message is one line for people."""


def load(source: str = "live"):
    """A :class:`topodoc.model.Snapshot` of ``source``: ``"live"`` (this machine), a recording
    ``NAME.tar.gz``, ``"example:NAME"`` (a bundled recording), or a ``topodoc probe --json`` file."""
    from topodoc.probe.source import SourceError, load_snapshot

    if isinstance(source, (str, os.PathLike)) and str(source).endswith(".json"):
        return _load_json(str(source))
    try:
        return load_snapshot(None if source == "live" else str(source))
    except SourceError as err:
        raise TopodocError(str(err)) from err


def _load_json(path: str):
    from topodoc import codec

    try:
        with open(path, encoding="utf-8") as fh:
            return codec.load(fh.read())
    except OSError as err:
        raise TopodocError(f"cannot read {path}: {err.strerror or err}") from err
    except (ValueError, TypeError) as err:
        raise TopodocError(f"{path}: not a topodoc snapshot ({err})") from err


def derive(snapshot):
    """The derived :class:`topodoc.topology.types.Topology` of a snapshot."""
    from topodoc.topology import derive as _derive

    return _derive(snapshot)


def analyze_logs(paths: Iterable[str]):
    """:class:`topodoc.logmodel.LogAnalysis` of NCCL logs (paths; ``.gz`` and ``-`` for stdin work)."""
    from topodoc.parsers.nccl_log import LogInputError, analyze

    try:
        from topodoc import catalogue

        return analyze(list(paths), catalogue.scan_literals())
    except (LogInputError, OSError) as err:
        raise TopodocError(str(err)) from err


def diagnose(
    source: str | None = None,
    logs: Iterable[str] = (),
    nccl_tests: str | None = None,
    files: Iterable[str] = (),
):
    """Run every rule and return :class:`topodoc.rules.engine.Report`: the same pipeline as
    ``topodoc diagnose`` (:func:`topodoc.diagnosis.run`).

    ``source`` is as in :func:`load` (``"live"``, a recording, ``"example:NAME"``); ``logs`` are NCCL logs;
    ``nccl_tests`` an nccl-tests output file; ``files`` pasted texts of any kind (``nvidia-smi topo -m``,
    ``lspci -vvv``, ``dmesg``, ...), recognized by content. With nothing given, this machine is probed;
    with only logs or files, no machine is."""
    from topodoc.diagnosis import DiagnosisError, Request, run

    if source is not None and str(source).endswith(".json"):
        files, source = (*tuple(files), str(source)), None  # a probe JSON is read like any pasted file
    try:
        return run(Request(source=None if source is None else str(source), logs=tuple(logs),
                           nccl_tests=nccl_tests, files=tuple(files))).report
    except DiagnosisError as err:
        raise TopodocError(str(err)) from err


def examples() -> list[str]:
    """Names of the bundled example recordings (use as ``load("example:NAME")``)."""
    from topodoc.examples_index import list_examples

    return list_examples()
