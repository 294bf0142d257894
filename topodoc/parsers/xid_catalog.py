"""NVIDIA Xid codes: what each means and the usual action, summarised from NVIDIA's published catalogue.

Source: NVIDIA, "Xid Errors" (https://docs.nvidia.com/deploy/xid-errors/index.html) and its analysis
catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), whose resolution
column names the recovery (RESTART_APP, RESET_GPU, RESTART_BM / drain the node, CONTACT_SUPPORT). The
text here is our one-line summary of NVIDIA's wording, not a copy of it; ``action`` is the first step
NVIDIA's resolution asks for, on this scale (least to most disruptive):

- ``restart_app``: the fault is usually the application's; restart it (repeated on one GPU across
  applications: run diagnostics);
- ``reset_gpu``: the GPU needs a reset (``nvidia-smi -r`` or a reboot) before new work;
- ``drain_node``: take the node out of scheduling and reboot it;
- ``rma``: hardware replacement is likely (after diagnostics confirm it).

A code missing here is reported as unknown with a pointer to the catalogue, never guessed.

The **Xid policy** is the severity and action per Xid that ``diagnose`` and the agent use: by default
the action above and the severity it implies (:data:`ACTION_SEVERITY`: ``rma`` and ``drain_node`` are
critical, a lost GPU among them), with the sources above. An operator overrides it with a TOML file
named by ``TOPODOC_XID_POLICY`` (read once per process)::

    # one table per Xid: severity (info/warning/error/critical), action (one of ACTIONS), optional note
    [xid.13]
    severity = "error"          # we treat Graphics Engine Exceptions as node problems
    action = "reset_gpu"
    note = "site policy 2026-03"

A file that cannot be read or holds anything else is refused in one line (:class:`XidPolicyError`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
ACTIONS = ("restart_app", "reset_gpu", "drain_node", "rma")
SEVERITIES = ("info", "warning", "error", "critical")
ACTION_SEVERITY = {"rma": "critical", "drain_node": "critical", "reset_gpu": "error",
                   "restart_app": "warning"}
POLICY_ENV = "TOPODOC_XID_POLICY"
MAX_POLICY_BYTES = 1 << 20


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    meaning: str
    action: str  # one of ACTIONS
    nvlink: bool = False  # the error is on an NVLink: the GPU's NVLink peers are affected
    fatal_to_gpu: bool = False  # every application on the GPU is affected, not only the faulting one
    severity: str = ""  # the policy's severity; "" = ACTION_SEVERITY[action]
    source: str = CATALOG_URL  # where the action comes from (an operator's policy file names itself)

    @property
    def policy_severity(self) -> str:
        return self.severity or ACTION_SEVERITY[self.action]


_XIDS = (
    XidInfo(13, "Graphics Engine Exception",
            "an SM raised an exception (illegal instruction, out-of-range access): usually an application "
            "bug; the same error on one GPU across applications points at the hardware", "restart_app"),
    XidInfo(31, "GPU memory page fault",
            "an MMU fault: a kernel touched an address it had not mapped; usually an application bug",
            "restart_app"),
    XidInfo(43, "GPU stopped processing",
            "the driver stopped a channel after a fault in a user application; the GPU itself stays usable",
            "restart_app"),
    XidInfo(45, "Preemptive cleanup, due to previous errors",
            "the driver ended the application's channels (application killed, or a previous Xid such as 48, "
            "74, 79 or 94/95); look at the Xid before it", "restart_app"),
    XidInfo(48, "Double Bit ECC Error (DBE)",
            "an uncorrectable ECC error in GPU memory; applications on the GPU may have read bad data",
            "reset_gpu", fatal_to_gpu=True),
    XidInfo(61, "Internal micro-controller breakpoint/warning",
            "the GPU's internal micro-controller hit a breakpoint or warning (a driver or firmware issue)",
            "reset_gpu", fatal_to_gpu=True),
    XidInfo(62, "Internal micro-controller halt",
            "the GPU's internal micro-controller halted; the GPU stops processing", "reset_gpu",
            fatal_to_gpu=True),
    XidInfo(63, "ECC page retirement or row remapping recording event",
            "the driver recorded a page retirement / row remap after ECC errors; it takes effect at the next "
            "GPU reset", "reset_gpu"),
    XidInfo(64, "ECC page retirement or row remapper recording failure",
            "recording a page retirement / row remap failed; the GPU's memory self-repair may be exhausted",
            "rma", fatal_to_gpu=True),
    XidInfo(74, "NVLink Error",
            "an NVLink reported an error (CRC/replay/recovery or a link down); traffic over the GPU's "
            "NVLinks is affected", "reset_gpu", nvlink=True, fatal_to_gpu=True),
    XidInfo(79, "GPU has fallen off the bus",
            "the GPU no longer answers on PCIe (power, thermal, PCIe link or board fault)", "drain_node",
            fatal_to_gpu=True),
    XidInfo(92, "High single-bit ECC error rate",
            "correctable ECC errors arrive at a high rate; memory may be degrading", "reset_gpu"),
    XidInfo(94, "Contained ECC error",
            "an uncorrectable ECC error was contained to the application that used the memory; other "
            "applications continue; the row is remapped at the next GPU reset", "restart_app"),
    XidInfo(95, "Uncontained ECC error",
            "an uncorrectable ECC error could not be contained; every application on the GPU is affected",
            "reset_gpu", fatal_to_gpu=True),
    XidInfo(109, "Context Switch Timeout Error",
            "a context switch timed out; usually an application hang or fault", "restart_app"),
    XidInfo(119, "GSP RPC Timeout",
            "the driver timed out waiting for the GPU System Processor (GSP) firmware", "reset_gpu",
            fatal_to_gpu=True),
    XidInfo(120, "GSP Error",
            "the GPU System Processor (GSP) firmware reported an error", "reset_gpu", fatal_to_gpu=True),
    XidInfo(140, "Unrecovered ECC Error",
            "an ECC error the driver could not recover from", "reset_gpu", fatal_to_gpu=True),
    XidInfo(144, "NVLink: SAW error", "an NVLink SAW unit error (Blackwell); severity in the line",
            "reset_gpu", nvlink=True),
    XidInfo(145, "NVLink: RLW error", "an NVLink RLW unit error (Blackwell); severity in the line",
            "reset_gpu", nvlink=True),
    XidInfo(149, "NVLink: NETIR error",
            "an NVLink network (NETIR) error (Blackwell / NVL72); severity and sub-code in the line",
            "reset_gpu", nvlink=True, fatal_to_gpu=True),
    XidInfo(154, "GPU recovery action changed",
            "the driver reports the recovery the GPU now needs (e.g. Drain and Reset, Node Reboot); "
            "follow the action the line names", "drain_node", fatal_to_gpu=True),
)

XIDS: dict[int, XidInfo] = {x.code: x for x in _XIDS}


class XidPolicyError(ValueError):
    """The operator's Xid policy file cannot be used; the message is one line naming the file."""


