"""Redaction of a recording before it is written: consistent, format-preserving replacements.

By structure first (what a field is, not how it looks): the NVML tape's cluster UUID (also as the 16
integers live pynvml returns), board ids and every UUID/serial field; ``/proc/cmdline`` values under keys
that name a secret, URL, host or site (``token=``, ``ipa-api-url=``, ``BOOTIF=``, ``hostname=``, ...),
any value holding a URL or user@host, and the host name field of ``ip=``; the recording's name in
``meta.json`` (an output file ``node7-20261201.tar.gz`` names the host). Host names the kernel command
line gives (``ip=``, ``hostname=``) join the machine's host names below.

Then replaced everywhere in every text member (sysfs/procfs files, the NVML tape, command outputs, meta):
the hostname (read from ``/proc/sys/kernel/hostname`` and ``/etc/hostname``; the full name and its
first label, in any case, each as a whole word together with any domain written after it, so a short
name never leaves ``.cluster.example.com`` behind; ``localhost`` and the like identify nobody and stay), GPU
serials (the tape's ``nvmlDeviceGetSerial`` answers), and by pattern IPv4 addresses (except 0.0.0.0
and 127.x), IPv6 addresses in any spelling (``fe80::1``, ``2001:db8::8a2e:370:7334``, unpadded
groups; ``::1`` and ``::`` stay), MAC addresses (6-byte Ethernet with colons or dashes, 20-byte IPoIB),
UUIDs (dashed, ``GPU-``/``MIG-`` prefixes kept, or 32 hex digits), 128-bit GIDs and 64-bit GUIDs (also
``0x`` and 16 hex digits), and in command outputs ``lspci -vvv``'s Device Serial Number and
``nvidia-smi -q -x``'s ``<serial>`` / part-number fields. Binary PCI ``config`` files keep
everything but the Device Serial Number, which is zeroed. The same original always maps to the same
replacement, and a replacement has the original's shape (a MAC stays a MAC; a GID and the same
address written compressed map to one address; an IPv4-mapped RoCE GID maps to the redacted IPv4),
so the redacted recording still parses into a consistent snapshot.

Host names of 5 characters or more are tokens: the whole DNS-like word holding one (``-`` and ``.`` are
boundaries: ``gpu-node-17-bmc.corp.example.com``, a ``BUILD_ID``) is replaced. On ``/proc/cmdline``
every value but those of :data:`CMDLINE_HARMLESS` kernel parameters is replaced (``pw=``, ``netroot=``,
``rack=``, ``site=``...). User names (``/home/NAME``, ``USER=``, ``NAME@host``, passwd-like members,
``home=``, the recording user) are replaced everywhere, so one in a command's stderr goes too, and every
``name@host`` (the driver's and kernel's build strings) becomes ``redacted-user@redacted-host``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from itertools import count

from topodoc import jsontext
from topodoc.probe import pcicfg
from topodoc.probe.archive import Members

HEX = "[0-9A-Fa-f]"
EDGE_L, EDGE_R = r"(?<![0-9A-Fa-f:.])", r"(?![0-9A-Fa-f:-])"
OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
GROUPS = rf"(?:{HEX}{{1,4}}(?::{HEX}{{1,4}})*)"
PATTERN = re.compile(
    EDGE_L
    + "(?:"
    + rf"(?P<gid>{HEX}{{4}}(?::{HEX}{{4}}){{7}})"
    + rf"|(?P<mac20>{HEX}{{2}}(?::{HEX}{{2}}){{19}})"
    + rf"|(?P<uuid>{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}})"
    + rf"|(?P<uuid32>{HEX}{{32}})"
    + rf"|(?P<guid>{HEX}{{4}}(?::{HEX}{{4}}){{3}})"
    + rf"|(?P<guid0x>0x{HEX}{{16}})"
    + rf"|(?P<mac>{HEX}{{2}}(?::{HEX}{{2}}){{5}})"
    + rf"|(?P<macdash>{HEX}{{2}}(?:-{HEX}{{2}}){{5}})"
    + ")"
    + EDGE_R
    + rf"|(?<![\w:.])(?P<ipv6>{GROUPS}?::{GROUPS}?|{HEX}{{1,4}}(?::{HEX}{{1,4}}){{7}})(?![\w:.-])"
    + rf"|(?<![\d.])(?P<ipv4>{OCTET}(?:\.{OCTET}){{3}})(?![\d.])"
)
# lspci -vvv's "Device Serial Number 00-11-22-ff-ff-33-44-55" and nvidia-smi -q -x's board serial fields
# (the text may be a JSON member: a value stops at a quote or backslash as well as at '<' or a line end)
SERIAL_TEXT = re.compile(r"(?P<lead>Device Serial Number )(?P<value>[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){7})"
                         r"|(?P<tag><(?:serial|board_part_number|fru_part_number)>)(?P<tagged>[^<\\\"\n]{1,64})")
KEEP_IPV4 = re.compile(r"^(?:0\.0\.0\.0|127\.\d+\.\d+\.\d+)$")
HOSTNAME_FILES = ("fs/proc/sys/kernel/hostname", "fs/etc/hostname")
GENERIC_HOSTNAMES = {"localhost", "localhost.localdomain", "localdomain", "(none)", "ubuntu", "debian"}


GENERIC_USERS = {"root", "nobody", "daemon", "bin", "sys", "admin", "user", "ubuntu", "debian", "centos",
                 "ec2-user", "cloud-user", "nvidia", "slurm", "syslog", "systemd", "messagebus", "home"}
# a builder's or a user's ``name@host`` (the driver's and kernel's build strings, ``(dvs-builder@U16-I3)``)
USER_AT_HOST = re.compile(r"(?<![\w.@+-])[A-Za-z_][\w.-]{0,31}@[A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]")
HOME_PATH = re.compile(r"(?<![\w.-])/(?:home|Users|var/home)/([A-Za-z_][\w.-]{0,31})")
USER_VARS = re.compile(r"(?<![\w.])(?:USER|LOGNAME|SUDO_USER|USERNAME)=([A-Za-z_][\w.-]{0,31})")


class Redactor:
    def __init__(self, hostnames: set[str], serials: set[str], users: set[str] = frozenset()) -> None:
        self.mapping: dict[str, str] = {}
        kinds = ("gid", "mac20", "uuid", "uuid32", "guid", "guid0x", "mac", "macdash", "ipv4", "serial")
        kinds += ("board",)
        self.counters = {kind: count(1) for kind in kinds}
        self.hostnames = {h for h in hostnames if h and h.lower() not in GENERIC_HOSTNAMES}
        self.users = {u for u in users if len(u) >= 3 and u.lower() not in GENERIC_USERS}
        self.literals = sorted(
            [(_hostname_pattern(h), "redacted-host") for h in self.hostnames]
            + [(re.compile(rf"(?<![A-Za-z0-9]){re.escape(u)}(?![A-Za-z0-9])"), "redacted-user")
               for u in self.users]
            + [(re.compile(rf"(?<!\w){re.escape(s)}(?!\w)"), self._serial(s)) for s in serials if s],
            key=lambda item: -len(item[0].pattern),
        )

    def _serial(self, serial: str) -> str:
        number = next(self.counters["serial"])
        return f"{number:0{max(len(serial), 4)}d}" if serial.isdigit() else f"SERIAL{number:06d}"

    def text(self, text: str) -> str:
        text = HOME_PATH.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "redacted-user", text)
        for pattern, replacement in self.literals:
            text = pattern.sub(replacement, text)
        text = SERIAL_TEXT.sub(self._serial_text, text)
        text = USER_AT_HOST.sub("redacted-user@redacted-host", text)
        return PATTERN.sub(self._replace, text)

    def _serial_text(self, match: re.Match) -> str:
        lead, value = (match["lead"], match["value"]) if match["lead"] else (match["tag"], match["tagged"])
        if value.strip() in ("", "N/A") or value.startswith("SERIAL") or value.strip("0-") == "":
            return match.group(0)
        key = f"serialtext:{value}"
        if key not in self.mapping:
            self.mapping[key] = f"SERIAL{next(self.counters['serial']):06d}"
        return lead + self.mapping[key]

    def _replace(self, match: re.Match) -> str:
        kind = match.lastgroup
        original = match.group(0)
        if kind == "ipv4" and KEEP_IPV4.match(original) or not original.strip("0:-."):
            return original  # loopback, any-address and all-zero identifiers identify nobody
        if kind in ("gid", "ipv6"):
            return self._ipv6(original, exploded=kind == "gid")
        key = f"{kind}:{original.lower()}"
        if key not in self.mapping:
            self.mapping[key] = self._fresh(kind, original)
        return self.mapping[key]

    def _fresh(self, kind: str, original: str) -> str:
        n = next(self.counters[kind])
        if kind == "ipv4":
            return f"192.0.2.{n}" if n < 255 else f"198.18.{n // 256}.{n % 256}"
        if kind in ("mac", "mac20", "macdash"):
            octets = 20 if kind == "mac20" else 6
            return ("-" if kind == "macdash" else ":").join(
                f"{b:02x}" for b in (b"\x02" + n.to_bytes(octets - 1, "big"))
            )
        if kind == "uuid":
            return f"00000000-0000-4000-8000-{n:012x}"
        if kind == "uuid32":
            return f"000000000000400080000{n:011x}"
        if kind == "guid0x":
            return f"0x00000000{n:08x}"
        return f"0000:0000:{n >> 16 & 0xFFFF:04x}:{n & 0xFFFF:04x}"

    def uuid_bytes(self, raw: list) -> list:
        """A UUID as NVML's 16 integers (``clusterUuid``): the same replacement as its text form."""
        data = bytes(int(b) & 0xFF for b in raw)
        if len(raw) != 16 or not data.strip(b"\0"):
            return raw  # all zero: no cluster, identifies nobody
        text = data.hex()
        fresh = self.text(f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}")
        return list(bytes.fromhex(fresh.replace("-", "")))

    def opaque_uuid(self, value: str) -> str:
        key = f"uuid-opaque:{value.lower()}"
        if key not in self.mapping:
            self.mapping[key] = self._fresh("uuid", value)
        return self.mapping[key]

    def board(self, value: int) -> int:
        key = f"board:{value}"
        if key not in self.mapping:
            self.mapping[key] = str(next(self.counters["board"]))
        return int(self.mapping[key])

    def name(self, name: str) -> str:
        """A recording's name (from its file name, ``node7-20261201``): any host name in it, as a part
        between non-alphanumerics and in any case, becomes ``redacted-host``."""
        for host in sorted(self.hostnames, key=len, reverse=True):
            name = re.sub(rf"(?<![A-Za-z0-9]){re.escape(host)}(?![A-Za-z0-9])", "redacted-host", name,
                          flags=re.IGNORECASE)
        return self.text(name)

    def _ipv6(self, original: str, exploded: bool) -> str:
        """One replacement per address however it is written (GID, compressed, unpadded)."""
        try:
            address = ipaddress.IPv6Address(original)
        except ValueError:
            return original  # looked like an address, is not one
        if address.is_loopback or address.is_unspecified:
            return original
        key = f"ipv6:{address.exploded}"
        if key not in self.mapping:
            self.mapping[key] = self._fresh_ipv6(address).exploded
        fresh = ipaddress.IPv6Address(self.mapping[key])
        return fresh.exploded if exploded else fresh.compressed

    def _fresh_ipv6(self, address: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
        mapped = address.ipv4_mapped
        if mapped is not None:  # RoCE v2 GID of an IPv4 address: follows that address
            ipv4 = str(mapped)
            return ipaddress.IPv6Address(f"::ffff:{self.text(ipv4) if not KEEP_IPV4.match(ipv4) else ipv4}")
        prefix = "fe80" if address.is_link_local else "2001:db8"  # "d0c": a documentation address
        fresh = address
        while fresh == address:
            n = next(self.counters["gid"])
            fresh = ipaddress.IPv6Address(f"{prefix}::d0c:{n >> 16 & 0xFFFF:x}:{n & 0xFFFF:x}")
        return fresh


def _hostname_pattern(name: str) -> re.Pattern:
    """``name`` as a token wherever it appears: between non-alphanumerics (``-`` and ``.`` are
    boundaries, ``_`` is not), together with the whole DNS-like word around it (``gpu-node-17-bmc.corp.
    example.com``, ``ipmi-gpu-node-17``, a ``BUILD_ID`` of ``gpu-node-17-20261201``). A short alphabetic
    name (``gpu``, ``n1``: under 5 characters) is replaced only as a whole word with any
    domain after it, so it never eats ``gpu-burn``, ``numa-node`` or ``gpu-n1``."""
    if len(name) < 5:
        return re.compile(rf"(?<![\w.-]){re.escape(name)}(?:\.[A-Za-z0-9-]+)*(?![\w-])", re.IGNORECASE)
    return re.compile(rf"[A-Za-z0-9.-]*(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])[A-Za-z0-9.-]*",
                      re.IGNORECASE)


def redact_members(members: Members) -> Redactor:
    """Redact ``members`` in place; returns the Redactor (its ``mapping`` says what was replaced)."""
    redactor = Redactor(_hostnames(members), _serials(members), _users(members))
    _redact_structure(members, redactor)
    for name, data in list(members.files.items()):
        if name.endswith("/config"):
            members.files[name] = pcicfg.zero_serial(data)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        members.files[name] = redactor.text(text).encode("utf-8")
    return redactor


def _hostnames(members: Members) -> set[str]:
    names = set()
    for path in HOSTNAME_FILES:
        raw = members.files.get(path, b"").decode("utf-8", errors="replace").strip()
        if raw:
            names.add(raw)
            names.add(raw.split(".")[0])
    names |= _cmdline_hostnames(members.files.get(CMDLINE, b"").decode("utf-8", errors="replace"))
    return names


def _users(members: Members) -> set[str]:
    """User names the recording holds: ``/home/NAME`` paths, ``USER=``-like variables, ``name@host``,
    ``home=`` on the kernel command line, passwd-like members (``name:x:uid:...``, uid >= 1000), and the
    user running the recorder (and ``SUDO_USER``): replaced wherever they appear, stderr included."""
    import os

    names: set[str] = set()
    for name, data in members.files.items():
        if name.endswith("/config"):
            continue
        text = data.decode("utf-8", errors="replace")
        names.update(m[1] for m in HOME_PATH.finditer(text))
        names.update(m[1] for m in USER_VARS.finditer(text))
        names.update(m[0].split("@")[0] for m in USER_AT_HOST.finditer(text))
        if name.endswith(("/passwd", "/group")):
            for line in text.splitlines():
                fields = line.split(":")
                if len(fields) >= 3 and fields[2].isdigit() and int(fields[2]) >= 1000 and fields[0]:
                    names.add(fields[0])
    with contextlib.suppress(KeyError, ImportError, OSError):
        import pwd

        names.add(pwd.getpwuid(os.getuid()).pw_name)
    names.add(os.environ.get("SUDO_USER", ""))
    return {n for n in names if n and len(n) <= 32}


def _serials(members: Members) -> set[str]:
    try:
        tape = jsontext.loads(members.files.get("nvml.json", b"{}"))
    except ValueError:
        return set()
    return {
        str(call["value"]).strip()
        for call in tape.get("calls", [])
        if call.get("fn") == "nvmlDeviceGetSerial" and call.get("value")
    }


# /proc/cmdline keys whose values identify a site, a machine or grant access (PXE/ironic/cloud-init boots):
# the value is replaced whole, whatever it looks like.
# A key is secret when one of its parts (split at . _ -) is a word below, or it contains a fragment below
# (``ipa-api-url``, ``ironic_api_url``, ``ipa-agent-token``, ``BOOTIF``, ``systemd.hostname``, ``nfsroot``);
# ``apic=``, ``iommu=``, ``console=`` and the like stay.
CMDLINE_SECRET_PARTS = frozenset({
    "token", "password", "passwd", "pass", "secret", "key", "cred", "creds", "credentials", "auth", "url",
    "uri", "api", "host", "hostname", "server", "bootif", "nfsroot", "iscsi", "ironic", "user", "username",
    "cloud", "seedfrom", "ds", "ntp", "dns", "nameserver", "domain", "fqdn", "nodename", "cluster", "serial",
    "uuid", "asset", "tag", "endpoint", "proxy", "ssh",
})
CMDLINE_SECRET_FRAGMENTS = ("token", "passw", "secret", "url", "hostname", "bootif", "ironic", "cred")
CMDLINE = "fs/proc/cmdline"


def _redact_structure(members: Members, redactor: Redactor) -> None:
    """Fields known to identify the machine, replaced by what they are rather than how they look."""
    if CMDLINE in members.files:
        text = members.files[CMDLINE].decode("utf-8", errors="replace")
        members.files[CMDLINE] = redact_cmdline(text).encode("utf-8")
    if "nvml.json" in members.files:
        try:
            tape = jsontext.loads(members.files["nvml.json"])
        except ValueError:
            tape = None
        if isinstance(tape, dict):
            for call in tape.get("calls", []) if isinstance(tape.get("calls"), list) else []:
                if isinstance(call, dict) and "value" in call:
                    call["value"] = _tape_value(call.get("fn"), call["value"], redactor)
            members.files["nvml.json"] = json.dumps(tape, indent=1, sort_keys=True).encode()
    if "meta.json" in members.files:
        try:
            meta = jsontext.loads(members.files["meta.json"])
        except ValueError:
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            meta["name"] = redactor.name(meta["name"])
            members.files["meta.json"] = json.dumps(meta, indent=1, sort_keys=True).encode()


def _tape_value(fn, value, redactor: Redactor):
    """An NVML answer with its identifying fields replaced: cluster UUIDs (16 integers or text), board
    ids, UUIDs and serials in any field whose name says so."""
    if fn == "nvmlDeviceGetBoardId" and isinstance(value, int) and not isinstance(value, bool):
        return redactor.board(value)
    if fn == "nvmlDeviceGetUUID" and isinstance(value, str) and value and redactor.text(value) == value:
        return "GPU-" + redactor.opaque_uuid(value)  # a UUID in no spelling the patterns know
    if isinstance(value, dict):
        return {key: _field(key, item, redactor) for key, item in value.items()}
    if isinstance(value, list):
        return [_tape_value(None, item, redactor) for item in value]
    return value


def _field(key: str, value, redactor: Redactor):
    lowered = key.lower()
    if "uuid" in lowered and isinstance(value, list) and all(isinstance(b, int) for b in value):
        return redactor.uuid_bytes(value)
    if "boardid" in lowered and isinstance(value, int) and not isinstance(value, bool):
        return redactor.board(value)
    if ("serial" in lowered or "uuid" in lowered) and isinstance(value, str) and value.strip("0- "):
        redacted = redactor.text(value)
        return redacted if redacted != value else "redacted"
    return _tape_value(None, value, redactor)


def redact_cmdline(text: str) -> str:
    """``/proc/cmdline`` token by token: a value under a key that names a secret, a host, a URL or a
    site (``token=``, ``ipa-api-url=``, ``BOOTIF=``, ``hostname=``, ``nfsroot=``, ...) and any value
    holding a URL or a user@host becomes ``redacted``; the host name field of ``ip=`` too. Addresses
    elsewhere are left to the pattern pass, so ``ip=`` keeps a consistent (redacted) address."""
    return " ".join(_cmdline_token(token) for token in text.split(" "))


# Kernel parameters whose values configure the machine and identify nobody (Documentation/admin-guide/
# kernel-parameters.txt; dracut.cmdline(7); the NVIDIA/IOMMU/NUMA knobs the rules read). Every other
# ``key=value`` has its value replaced: a PXE/ironic/cloud-init boot puts tokens, passwords, hosts, sites,
# racks and asset tags under keys nobody can list in advance (``pw=``, ``netroot=``, ``rack=``).
CMDLINE_HARMLESS = frozenset({
    "boot_image", "root", "rootfstype", "rootflags", "rootwait", "rootdelay", "ro", "rw", "init", "resume",
    "quiet", "splash", "console", "earlycon", "earlyprintk", "loglevel", "ignore_loglevel", "panic",
    "crashkernel", "iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict", "pci",
    "pcie_aspm", "pcie_ports", "pcie_acs_override", "pci_acs", "apic", "x2apic_phys", "acpi", "noapic",
    "nomodeset", "nvidia-drm.modeset", "nvidia-drm.fbdev", "nouveau.modeset", "modprobe.blacklist",
    "rd.driver.blacklist", "rd.driver.pre", "module_blacklist", "transparent_hugepage", "hugepages",
    "hugepagesz", "default_hugepagesz", "isolcpus", "nohz_full", "nohz", "rcu_nocbs", "irqaffinity",
    "numa_balancing", "numa", "mitigations", "nosmt", "processor.max_cstate", "intel_idle.max_cstate",
    "idle", "intel_pstate", "amd_pstate", "cpufreq.default_governor", "net.ifnames", "biosdevname",
    "audit", "selinux", "apparmor", "security", "lsm", "enforcing", "systemd.unified_cgroup_hierarchy",
    "systemd.legacy_systemd_cgroup_controller", "cgroup_enable", "cgroup_disable", "cgroup_no_v1",
    "swapaccount", "nvme_core.multipath", "nvme_core.io_timeout", "nvme.poll_queues", "memmap", "mem",
    "efi", "nokaslr", "kaslr", "page_alloc.shuffle", "init_on_alloc", "init_on_free", "tsc", "clocksource",
    "nmi_watchdog", "watchdog", "nowatchdog", "softlockup_panic", "hardlockup_panic", "vsyscall", "pti",
    "spectre_v2", "spec_store_bypass_disable", "l1tf", "mds", "tsx", "tsx_async_abort", "retbleed",
    "rd.auto", "rd.md", "rd.lvm", "rd.luks", "rd.dm", "rd.shell", "rd.break", "rd.neednet", "plymouth.enable",
    "fsck.mode", "fsck.repair", "systemd.show_status", "systemd.log_level", "udev.log_priority",
    "swiotlb", "iomem", "vfio-pci.ids", "vfio_iommu_type1.allow_unsafe_interrupts", "kvm.ignore_msrs",
    "ipv6.disable", "usbcore.autosuspend", "msr.allow_writes", "numa_zonelist_order",
    "zswap.enabled", "elevator", "scsi_mod.use_blk_mq", "dm_mod.use_blk_mq", "libata.force",
})


def _cmdline_token(token: str) -> str:
    key, sep, value = token.partition("=")
    if not sep or not value.strip():
        return token
    tail = "\n" if value.endswith("\n") else ""
    value = value.rstrip("\n")
    if key.lower() == "ip":
        return f"{key}={_ip_param(value)}{tail}"
    if _secret_key(key) or "://" in value or "@" in value or key.lower() not in CMDLINE_HARMLESS:
        return f"{key}=redacted{tail}"
    return token


def _secret_key(key: str) -> bool:
    lowered = key.lower()
    parts = re.split(r"[._-]", lowered)
    return any(part in CMDLINE_SECRET_PARTS for part in parts) or any(
        fragment in lowered for fragment in CMDLINE_SECRET_FRAGMENTS
    )


def _ip_param(value: str) -> str:
    """``ip=client:server:gw:netmask:hostname:device:autoconf...``: the host name field is redacted."""
    if "[" in value:
        return value
    fields = value.split(":")
    if len(fields) > 4 and fields[4]:
        fields[4] = "redacted-host"
    return ":".join(fields)


def _cmdline_hostnames(text: str) -> set[str]:
    """Host names the kernel command line gives (``ip=...:NAME:...``, ``hostname=``): they are the
    machine's, so they are replaced wherever they appear."""
    names = set()
    for token in text.split():
        key, _sep, value = token.partition("=")
        if key.lower() == "ip" and "[" not in value and len(value.split(":")) > 4:
            names.add(value.split(":")[4])
        elif key.lower() in ("hostname", "systemd.hostname", "nodename", "fqdn"):
            names.add(value)
    return {n for part in names for n in (part, part.split(".")[0]) if n}
