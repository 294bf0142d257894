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
"""

from __future__ import annotations

from dataclasses import dataclass

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
ACTIONS = ("restart_app", "reset_gpu", "drain_node", "rma")


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    meaning: str
    action: str  # one of ACTIONS
    nvlink: bool = False  # the error is on an NVLink: the GPU's NVLink peers are affected
    fatal_to_gpu: bool = False  # every application on the GPU is affected, not only the faulting one


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


def lookup(code: int) -> XidInfo | None:
    return XIDS.get(code)
