"""Derived topology: how every GPU reaches every GPU and NIC, from a snapshot of the machine.

Public API::

    derive(snapshot: model.Snapshot) -> Topology
    to_matrix(topology: Topology, *, all_nics: bool = False) -> model.ConnectionMatrix
    compare(derived: model.ConnectionMatrix, printed: model.ConnectionMatrix) -> list[CellDiff]

The dataclasses live in :mod:`topodoc.topology.types`. Everything here is pure: it never reads the
machine.
"""

from topodoc.topology.derive import derive
from topodoc.topology.matrix import compare, to_matrix
from topodoc.topology.types import (
    CellDiff,
    Connection,
    Edge,
    GpuEnd,
    Graph,
    Hop,
    Link,
    MachineShape,
    NicEnd,
    Node,
    Route,
    Topology,
)

__all__ = [
    "CellDiff", "Connection", "Edge", "GpuEnd", "Graph", "Hop", "Link", "MachineShape", "NicEnd", "Node",
    "Route", "Topology", "compare", "derive", "to_matrix",
]