_policy: dict[int, XidInfo] | None = None


def lookup(code: int) -> XidInfo | None:
    """The Xid's entry under the active policy (the built-in table with the operator's file over it)."""
    return policy().get(code)


def policy() -> dict[int, XidInfo]:
    global _policy
    if _policy is None:
        path = os.environ.get(POLICY_ENV, "").strip()
        _policy = load_policy(path) if path else dict(XIDS)
    return _policy


def reset_policy() -> None:
    """Forget the loaded policy (tests; an agent reloading its configuration)."""
    global _policy
    _policy = None


def load_policy(path: str) -> dict[int, XidInfo]:
    """The built-in table overridden by the TOML file at ``path``; XidPolicyError on any problem."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as err:
        raise XidPolicyError(f"{POLICY_ENV}={path}: cannot read it ({err.strerror or err})") from err
    if len(raw) > MAX_POLICY_BYTES:
        raise XidPolicyError(f"{POLICY_ENV}={path}: larger than {MAX_POLICY_BYTES} bytes")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise XidPolicyError(f"{POLICY_ENV}={path}: not valid TOML ({err})") from err
    table = doc.get("xid", {})
    if set(doc) - {"xid"} or not isinstance(table, dict):
        raise XidPolicyError(f"{POLICY_ENV}={path}: only [xid.N] tables are allowed")
    out = dict(XIDS)
    for key, entry in table.items():
        out[_code(path, key)] = _entry(path, key, entry, out.get(_code(path, key)))
    return out


def _code(path: str, key: str) -> int:
    if not key.isascii() or not key.isdigit() or len(key) > 4:
        raise XidPolicyError(f"{POLICY_ENV}={path}: [xid.{key[:20]}] is not an Xid number")
    return int(key)


def _entry(path: str, key: str, entry, known: XidInfo | None) -> XidInfo:
    where = f"{POLICY_ENV}={path}: [xid.{key}]"
    if not isinstance(entry, dict) or set(entry) - {"severity", "action", "note"}:
        raise XidPolicyError(f"{where} may hold only severity, action and note")
    severity, action, note = entry.get("severity", ""), entry.get("action"), entry.get("note", "")
    if severity and severity not in SEVERITIES:
        raise XidPolicyError(f"{where}: severity must be one of {', '.join(SEVERITIES)}")
    if action is not None and action not in ACTIONS:
        raise XidPolicyError(f"{where}: action must be one of {', '.join(ACTIONS)}")
    if not isinstance(note, str) or len(note) > 200:
        raise XidPolicyError(f"{where}: note must be text of at most 200 characters")
    source = f"{path}" + (f" ({note})" if note else "")
    if known is None:
        if action is None:
            raise XidPolicyError(f"{where}: an Xid topodoc does not know needs an action")
        return XidInfo(int(key), f"Xid {key}", note or "described by the site's Xid policy", action,
                       severity=severity, source=source)
    return replace(known, action=action or known.action, severity=severity or known.severity, source=source)
