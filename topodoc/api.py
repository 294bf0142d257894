"""topodoc's public Python API. Everything not re-exported from ``topodoc`` is internal.

>>> import topodoc
>>> snap = topodoc.load("example:dgx-a100")
>>> len(snap.gpus), snap.gpus[0].name
(8, 'NVIDIA A100-SXM4-40GB')
>>> topo = topodoc.derive(snap)
>>> topo.connection("GPU0", "GPU1").smi
'NV12'
>>> report = topodoc.diagnose("example:dgx-a100-degraded-gpu-x8")
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


def diagnose(source: str | None = None, logs: Iterable[str] = (), nccl_tests: str | None = None):
    """Run every rule on a machine (``source`` as in :func:`load`; None with logs: no hardware) and/or
    NCCL logs and nccl-tests output; returns :class:`topodoc.rules.engine.Report`."""
    from topodoc.rules.engine import Facts, evaluate
    from topodoc.rules.registry import RULES

    logs = list(logs)
    snapshot = load(source) if source is not None or not logs else None
    topology = derive(snapshot) if snapshot is not None else None
    analysis = analyze_logs(logs) if logs else None
    comparisons = _nccl_tests(nccl_tests, snapshot, topology) if nccl_tests else None
    return evaluate(Facts(snapshot, topology, analysis, comparisons), RULES)


def _nccl_tests(path: str, snapshot, topology):
    from topodoc.parsers.nccl_tests import NcclTestsParseError
    from topodoc.rules.bandwidth import nccl_tests_input

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return nccl_tests_input(path, fh.read(), snapshot, topology)
    except OSError as err:
        raise TopodocError(f"cannot read {path}: {err.strerror or err}") from err
    except NcclTestsParseError as err:
        raise TopodocError(f"{path}: {err}") from err


def examples() -> list[str]:
    """Names of the bundled example recordings (use as ``load("example:NAME")``)."""
    from topodoc.examples_index import list_examples

    return list_examples()
