"""Rules on pasted ACS state: ``lspci -vvv`` ``ACSCtl`` lines (whole blocks or ``grep ACSCtl`` output) and
``setpci`` reads and writes of the ACS Control register, given to ``diagnose FILE...``, read per bridge even
when no GPU placement is known (``acs-on-p2p-path`` judges the path when it is).

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kinds ``lspci``
(:mod:`topodoc.parsers.lspci`: ``devices[addr].acs_ctrl``, ``info[addr].line``, ``acs_lines``) and ``setpci``
(:mod:`topodoc.parsers.setpci`), by attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.engine import Evidence, Hit, Rule, Severity, rule

BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
REDIRECT = (1 << 2) | (1 << 3)  # ReqRedir, CmpltRedir


def decode(value: int) -> str:
    return " ".join(f"{n}{'+' if value >> i & 1 else '-'}" for i, n in enumerate(BITS))


def _redirecting(texts) -> list[tuple[str, int, str | None, int, str]]:
    """(path, line, bridge or None, ACS Control value, kind) for every ACS Control with a redirect bit."""
    out = []
    for path, kind, parsed in texts:
        if kind == "lspci":
            for address, dev in parsed.devices.items():
                if dev.acs_ctrl is not None and dev.acs_ctrl & REDIRECT:
                    info = parsed.info.get(address)
                    out.append((path, info.line if info else 0, address, dev.acs_ctrl, kind))
            out += [(path, line, None, bits, kind) for line, bits in parsed.acs_lines if bits & REDIRECT]
        elif kind == "setpci":
            out += [(path, a.value_line or a.line, a.bdf, a.value, kind) for a in parsed.accesses
                    if a.acs_ctl and a.op == "read" and a.value is not None and a.value & REDIRECT]
    return out


@rule(
    "acs-redirect-enabled", "warning", ("pcie", "acs", "p2p"),
    title="ACS redirect is on for PCIe bridges: peer-to-peer traffic is sent to the root complex",
    fix="disable ACS in the BIOS, or boot with pci=noacs, or clear it at every boot with "
    "`setpci -s BDF ECAP_ACS+6.w=0000` on those bridges (bare metal only: a hypervisor needs ACS for "
    "device isolation)",
)
def acs_redirect_enabled(texts, snapshot=None) -> Iterator[Hit]:
    found = _redirecting(texts)
    if snapshot is not None and snapshot.gpus and all(g.pci_address in snapshot.pci for g in snapshot.gpus):
        # the GPUs are placed on this tree: acs-on-p2p-path judges its bridges against the real paths
        found = [f for f in found if not f[2] or f[2] not in snapshot.pci]
    if not found:
        return
    named = sorted({f[2] for f in found if f[2]})
    unnamed = [f for f in found if not f[2]]
    _path, _line, bridge, value, _kind = found[0]
    where = (f"on {len(named)} bridge(s): {', '.join(named[:6])}{' ...' if len(named) > 6 else ''}"
             if named else "")
    anon = (f"{' and ' if named else ''}on {len(unnamed)} ACSCtl line(s) whose bridge the paste does not "
            "name (grep kept only the ACSCtl lines: `sudo lspci -vvv | grep -e '^[0-9a-f]' -e ACSCtl` "
            "names them)" if unnamed else "")
    yield Hit(
        subject=bridge or "PCIe bridges",
        message=f"ACS request/completion redirect is set {where}{anon} ({decode(value)}): peer-to-peer "
        "requests between devices below such a bridge go up to the root complex (and through the IOMMU) "
        "instead of across the switch, so GPU-GPU P2P is slow, hangs or reads wrong data, and GPUDirect "
        "RDMA fails with local protection errors (IB completion status 4). Whether it matters depends on "
        "the bridge being between two GPUs or a GPU and its NIC (`nvidia-smi topo -m`, `lspci -tv`)",
        evidence=tuple(
            Evidence(k, f"{p}:{n}", f"{b or 'ACSCtl'}: {decode(v)}") for p, n, b, v, k in found[:3]
        ),
    )


@rule(
    "acs-cleared-at-runtime", "info", ("pcie", "acs"),
    title="ACS is cleared with setpci at runtime: the setting is lost at every reboot",
    fix="make it permanent: disable ACS in the BIOS or add pci=noacs to the kernel command line (or run the "
    "setpci commands from a boot-time unit)",
)
def acs_cleared_at_runtime(texts) -> Iterator[Hit]:
    for path, kind, parsed in texts:
        if kind != "setpci":
            continue
        writes = [a for a in parsed.accesses if a.op == "write" and a.acs_ctl and a.value == 0]
        if not writes:
            continue
        bridges = [a.bdf for a in writes if a.bdf] or list(parsed.loop_bdfs)
        which = f"{len(bridges)} bridge(s) ({', '.join(bridges[:6])})" if bridges else "the bridges the " \
            "command's variable names"
        yield Hit(
            subject="ACS Control",
            message=f"setpci writes 0000 to ACS Control on {which}: correct for P2P on bare metal, but the "
            "register is reset at every boot (and by a PCIe hot reset), so a node that rebooted is back to "
            "redirecting peer traffic until this runs again",
            evidence=tuple(Evidence("setpci", f"{path}:{a.line}", f"{a.register}=0000") for a in writes[:2]),
            severity=Severity.INFO,
        )


RULES: tuple[Rule, ...] = (acs_redirect_enabled, acs_cleared_at_runtime)
