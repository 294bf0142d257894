"""The snapshot the agent serves on ``/snapshot``, redacted by the rules of ``topodoc record --redact``.

The snapshot's identifying sources are put where the recorder's redactor
(:func:`topodoc.probe.redact.redact_members`) looks for them — the host name in
``/proc/sys/kernel/hostname``, the kernel command line in ``/proc/cmdline``, GPU serials and UUIDs as the
NVML tape's answers, the source name in ``meta.json`` — next to the snapshot's JSON text, and the
redactor runs over all of them: the same structure rules (cmdline keys, host names with their domains) and
patterns (IPs, MACs, GUIDs, GIDs, UUIDs), the same shape-keeping replacements, so the redacted snapshot
still decodes, and ``topodoc fleet`` fingerprints it as the original (identity is never in a fingerprint).
A GPU UUID, serial, boot id or host name that no rule changed is replaced by ``redacted`` last.
"""

from __future__ import annotations

import json

BODY = "agent/snapshot.json"
HOSTNAME = "fs/proc/sys/kernel/hostname"
CMDLINE = "fs/proc/cmdline"


def redact_snapshot(data: dict) -> dict:
    """``data`` (a ``codec.to_data`` Snapshot) with hostnames, serials, UUIDs, addresses and cmdline
    secrets replaced; ``data`` itself is not changed."""
    from topodoc.probe.archive import Members
    from topodoc.probe.redact import redact_members

    body = json.loads(json.dumps(data))
    host, kernel = body.get("host") or {}, body.get("kernel") or {}
    cmdline = kernel.get("cmdline")
    if cmdline is not None:
        kernel["cmdline"] = ""  # redacted as /proc/cmdline, by structure, then put back
    gpus = [g for g in body.get("gpus") or () if isinstance(g, dict)]
    calls = [{"fn": fn, "args": [n], "rc": 0, "value": g[key]} for n, g in enumerate(gpus)
             for fn, key in (("nvmlDeviceGetSerial", "serial"), ("nvmlDeviceGetUUID", "uuid")) if g.get(key)]
    source = body.get("source")
    members = Members(files={
        HOSTNAME: str(host.get("hostname") or "").encode(),
        CMDLINE: str(cmdline or "").encode(),
        "nvml.json": json.dumps({"calls": calls}).encode(),
        "meta.json": json.dumps({"name": source if isinstance(source, str) else ""}).encode(),
        BODY: json.dumps(body).encode(),
    })
    redact_members(members)
    out = json.loads(members.files[BODY])
    if cmdline is not None:
        out["kernel"]["cmdline"] = members.files[CMDLINE].decode("utf-8", errors="replace")
    if isinstance(source, str):
        out["source"] = json.loads(members.files["meta.json"]).get("name", source)
    _last_resort(data, out)
    return out


def _last_resort(original: dict, out: dict) -> None:
    """Identity fields the model names, left as they were by every rule above: replaced whole."""
    pairs = [(original.get("host") or {}, out.get("host") or {}, ("hostname", "boot_id"))]
    gpus = zip(original.get("gpus") or (), out.get("gpus") or (), strict=True)  # redaction keeps the list
    pairs += [(a, b, ("uuid", "serial")) for a, b in gpus if isinstance(a, dict) and isinstance(b, dict)]
    for before, after, keys in pairs:
        for key in keys:
            value = before.get(key)
            if isinstance(value, str) and value.strip() and after.get(key) == value and not _generic(value):
                after[key] = "redacted"


def _generic(value: str) -> bool:
    from topodoc.probe.redact import GENERIC_HOSTNAMES

    return value.lower() in GENERIC_HOSTNAMES
