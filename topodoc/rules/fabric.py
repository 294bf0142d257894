"""Rules on NVIDIA Fabric Manager's log, journal and service status given to ``diagnose FILE...``: the
driver/Fabric Manager version mismatch, and the other ways the service fails (no NVSwitch in the machine,
an invalid configuration, NVLink/NVSwitch training errors, a failure whose reason is not in the paste).

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kind ``fabric-manager``
(:mod:`topodoc.parsers.fabricmanager`), by attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule

KIND = "fabric-manager"
TITLE = "Fabric Manager"




def _at(path: str, event) -> Evidence:
    return Evidence(TITLE, f"{path}:{event.line}", event.text)


@rule(
    "fabric-manager-version-mismatch", "error", ("nvswitch", "fabric-manager", "driver"),
    title="Fabric Manager and the NVIDIA driver are different versions",
    fix="install the Fabric Manager package of exactly the driver's version and hold both (apt-mark hold / "
    "dnf versionlock), then restart nvidia-fabricmanager",
)
def fabric_manager_version_mismatch(texts) -> Iterator[Hit]:
    for path, fm in texts_of(texts, KIND):
        events = [e for e in fm.events if e.kind == "version_mismatch"]
        if not events:
            continue
        yield Hit(
            subject="nvidia-fabricmanager",
            message=f"Fabric Manager {fm.fm_version} refuses to run with driver {fm.driver_version}: the two "
            "must be the same release exactly. Without Fabric Manager the NVSwitches are not configured, "
            "so on an NVSwitch system CUDA fails with error 802 'system not yet initialized' and NCCL with "
            "ncclUnhandledCudaError",
            evidence=tuple(_at(path, e) for e in events[:2]),
            fix=f"install nvidia-fabricmanager {fm.driver_version} (the driver's version; or the driver of "
            f"Fabric Manager's, {fm.fm_version}), hold both packages, restart the service",
        )


_FAILED = {
    "config_invalid": "its configuration file has an invalid value",
    "training_failed": "NVLink/NVSwitch training or the NVLink subnet manager reported a failure",
    "not_initialized": "CUDA reports 'system not yet initialized' (error 802): the fabric is not ready",
    "error": "it logged an error",
}


@rule(
    "fabric-manager-failed", "error", ("nvswitch", "fabric-manager"),
    title="Fabric Manager failed (configuration, NVLink training, no NVSwitch, or a reason not pasted)",
    fix="read `journalctl -u nvidia-fabricmanager -b` and /var/log/fabricmanager.log for the first error; "
    "on machines without NVSwitch, disable the service",
)
def fabric_manager_failed(texts) -> Iterator[Hit]:
    for path, fm in texts_of(texts, KIND):
        kinds = {e.kind for e in fm.events}
        if "version_mismatch" in kinds:
            continue  # fabric-manager-version-mismatch says why it failed
        if "no_nvswitch" in kinds:
            event = next(e for e in fm.events if e.kind == "no_nvswitch")
            yield Hit(
                subject="nvidia-fabricmanager",
                message="Fabric Manager found no NVSwitch to manage (NV_WARN_NOTHING_TO_DO): this machine's "
                "GPUs are PCIe-only or joined by NVLink bridges, which need no Fabric Manager. Its failure "
                "to start is expected and is not the cause of a P2P or NCCL problem",
                evidence=(_at(path, event),),
                fix="sudo systemctl disable --now nvidia-fabricmanager (it is only for NVSwitch systems)",
                severity=Severity.INFO,
            )
            continue
        reasons = [e for e in fm.events if e.kind in _FAILED]
        if reasons:
            first = reasons[0]
            yield Hit(
                subject="nvidia-fabricmanager",
                message=f"Fabric Manager: {_FAILED[first.kind]} ({path}:{first.line}); until it runs, the "
                "GPUs behind the NVSwitches cannot use NVLink (CUDA error 802, NCCL ncclUnhandledCudaError)",
                evidence=tuple(_at(path, e) for e in reasons[:2]),
            )
            continue
        starts = [e for e in fm.events if e.kind == "start_failed"]
        if starts:
            yield Hit(
                subject="nvidia-fabricmanager",
                message="the Fabric Manager service failed to start and the pasted text does not say why",
                evidence=tuple(_at(path, e) for e in starts[:2]),
                fix="paste `journalctl -u nvidia-fabricmanager -b --no-pager` and the end of "
                "/var/log/fabricmanager.log; compare `nv-fabricmanager --version` with `modinfo -F version "
                "nvidia`",
                confidence=0.5,
            )


RULES: tuple[Rule, ...] = (fabric_manager_version_mismatch, fabric_manager_failed)
