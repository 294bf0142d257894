"""The derived topology of one machine: frozen dataclasses, nothing else.

:func:`topodoc.topology.derive` fills them from a :class:`topodoc.model.Snapshot`; rules, the
bandwidth model and the renderers read them. Everything here serialises with
:func:`topodoc.codec.to_data` (plain strings for the enum-like fields, tuples for lists).

Vocabulary:

* an *endpoint* is a GPU (``GPU0``) or a NIC (``NIC0``), named the way ``nvidia-smi topo -m`` names it;
* a :class:`Hop` is one node on a route: a device, a switch port, a root port, a host bridge, a NUMA
  node (socket), an NVSwitch; ids are PCI addresses, ``pci0000:00``, ``numa0``, ``GPU3``, ``nvswitch``;
* a :class:`Link` joins two consecutive hops: a PCIe link (gen, width), NVLinks (count), NVLink-C2C
  between a Grace-coupled GPU and its CPU (``c2c``), or the CPU interconnect (``smp``);
* a :class:`Route` is the hops and links between two endpoints, with its bottleneck link;
* a :class:`Connection` is everything derived about one endpoint pair: the nvidia-smi class, NCCL's
  path type, the PCIe route, the route traffic takes, and its bottleneck.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from topodoc.topology.vocab import NCCL_PATHS, SMI_LEVELS  # noqa: F401 (re-exported)

# Hop kinds
GPU, NIC, NVSWITCH = "gpu", "nic", "nvswitch"
ROOT_PORT, UPSTREAM, DOWNSTREAM, BRIDGE = "root_port", "switch_upstream", "switch_downstream", "bridge"
HOST_BRIDGE, NUMA = "host_bridge", "numa"

# Link kinds
PCIE, NVLINK, SMP, C2C = "pcie", "nvlink", "smp", "c2c"


@dataclass(frozen=True)
class Hop:
    kind: str  # one of the hop kinds above
    id: str  # PCI address, "pci0000:00", "numa0", "GPU3", "nvswitch"
    label: str = ""  # for people: "PLX switch 10b5:c010", "NUMA 0 (CPUs 0-31)"


@dataclass(frozen=True, kw_only=True)
class Link:
    """One link between two hops. Bandwidths are theoretical, per direction, in GB/s."""

    kind: str  # "pcie", "nvlink", "c2c" or "smp"
    a: str  # hop id, upstream side for PCIe
    b: str
    gen: int | None = None  # PCIe generation now trained
    width: int | None = None  # PCIe lanes now trained
    max_gen: int | None = None
    max_width: int | None = None
    nvlinks: int | None = None  # NVLink count in this bond
    nvlink_version: int | None = None  # NVML enum (5 == NVLink 3.1)
    bandwidth_gbps: float | None = None  # at the trained speed (all NVLinks / C2C links together)
    max_bandwidth_gbps: float | None = None  # at the maximum speed both ends support
    c2c_links: int | None = None  # NVLink-C2C links up in this GPU-CPU link

    @property
    def degraded(self) -> bool:
        """True when a PCIe link trained below what both ends support."""
        gen_low = self.gen is not None and self.max_gen is not None and self.gen < self.max_gen
        width_low = self.width is not None and self.max_width is not None and self.width < self.max_width
        return gen_low or width_low


@dataclass(frozen=True)
class Route:
    hops: tuple[Hop, ...] = ()
    links: tuple[Link, ...] = ()
    bottleneck: Link | None = None  # the lowest-bandwidth link with a known bandwidth


@dataclass(frozen=True, kw_only=True)
class Connection:
    """Everything derived about one endpoint pair (``a`` < ``b`` in matrix order)."""

    a: str  # "GPU0"
    b: str  # "GPU1" or "NIC0"
    smi: str  # nvidia-smi class as it prints it: "NV12", "PIX", "PXB", "PHB", "NODE", "SYS"
    pci_level: str | None  # the PCIe class alone (PIX..SYS); None when a device has no PCI address
    nvlinks: int = 0  # NVLinks bonded between the two (through NVSwitch: links per GPU)
    nccl: str = "SYS"  # NCCL path type: NVL, NVB, PIX, PXB, P2C, PXN, PHB, SYS
    via: str | None = None  # intermediate GPU for NVB and PXN
    pcie: Route | None = None  # the PCIe route, whatever NCCL picks
    route: Route = Route()  # the route traffic takes per NCCL's path type
    through_nvswitch: bool = False


@dataclass(frozen=True, kw_only=True)
class GpuEnd:
    name: str  # "GPU0"
    index: int
    model: str | None = None
    pci_address: str | None = None
    numa_node: int | None = None  # -1 kept: firmware gave none
    cpu_affinity: str | None = None
    nvlinks_active: int = 0
    nvlinks_down: int = 0
    nvswitch_links: int = 0  # active links whose far end is an NVSwitch
    clique: str | None = None  # "<cluster uuid>/<clique id>" on NVLink fabric systems
    gpu_numa_id: int | None = None  # the GPU memory's own NUMA node (Grace); nvidia-smi's "GPU NUMA ID"
    c2c_links: int = 0  # NVLink-C2C links up to the local CPU (Grace)
    c2c_gbps: float | None = None  # their bandwidth per direction as NCCL computes it
    cpu_path: str | None = None  # NCCL's path type to the local CPU: "C2C" over NVLink-C2C, else "PHB"


@dataclass(frozen=True, kw_only=True)
class NicEnd:
    name: str  # "NIC0"
    device: str  # "mlx5_0", "efa0", "eth1"
    kind: str  # model.Nic.kind
    pci_address: str | None = None
    numa_node: int | None = None
    in_smi_matrix: bool = True  # nvidia-smi lists it (Mellanox/NVIDIA RDMA devices)
    rate_gbps: float | None = None  # fastest port
    ports_down: int = 0


@dataclass(frozen=True, kw_only=True)
class MachineShape:
    """How the machine is built, named. ``nvlink``: "nvswitch", "fabric-clique", "bridge-pairs",
    "hybrid-cube-mesh", "partial-mesh", "none". ``pcie``: "switches", "root-ports", "flat-vm",
    "mixed", "none"."""

    nvlink: str
    pcie: str
    gpus: int
    sockets: int
    name: str  # "NVSwitch all-to-all (NV12) · PCIe switches · 2 sockets · 8 GPUs"
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Node:
    """A box in the diagram. ``parent`` groups it inside another node (a socket)."""

    id: str
    kind: str  # "numa", "host_bridge", "root_port", "switch", "gpu", "nic", "nvswitch"
    label: str
    parent: str | None = None


@dataclass(frozen=True, kw_only=True)
class Edge:
    a: str
    b: str
    kind: str  # "pcie", "nvlink", "smp", "internal" (a socket to its host bridge)
    label: str = ""
    degraded: bool = False


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...] = ()
    edges: tuple[Edge, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Topology:
    source: str
    shape: MachineShape
    gpus: tuple[GpuEnd, ...] = ()
    nics: tuple[NicEnd, ...] = ()
    gpu_pairs: tuple[Connection, ...] = ()  # every unordered GPU pair
    gpu_nic: tuple[Connection, ...] = ()  # every GPU x NIC pair
    nic_pairs: tuple[Connection, ...] = ()  # every unordered NIC pair (PCIe only)
    graph: Graph = Graph()
    notes: tuple[str, ...] = ()  # what could not be derived and why

    def connection(self, a: str, b: str) -> Connection | None:
        """The connection between two endpoint names, in either order."""
        return self._connections.get((a, b))

    @cached_property
    def _connections(self) -> dict[tuple[str, str], Connection]:
        """Every connection under both orders of its ends, built on first use (the first one listed
        wins, as a scan would find it). Not a field: it is neither compared nor serialised."""
        index: dict[tuple[str, str], Connection] = {}
        for conn in (*self.gpu_pairs, *self.gpu_nic, *self.nic_pairs):
            index.setdefault((conn.a, conn.b), conn)
            index.setdefault((conn.b, conn.a), conn)
        return index


@dataclass(frozen=True, kw_only=True)
class CellDiff:
    """One cell where the derived matrix and nvidia-smi's own matrix disagree."""

    row: str
    column: str  # a GPU/NIC name, or "CPU Affinity" / "NUMA Affinity" / "GPU NUMA ID"
    derived: str | None
    printed: str | None
