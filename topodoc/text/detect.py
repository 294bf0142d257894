"""Tell what a text input is by its content, never by its name.

Each kind has a detector: a few line patterns and how many lines must match. :func:`detect` runs them in
:data:`KINDS` order (the more specific formats first: XML and JSON documents, nccl-tests output, which
embeds NCCL log lines, before NCCL logs) and returns every kind that matched, the first being what the
input is taken to be. An input that matches nothing is ``unknown`` with the reason, never a guess.

The ``dmesg`` kind (``dmesg``/``journalctl -k``: Xid, AER, DMAR) is recognized here and read by
``topodoc.parsers.kernel_log`` (wired in ``topodoc.text.inputs.PARSERS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import regex

HEAD_CHARS = 256 * 1024  # detection reads only the start of an input


@dataclass(frozen=True)
class Kind:
    name: str
    title: str  # what the report calls it: "lspci -vvv", "ibstat", ...
    test: Callable[[str, list[str]], bool]


@dataclass(frozen=True)
class Detection:
    kind: str  # a Kind name, or "unknown"
    also: tuple[str, ...] = ()  # other kinds whose marks are in the input too
    reason: str = ""  # for "unknown": what was looked for


def _count(pattern: regex.Pattern, lines: list[str], most: int) -> int:
    found = 0
    for line in lines:
        if pattern.search(line):
            found += 1
            if found >= most:
                break
    return found


def _has(pattern: str, most: int = 1, flags: int = 0) -> Callable[[str, list[str]], bool]:
    compiled = regex.compile(pattern, flags)
    return lambda _text, lines: _count(compiled, lines, most) >= most


def _all(*tests: Callable[[str, list[str]], bool]) -> Callable[[str, list[str]], bool]:
    return lambda text, lines: all(t(text, lines) for t in tests)


def _any(*tests: Callable[[str, list[str]], bool]) -> Callable[[str, list[str]], bool]:
    return lambda text, lines: any(t(text, lines) for t in tests)


def _xml_root(tag: str) -> Callable[[str, list[str]], bool]:
    pattern = regex.compile(r"<" + tag + r"[\s>]")
    return lambda text, _lines: pattern.search(text[:8192]) is not None


def _probe_json(text: str, _lines: list[str]) -> bool:
    head = text[:4096].lstrip()
    return head.startswith("{") and '"schema"' in text[:HEAD_CHARS] and '"pci"' in text[:HEAD_CHARS]


def _looks(module: str) -> Callable[[str, list[str]], bool]:
    """A kind whose parser module has its own recognizer ``looks_like(lines)`` (imported when first used)."""

    def test(_text: str, lines: list[str]) -> bool:
        import importlib

        return importlib.import_module(f"topodoc.parsers.{module}").looks_like(lines)

    return test


_PCI_ADDR = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

KINDS: tuple[Kind, ...] = (
    Kind("topodoc-json", "topodoc probe --json", _probe_json),
    Kind("nvidia-smi-q-xml", "nvidia-smi -q -x", _xml_root("nvidia_smi_log")),
    Kind(
        "nccl-topo-xml",
        "NCCL topology XML",
        _any(
            _all(_xml_root("system"), _has(r"<(?:cpu|pci)\s")),
            _all(_has(r"^\s*<pci busid="), _has(r"^\s*<(?:gpu dev=|nic>|net name=|cpu numaid=)")),
        ),
    ),
    Kind("hwloc-xml", "hwloc XML (lstopo --of xml)", _all(_xml_root("topology"), _has(r"<object\s+type="))),
    Kind(
        "nccl-tests",
        "nccl-tests output",
        _any(
            _has(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+"),
            _has(r"^#\s*Avg bus bandwidth\s*:"),
            _all(_has(r"^#\s+size\s+count\s+type"), _has(r"out-of-place|in-place")),
        ),
    ),
    Kind(
        "nvidia-smi-q",
        "nvidia-smi / nvidia-smi -q",
        _any(
            _has(r"^=+\s*NVSMI LOG\s*=+"),
            _has(r"Unable to determine the device handle for GPU ?[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"),
            _all(_has(r"^GPU " + _PCI_ADDR + r"\s*$"), _has(r"^\s+Product Name\s+:")),
            _all(
                _has(r"^\s+Product Name\s+:"), _has(r"^\s+(?:PCIe Generation|Link Width|Persistence Mode)\b")
            ),
        ),
    ),
    Kind(
        "nvlink",
        "nvidia-smi nvlink",
        _all(
            _has(r"^GPU \d+: .*\(UUID: "),
            _has(r"^\s+Link \d+: ", 1),
        ),
    ),
    Kind(
        "smi-topo",
        "nvidia-smi topo -m / -p2p",
        _any(
            _all(_has(r"^\s*GPU0(?:\s|$)"), _has(r"^GPU0\s+X\b")),
            _has(r"^\s*GPU0\s.*\bCPU Affinity\b"),
            _has(r"^\s*X\s+=\s+Self\s*$"),
        ),
    ),
    Kind(
        "ibstat",
        "ibstat / ibstatus",
        _any(
            _all(_has(r"^CA '[^']+'"), _has(r"^\s+(?:State|Physical state|Rate|Link layer):")),
            _all(
                _has(r"^Infiniband device '[^']+' port \d+ status:"), _has(r"^\s+(?:state|rate|link_layer):")
            ),
            _all(
                _has(r"^\s+Port \d+:\s*$"),
                _has(r"^\s+State:\s+(?:Active|Down|Initializing|Armed)\b"),
                _has(r"^\s+Physical state:"),
            ),
        ),
    ),
    Kind(
        "ibv-devinfo",
        "ibv_devinfo",
        _any(
            _all(_has(r"^hca_id:\s*\S+"), _has(r"^\s+(?:port:|transport:|fw_ver:)")),
            # a port section quoted without its hca_id: line (ibv_devinfo -v's port attributes, GID table)
            _all(
                _has(r"^\s+port:\s+\d+\s*$"),
                _has(r"^\s+(?:state:\s+PORT_[A-Z]+|link_layer:\s+(?:InfiniBand|Ethernet)\s*$)"),
            ),
        ),
    ),
    Kind(
        "ibdev2netdev",
        "ibdev2netdev",
        _has(r"^(?:\S+|" + _PCI_ADDR + r"\s+\S+\s+\([^()\n]{0,80}\)[^\n]{0,200}?\sfw\s+\S+)\s+port\s+\d+\s+"
             r"(?:\([A-Za-z_]{1,20}\s*\)\s+)?==>\s+\S+\s+\((?:Up|Down)\)"),
    ),
    Kind(
        "show-gids",
        "show_gids",
        _any(
            _has(r"^\s*DEV\s+PORT\s+INDEX\s+GID\b"),
            _has(r"^\S+\s+\d+\s+\d+\s+[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}\s+\S*\s*v[12]\b", 2),
        ),
    ),
    Kind(
        "lspci",
        "lspci",
        _any(
            _has(r"^" + _PCI_ADDR + r" [^:]{2,60}: \S"),
            _has(r"^[-+\\| ]*\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-"),
            _has(r"^-\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-"),
            _has(r"^\s*(?:ACSCtl|ACSCap|LnkSta|LnkCap):\s", 1),
        ),
    ),
    Kind("nccl-log", "NCCL log", _has(r"NCCL (?:INFO|WARN|version)\b")),
    Kind(
        "dmesg",
        "dmesg / journalctl -k",
        _any(
            _has(r"^\[\s*\d+\.\d+\]\s"),
            _has(r"\bkernel: "),
            _has(r"NVRM: Xid\b|\bDMAR: |\bAMD-Vi: |\bAER: "),
        ),
    ),
    # kinds read into the rules' ``texts`` fact (textinputs.TEXT_KINDS); last, so that they never take a
    # file from a kind above and are read as a second kind of a file that holds one
    Kind("cuda-p2p", "CUDA samples (p2pBandwidthLatencyTest, simpleP2P)", _looks("cuda_samples")),
    Kind("nvidia-smi", "nvidia-smi (table) / nvidia-smi -L", _looks("smi_table")),
    Kind("nccl-traceback", "Python traceback with an NCCL error", _looks("pytrace")),
    Kind("fabric-manager", "Fabric Manager (log, journalctl, systemctl status)", _looks("fabricmanager")),
    Kind("setpci", "setpci (ACS Control reads/writes)", _looks("setpci")),
    Kind("ulimit", "ulimit -a", _looks("ulimit")),
    Kind("lsmod", "lsmod", _looks("lsmod")),
    Kind("shm", "df -h /dev/shm / mount | grep shm / /proc/mounts", _looks("shm")),
    Kind("rdma-link", "rdma link", _looks("rdma_link")),
    Kind("ibv-devices", "ibv_devices", _looks("ibv_devices")),
    Kind("kernel-cmdline", "kernel command line (/proc/cmdline, GRUB_CMDLINE_LINUX)", _looks("cmdline")),
    Kind("nccl1-tests", "NCCL 1.x test output (not supported)", _looks("nccl1_tests")),
    Kind("nccl-env", "NCCL / libfabric / UCX settings (env, export, launcher flags)", _looks("envlist")),
)

BY_NAME = {kind.name: kind for kind in KINDS}
# kinds this change parses (the rest are recognized and reported; see the module doc)
PARSED_KINDS = tuple(k.name for k in KINDS)


def detect(text: str) -> Detection:
    """Every kind whose marks are in ``text``, the most specific first; ``unknown`` when none."""
    head = text[:HEAD_CHARS]
    lines = head.split("\n")
    found = [kind.name for kind in KINDS if kind.test(head, lines)]
    if not found:
        return Detection("unknown", reason=_unknown_reason(head))
    return Detection(found[0], tuple(found[1:]))


def _unknown_reason(head: str) -> str:
    if not head.strip():
        return "the input is empty"
    return (
        "no known marks (nvidia-smi topo -m/-q/nvlink, nvidia-smi table or -L, NCCL log, nccl-tests, a "
        "traceback with an NCCL error, lspci, setpci, ibstat, ibv_devinfo, ibdev2netdev, show_gids, rdma "
        "link, dmesg, Fabric Manager, p2pBandwidthLatencyTest/simpleP2P, NCCL_* settings, ulimit, lsmod, "
        "df or mount lines for /dev/shm, kernel command line, hwloc or NCCL XML, topodoc probe --json)"
    )


def title(kind: str) -> str:
    return BY_NAME[kind].title if kind in BY_NAME else "unrecognized input"
