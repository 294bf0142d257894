"""Rules on the default ``nvidia-smi`` table and ``nvidia-smi -L`` pasted to ``diagnose FILE...``: nvidia-smi
that could not talk to the driver, and GPUs in MIG mode. (The table's uncorrectable ECC column and ``ERR!``
cells are kept by the parser; no rule reads them yet: no real paste with a non-zero count was found, and
``ERR!`` in the power column is transient, https://github.com/Azure/azhpc-diagnostics/issues/77.)

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kind ``nvidia-smi``
(:mod:`topodoc.parsers.smi_table`), by attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, rule

KIND = "nvidia-smi"
TITLE = "nvidia-smi"

_FAILED = {
    "version_mismatch": (
        "the NVIDIA kernel module that is loaded and the user-space NVML library are different releases "
        "(a driver upgraded, often by unattended upgrades, without a reboot): every CUDA and NCCL program on "
        "this node fails until they match",
        "reboot the node (or unload and reload the nvidia modules once no process uses them), then pin the "
        "driver packages so they are not upgraded under running jobs",
    ),
    "no_driver": (
        "nvidia-smi cannot reach the NVIDIA kernel driver: the module is not loaded (not built for the "
        "running kernel, blocked by nouveau or Secure Boot) or a container was started without the GPUs",
        "check `lsmod | grep nvidia` and `sudo dmesg | grep -i nvrm`; rebuild the module for this kernel "
        "(DKMS) or start the container with the NVIDIA runtime",
    ),
    "no_nvml": (
        "nvidia-smi could not initialise NVML (the line says why)",
        "check `sudo dmesg | grep -i nvrm` and that the driver's libnvidia-ml matches the loaded module",
    ),
    "no_devices": (
        "the driver sees no GPU: in a container, none was given to it; on the host, the GPUs are not bound "
        "to the nvidia driver or fell off the bus",
        "check `lspci -nn | grep -i nvidia`, `sudo dmesg | grep -i -e nvrm -e xid`, and the container's GPU "
        "request",
    ),
}




@rule(
    "nvidia-smi-failed", "error", ("gpu", "driver", "nvidia-smi"),
    title="nvidia-smi could not read the GPUs (driver/library mismatch, no driver, no devices)",
    fix="make the loaded NVIDIA kernel module and its libraries the same release (reboot after a driver "
    "upgrade), and make the GPUs visible to the driver",
)
def nvidia_smi_failed(texts) -> Iterator[Hit]:
    for path, table in texts_of(texts, KIND):
        for failure in table.failures:
            if failure.kind not in _FAILED:
                continue
            meaning, fix = _FAILED[failure.kind]
            extra = (
                f" (NVML library {table.nvml_library_version})"
                if failure.kind == "version_mismatch" and table.nvml_library_version else ""
            )
            yield Hit(
                subject="NVIDIA driver",
                message=f"{failure.text}{extra}: {meaning}",
                evidence=(Evidence(TITLE, f"{path}:{failure.line}", failure.text),),
                fix=fix,
            )


@rule(
    "gpu-mig-enabled", "warning", ("gpu", "mig", "p2p", "nvidia-smi"),
    title="GPUs are in MIG mode: no peer-to-peer between them",
    fix="for multi-GPU training disable MIG (`sudo nvidia-smi -i N -mig 0`, then reset the GPU); keep MIG "
    "for jobs that fit in one instance",
)
def gpu_mig_enabled(texts) -> Iterator[Hit]:
    for path, table in texts_of(texts, KIND):
        mig = [g for g in table.gpus if g.mig_mode == "Enabled"]
        listed = [g for g in table.listed if g.mig_devices]
        if not mig and not listed:
            continue
        where = (
            [Evidence(TITLE, f"{path}:{g.line}", f"GPU{g.index} MIG M. = Enabled") for g in mig]
            or [Evidence(TITLE, f"{path}:{g.line}", f"GPU{g.index}: {len(g.mig_devices)} MIG device(s)")
                for g in listed]
        )
        names = ", ".join(f"GPU{g.index}" for g in (mig or listed))
        yield Hit(
            subject=names,
            message=f"{names} in MIG mode: MIG instances have no GPU-to-GPU peer-to-peer (neither PCIe nor "
            "NVLink; NVIDIA's MIG user guide), so NCCL between them goes through host memory or the network "
            "and runs at a fraction of the GPUs' link speed",
            evidence=tuple(where[:4]),
        )


RULES: tuple[Rule, ...] = (nvidia_smi_failed, gpu_mig_enabled)
