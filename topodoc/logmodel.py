"""What topodoc learned from a set of NCCL logs: frozen dataclasses, nothing else.

:func:`topodoc.parsers.nccl_log.analyze` fills a :class:`LogAnalysis`; the rule engine and the renderers
read it. Every claim carries an :class:`Evidence` (input name, 1-based line number, the line's text) so
a report can say *where* it comes from. A value the logs do not show is ``None`` (or an empty tuple),
never a guess.

Vocabulary:

- *process*: one ``host:pid`` pair from the NCCL line prefix (one rank of one job, usually);
- *rank*: a rank of a communicator as NCCL's Init lines print it;
- *transport*: the inter-node transport, one of ``IB``, ``RoCE``, ``EFA``, ``Socket``, ``TCPX``,
  ``TCPXO``, ``gIB``, ``Slingshot``, ``IBext``, another plugin's name, or ``none`` (single node, no
  network connection made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR_CATEGORIES = (
    "ib_completion_error", "timeout", "socket_error", "no_net_device", "cuda_error", "system_error",
    "invalid_usage", "internal_error", "remote_error", "version_mismatch", "plugin_error", "affinity",
    "p2p_disabled", "other",
)
RELATED_LIMIT = 4  # lines kept in LogError.related


@dataclass(frozen=True)
class Evidence:
    """One log line that supports a claim: input name, 1-based line number, text (prefix included)."""

    file: str
    line: int
    text: str


@dataclass(frozen=True, kw_only=True)
class LogError:
    """A warning or error found in the logs, explained.

    ``category`` is one of :data:`ERROR_CATEGORIES`; ``level`` is what the line says (``WARN``,
    ``ERROR``, ``INFO``) or ``derived`` for a finding computed across lines (version mismatch).
    ``count`` is how many lines said the same thing (same category, same message once numbers are
    masked); an INFO line a process repeats verbatim counts once. ``line``/``text`` are the first.
    ``related`` holds other lines of the same failure: the return-code chain (``file.cc:123 -> 6``) each
    process printed with this WARN, before or after it (at most :data:`RELATED_LIMIT`, first first).

    Structure read from the line, so that rules need not parse it again: ``signature`` is the id of the
    failure-catalogue record (:mod:`topodoc.catalogue`) the line matched, with its ``cause`` and ``fix``;
    ``benign`` is true for lines the catalogue knows to be harmless (they are listed in
    ``LogAnalysis.benign``, never among the errors); ``ib_status`` is the verbs completion status of an IB
    completion error (``ibv_wc_status``: 12 = retry exceeded); ``repeats`` is set on PyTorch's
    ``Last error:`` line: the NCCL warning text it repeats as the reason the job failed.
    """

    category: str
    level: str
    file: str
    line: int
    text: str
    explanation: str
    host: str | None = None
    pid: int | None = None
    count: int = 1
    related: tuple[Evidence, ...] = ()
    signature: str | None = None
    cause: str | None = None
    fix: str | None = None
    benign: bool = False
    ib_status: int | None = None
    repeats: str | None = None
    # set on a line of another process that only reacted to the job's first failure (a connection closed
    # by the peer, a remote error, a flushed work request): "file:line" of that first failure
    consequence_of: str | None = None


@dataclass(frozen=True, kw_only=True)
class EnvSetting:
    """``NCCL_X set by environment to Y`` (or ``NCCL_IB_HCA set to Y``) as NCCL echoed it."""

    name: str
    value: str
    evidence: Evidence
    disables: str | None = None  # the feature the setting switches off, when it does


@dataclass(frozen=True, kw_only=True)
class NetDevice:
    """A device NCCL said it uses: an HCA port, a socket interface, an OOB/bootstrap interface, an OFI NIC.

    ``role``: ``hca`` (NET/IB), ``socket`` (NET/Socket), ``oob`` (IB's out-of-band interface),
    ``bootstrap``, ``ofi`` (aws-ofi-nccl NIC), ``plugin`` (another plugin's interface).
    """

    host: str | None
    role: str
    name: str
    index: int | None = None  # NCCL's net device index ([0] in "Using [0]mlx5_0:1/IB")
    port: int | None = None
    link_layer: str | None = None  # "IB", "RoCE", "UNSPECIFIED"
    address: str | None = None  # IP address for interfaces
    evidence: Evidence | None = None


@dataclass(frozen=True, kw_only=True)
class Connection:
    """One row of the per-rank connection table: a rank, a peer, and how they are connected.

    ``transport`` is the path as NCCL prints it after ``via`` without flags (``NET/IB``, ``P2P/IPC``,
    ``P2P/CUMEM``, ``P2P/direct``, ``P2P/indirect``, ``SHM``, ``COLLNET/SHARP`` ...). ``direction``:
    ``send``, ``receive`` or ``None`` (intra-node lines have none). ``rank`` is the rank that printed the
    line; ``nic`` the net device index, ``gdr`` whether ``/GDRDMA`` was shown (NET only), ``proxy_rank``
    the PXN proxy. ``channels`` counts the channel lines folded into this row.
    """

    rank: int
    peer: int
    transport: str
    direction: str | None
    host: str | None
    nic: int | None = None
    gdr: bool | None = None
    proxy_rank: int | None = None
    flags: tuple[str, ...] = ()  # "read", "CE", "Shared", "PCI"
    channels: int = 1
    evidence: Evidence | None = None


@dataclass(frozen=True, kw_only=True)
class RankInfo:
    """A rank of a communicator as an Init line (or a ``comm ... nRanks`` line) printed it."""

    rank: int
    nranks: int
    comm: str  # the commId when printed, else the comm pointer
    host: str | None
    pid: int | None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None  # canonical PCI address
    local_rank: int | None = None
    local_ranks: int | None = None
    nnodes: int | None = None
    evidence: Evidence | None = None


@dataclass(frozen=True, kw_only=True)
class Communicator:
    """A communicator: its id, size, and how far its ranks got (Init START / COMPLETE, destroy)."""

    comm_id: str
    nranks: int | None
    ranks_seen: int
    init_start: int = 0  # how many ranks logged Init START
    init_complete: int = 0
    destroyed: int = 0
    evidence: Evidence | None = None


@dataclass(frozen=True, kw_only=True)
class HostSummary:
    """What the logs say about one host name (which may stand for several machines)."""

    name: str
    machines: int  # >1 when one name covers several machines (distinct bootstrap IPs)
    pids: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()
    nccl_versions: tuple[str, ...] = ()
    hcas: tuple[str, ...] = ()
    gdr: bool | None = None


@dataclass(frozen=True, kw_only=True)
class LogSummary:
    """The verdict: the fields a person (and a rule) looks at first. ``None`` = the logs do not say."""

    transport: str | None = None
    net_plugin: str | None = None  # the NET name NCCL selected ("IB", "Libfabric", "GPUDirectTCPX_v7"...)
    libfabric_provider: str | None = None
    gdr: bool | None = None  # True: every network connection uses GPUDirect RDMA
    gdr_mode: str | None = None  # "used", "not_used", "asymmetric"
    nccl_version: str | None = None  # the one most processes report
    nccl_versions: tuple[str, ...] = ()
    cuda_driver_version: int | None = None  # 12040 == 12.4
    nranks: int | None = None
    nnodes: int | None = None
    # a lower bound the log proves (distinct machines seen) when only some ranks are logged; equals
    # ``nnodes`` when that is known; its lines are evidence["nnodes_min"] when ``nnodes`` is None
    nnodes_min: int | None = None
    local_ranks: int | None = None
    hosts: tuple[str, ...] = ()
    hcas: tuple[str, ...] = ()  # "mlx5_0:1/IB"
    intra_node: tuple[str, ...] = ()  # "P2P/IPC", "SHM", "NVLS", "PXN", ...
    errors: tuple[LogError, ...] = ()
    benign: tuple[LogError, ...] = ()  # harmless lines users chase, said so explicitly (LogError.benign)
    env: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, tuple[Evidence, ...]] = field(default_factory=dict)  # field name -> lines
    notes: tuple[str, ...] = ()  # limits the analysis hit (tables capped to keep memory bounded)


@dataclass(frozen=True, kw_only=True)
class PluginInfo:
    """A plugin NCCL tried to load, and what became of it (REFERENCE.md §1.7-§1.9).

    ``kind``: ``net``, ``coll`` (CollNet, e.g. SHARP), ``tuner`` or ``profiler``. ``name`` is the plugin's
    own name when the log prints it (``IBext_v8``, ``aws-ofi-nccl``, ``GPUDirectTCPX_v7``, ``gIB``,
    ``FasTrak``, ``SHARP``), else the library NCCL looked for (``libnccl-net.so``). ``status``:

    - ``loaded``: NCCL (or the plugin itself) said it loaded / initialized;
    - ``failed``: the library was there but unusable (dlopen error other than "no such file", missing
      ``ncclNetPlugin_vN`` symbols, or the plugin's own init failed, e.g. aws-ofi-nccl found no provider);
    - ``not_found``: no such library; NCCL went on with its internal IB/Socket (the normal case when
      nothing was installed).

    ``selected`` (net plugins): ``True`` when NCCL's chosen network (``Using network`` / ``via NET/<name>``)
    is this plugin, ``False`` when NCCL chose another network, ``None`` when the log does not say. A net
    plugin with ``status == "loaded"`` and ``selected is False`` is the silent fallback the
    ``nccl-socket-fallback`` rule looks for; the analyzer also reports it as a ``plugin_error`` error.
    ``detail`` keeps the reason NCCL printed (a dlerror, "no eligible providers", ...); ``evidence`` is the
    first line about this plugin, ``failure`` the first line that shows it failing.
    """

    kind: str
    name: str
    status: str
    version: str | None = None  # the plugin's release when it prints one, else the API it loaded with ("v7")
    library: str | None = None
    selected: bool | None = None
    detail: str | None = None
    evidence: Evidence | None = None
    failure: Evidence | None = None


INFERENCE_KINDS = ("single_node", "nic_loopback", "first_failure", "hang", "version_range")


@dataclass(frozen=True, kw_only=True)
class Inference:
    """A conclusion drawn across lines (:mod:`topodoc.parsers.nccl_log.infer`), never read off one line.

    ``kind`` is one of :data:`INFERENCE_KINDS`: ``single_node`` (one process, or one host, holds every rank),
    ``nic_loopback`` (network connections inside one node), ``first_failure`` (the earliest error in time
    across ranks), ``hang`` (where the ranks stopped), ``version_range`` (the NCCL releases a host's message
    wordings fit, when something is worth saying about it). ``statement`` says it in words with what it
    rests on; ``unknown`` says what the log does not settle and what would (empty when nothing is left
    open). ``evidence`` holds the lines it rests on, first first."""

    kind: str
    statement: str
    evidence: tuple[Evidence, ...] = ()
    host: str | None = None
    pid: int | None = None
    unknown: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProcessPhase:
    """How far one process got (the last phase it logged), for a log that looks like a hang.

    ``phase``: ``bootstrap`` (only bootstrap / network set-up lines), ``init`` (Init START or the
    communicator's topology lines), ``connect`` (channel connection lines, ``Connected all rings``),
    ``init_complete`` (Init COMPLETE), ``collectives`` (collective calls logged; ``op_count`` the last
    ``opCount`` seen). ``ranks`` are the ranks this process holds (Init lines), ``evidence`` the line that
    shows the phase."""

    host: str | None
    pid: int | None
    phase: str
    ranks: tuple[int, ...] = ()
    op_count: int | None = None
    evidence: Evidence | None = None


@dataclass(frozen=True, kw_only=True)
class HostVersions:
    """The NCCL releases one host's message wordings fit (REFERENCE.md §1; the table is
    :mod:`topodoc.parsers.nccl_log.wordings`): ``first`` .. ``last`` (``None``: open-ended), the wording ids
    that set the bounds, and the versions the host printed."""

    host: str | None
    first: str | None
    last: str | None
    wordings: tuple[str, ...] = ()
    printed: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, kw_only=True)
class InputStats:
    name: str
    lines: int
    nccl_lines: int
    bytes: int
    long_lines: int = 0  # lines over the grammar's length limit, read by their two ends only


@dataclass(frozen=True, kw_only=True)
class LogAnalysis:
    """Everything :func:`topodoc.parsers.nccl_log.analyze` found in one set of inputs."""

    summary: LogSummary
    inputs: tuple[InputStats, ...] = ()
    hosts: tuple[HostSummary, ...] = ()
    ranks: tuple[RankInfo, ...] = ()
    communicators: tuple[Communicator, ...] = ()
    connections: tuple[Connection, ...] = ()
    devices: tuple[NetDevice, ...] = ()
    env: tuple[EnvSetting, ...] = ()
    errors: tuple[LogError, ...] = ()
    plugins: tuple[PluginInfo, ...] = ()  # net / coll / tuner / profiler plugins: see PluginInfo
    benign: tuple[LogError, ...] = ()  # lines the failure catalogue knows to be harmless (benign=True)
    inferences: tuple[Inference, ...] = ()  # conclusions across lines: see Inference
    phases: tuple[ProcessPhase, ...] = ()  # per process, the last phase reached (hang-shaped logs only)
    host_versions: tuple[HostVersions, ...] = ()  # per host, the releases its message wordings fit
