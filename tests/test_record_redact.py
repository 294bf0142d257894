"""``--redact``: no hostname, IP, MAC, serial, UUID or GID survives anywhere in the archive, and the
redacted recording still replays into a consistent snapshot."""

from __future__ import annotations

import ipaddress
import json
import re
import tarfile

from conftest import SECRETS, gpu_box, load_tape, make_tree
from hypothesis import given
from hypothesis import strategies as st

from topodoc.probe.archive import Members
from topodoc.probe.collect import collect
from topodoc.probe.host import CommandResult, Host, RootFs, TapeNvml
from topodoc.probe.record import open_recording, write_recording
from topodoc.probe.redact import Redactor, redact_members


class SmiRunner:
    def run(self, argv, timeout):
        return CommandResult(argv, f"GPU0\t X \t0-3\t0\t\tN/A\nhost {SECRETS['hostname']}\n", "", 0)


def archive_bytes(path) -> list[bytes]:
    """Every member's name, link target and content."""
    blobs = []
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            blobs += [member.name.encode(), member.linkname.encode()]
            if member.isfile():
                blobs.append(tar.extractfile(member).read())
    return blobs


def spellings(tape) -> dict[str, list[str]]:
    serials = [c["value"] for c in tape["calls"] if c["fn"] == "nvmlDeviceGetSerial"]
    uuids = [c["value"] for c in tape["calls"] if c["fn"] == "nvmlDeviceGetUUID"]
    s = SECRETS
    return {
        "hostname": [s["hostname"]],
        "ipv4": [s["ipv4"], "0a2a:0713"],
        "mac": [s["mac"], s["mac"].replace(":", "")],
        "serial": [s["serial"], *serials],
        "uuid": [s["uuid"], s["boot_id"], *uuids, *(u[4:] for u in uuids)],
        "gid": [s["gid"], "bace:f6ff:fe1a:2b3c"],
        "guid": [s["guid"], "f6:03:00:1a:2b:3c"],
    }


def record_box(tmp_path, redact: bool):
    files, links = gpu_box()
    root = make_tree(tmp_path / "root", files, links)
    tape = load_tape("healthy-8xh100")
    for call in tape["calls"]:  # GPU 0 carries the planted serial and UUID
        if call["args"] == [0] and call["fn"] in ("nvmlDeviceGetSerial", "nvmlDeviceGetUUID"):
            call["value"] = SECRETS["serial" if call["fn"].endswith("Serial") else "uuid"]
    out = tmp_path / "box.tar.gz"
    write_recording(Host(RootFs(root), TapeNvml(tape), SmiRunner()), out, redact=redact)
    return out, tape


def test_unredacted_recording_does_hold_the_secrets(tmp_path):
    out, tape = record_box(tmp_path, redact=False)
    blob = b"\n".join(archive_bytes(out)).lower()
    for kind, values in spellings(tape).items():
        assert values[0].lower().encode() in blob, kind


def test_no_secret_survives_redaction(tmp_path):
    out, tape = record_box(tmp_path, redact=True)
    blob = b"\n".join(archive_bytes(out)).lower()
    for kind, values in spellings(tape).items():
        for value in values:
            assert value.lower().encode() not in blob, f"{kind} {value} survived"


def test_redacted_recording_replays_consistently(tmp_path):
    out, _tape = record_box(tmp_path, redact=True)
    snap = collect(open_recording(out))
    assert snap.host.hostname == "redacted-host"
    gids = snap.nics[0].ports[0].gids
    assert [g.index for g in gids] == [0, 2] and gids[0].gid.startswith("fe80:0000:0000:0000:")
    ip = re.search(r"ip=([\d.]+)", snap.kernel.cmdline).group(1)
    packed = "".join(f"{int(p):02x}" for p in ip.split("."))
    assert gids[1].gid.endswith(f"ffff:{packed[:4]}:{packed[4:]}")  # the RoCE v2 GID follows its IP
    assert len({g.uuid for g in snap.gpus}) == 8 and all(g.uuid.startswith("GPU-") for g in snap.gpus)
    assert len(snap.gpus[0].nvlinks) == 18 and snap.pci["0000:1a:00.0"].parent == "0000:17:00.0"


def test_live_machine_redaction(tmp_path):
    live = collect(Host.live())
    out = tmp_path / "live.tar.gz"
    write_recording(Host.live(), out, redact=True)
    blob = b"\n".join(archive_bytes(out)).lower()
    secrets = [live.host.boot_id] + [i.mac for i in live.net if i.mac and i.mac.strip("0:")]
    for value in filter(None, secrets):
        assert value.lower().encode() not in blob
    replayed = collect(open_recording(out))
    assert replayed.host.hostname == "redacted-host"
    assert len(replayed.pci) == len(live.pci) and [i.name for i in replayed.net] == [i.name for i in live.net]


@given(st.lists(st.integers(0, 255), min_size=6, max_size=6))
def test_redaction_is_consistent_and_keeps_the_shape(octets):
    mac = ":".join(f"{b:02x}" for b in octets)
    redactor = Redactor(set(), set())
    once = redactor.text(f"a {mac} b {mac.upper()}")
    first, second = once.split()[1], once.split()[3]
    assert first == second and re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", first)
    assert first == mac or mac.strip("0:") != "" and first != mac


IPV6_TEXT = (
    "ip=[fe80::1]:eth0 gw 2001:db8:85a3::8a2e:370:7334 addr fe80:0:0:0:bace:f6ff:fe1a:2b3c "
    "same fe80::bace:f6ff:fe1a:2b3c gid fe80:0000:0000:0000:bace:f6ff:fe1a:2b3c mapped ::ffff:10.42.7.19"
)
KEPT = "lo ::1 any :: bdf 0000:1a:00.0 at 22:15:33 mac b8:ce:f6:1a:2b:3c guid b8ce:f603:001a:2b3c std::vector"


def test_compressed_ipv6_spellings_are_redacted_consistently():
    redactor = Redactor(set(), set())
    out = redactor.text(IPV6_TEXT + " " + KEPT)
    for secret in ("fe80::1]", "8a2e:370:7334", "bace:f6ff:fe1a:2b3c", "10.42.7.19"):
        assert secret not in out, secret
    words = out.split()
    same = [words[words.index(tag) + 1] for tag in ("addr", "same", "gid")]
    assert len({ipaddress.IPv6Address(w) for w in same}) == 1  # one address, however it was written
    assert words[words.index("gid") + 1].count(":") == 7 and "::" in words[words.index("same") + 1]
    assert words[words.index("mapped") + 1] == "::ffff:" + redactor.text("10.42.7.19")
    kept = out[out.index("lo ::1") :]
    assert kept.split()[:4] == ["lo", "::1", "any", "::"] and "0000:1a:00.0 at 22:15:33" in kept
    assert "std::vector" in kept and "b8:ce:f6" not in kept and "b8ce:f603" not in kept


@given(st.ip_addresses(v=6), st.booleans())
def test_any_ipv6_spelling_is_replaced_by_a_valid_address(address, exploded):
    spelled = address.exploded if exploded else address.compressed
    out = Redactor(set(), set()).text(f"addr {spelled} end")
    word = out.split()[1]
    ipaddress.IPv6Address(word)  # still an address
    if not (address.is_loopback or address.is_unspecified or address.ipv4_mapped):
        assert ipaddress.IPv6Address(word) != address


def test_short_and_full_hostnames_and_the_domain_after_them():
    full = Redactor({"gpu-node-0417.cluster.example.com", "gpu-node-0417"}, set())
    text = "node_desc gpu-node-0417 mlx5_0; ssh gpu-node-0417.cluster.example.com; log gpu-node-0417:22"
    out = full.text(text)
    assert "gpu-node-0417" not in out and "example.com" not in out and out.count("redacted-host") == 3
    short = Redactor({"n1"}, set())  # a short name is replaced as a word, never inside other words
    assert short.text("n1 numa_node1 gpu-n1 n1.rack4.dc numa n10") == "redacted-host numa_node1 gpu-n1 " \
        "redacted-host numa n10"
    assert Redactor({"localhost"}, set()).text("localhost 127.0.0.1") == "localhost 127.0.0.1"


def test_recording_redacts_a_short_hostname_and_ipv6_in_every_member(tmp_path):
    files, links = gpu_box()
    files["/proc/sys/kernel/hostname"] = "n7\n"
    files["/proc/cmdline"] = "ro ipv6.gw=fe80::1 ip6=2001:db8:85a3::8a2e:370:7334 net=2001:db8:77:: host=n7\n"
    root = make_tree(tmp_path / "root", files, links)
    out = tmp_path / "n7.tar.gz"
    write_recording(Host(RootFs(root), TapeNvml(load_tape("healthy-8xh100")), SmiRunner()), out, redact=True)
    blob = b"\n".join(archive_bytes(out))
    assert not re.search(rb"(?<![\w-])n7(?![\w-])", blob)
    assert b"fe80::1 " not in blob and b"8a2e:370:7334" not in blob and b"2001:db8:77::" not in blob
    snap = collect(open_recording(out))
    assert snap.host.hostname == "redacted-host"
    assert snap.kernel.cmdline.split() == ["ro", "ipv6.gw=redacted", "ip6=redacted", "net=redacted",
                                           "host=redacted"]


# -- a host rich in identifiers: nothing it names survives --redact, in any member or spelling ---------

FQDN = "gpu-node-0417.dc3.corp.example.net"
CLUSTER = [0x5a, 0x1f, 0x3c, 0x77, 0x90, 0x12, 0x4e, 0x8b, 0xa3, 0x0d, 0x6c, 0x21, 0xfe, 0x44, 0x19, 0x02]
CLUSTER_HEX = bytes(CLUSTER).hex()
CLUSTER_TEXT = "-".join(CLUSTER_HEX[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
PXE_CMDLINE = (
    f"BOOT_IMAGE=/vmlinuz-5.15.0-105-generic ro iommu=pt "
    f"ip={SECRETS['ipv4']}::10.42.7.1:255.255.255.0:gpu-node-0417:eth0:off BOOTIF=01-b8-ce-f6-1a-2b-3c "
    "ipa-api-url=http://ironic-conductor-02.dc3.corp.example.net:6385 ipa-agent-token=Zk9wP3sQ7vX2Lm "
    "ipa-inspection-callback-url=https://10.9.8.7:5050/v1/continue "
    "ironic_api_url=http://ironic-api.dc3.corp.example.net:6385 token=s3cr3tT0kenQ "
    "systemd.hostname=GPU-NODE-0417 nfsroot=fileserver7.dc3.corp.example.net:/export/root "
    "console=ttyS0,115200n8 root=UUID=3f2a9c1e-7b4d-4e8a-9c3f-1a2b3c4d5e6f\n"
)


class ChattyRunner:
    """nvidia-smi output naming the machine every way a real one can: upper-case host name, the cluster
    UUID as text, a 0x GUID, an undashed UUID, a serial."""

    def run(self, argv, timeout):
        out = (f"GPU0\t X \t0-3\t0\t\tN/A\nhost GPU-NODE-0417 ({FQDN})\nCluster UUID : {CLUSTER_TEXT}\n"
               f"Node GUID: 0xb8cef603001a2b3c\nmachine {CLUSTER_HEX}\nSerial Number : {SECRETS['serial']}\n")
        return CommandResult(argv, out, "", 0)


def record_rich_box(tmp_path):
    files, links = gpu_box()
    files["/proc/sys/kernel/hostname"] = FQDN + "\n"
    files["/proc/cmdline"] = PXE_CMDLINE
    root = make_tree(tmp_path / "root", files, links)
    tape = load_tape("healthy-8xh100")
    for call in tape["calls"]:
        if call["args"] == [0] and call["fn"] in ("nvmlDeviceGetSerial", "nvmlDeviceGetUUID"):
            call["value"] = SECRETS["serial" if call["fn"].endswith("Serial") else "uuid"]
        if call["fn"] == "nvmlDeviceGetGpuFabricInfoV":  # live pynvml: 16 integers, the same on every GPU
            call["value"] = {**call["value"], "clusterUuid": list(CLUSTER), "state": 3, "cliqueId": 7}
    out = tmp_path / "gpu-node-0417-20261201.tar.gz"
    summary = write_recording(Host(RootFs(root), TapeNvml(tape), ChattyRunner()), out, redact=True)
    return out, summary


RICH_SECRETS = [
    "gpu-node-0417", "dc3.corp", "example.net", "ironic-conductor-02", "ironic-api", "fileserver7",
    "Zk9wP3sQ7vX2Lm", "s3cr3tT0kenQ", "b8-ce-f6-1a-2b-3c", SECRETS["mac"], "10.9.8.7", SECRETS["ipv4"],
    SECRETS["guid"], "b8cef603001a2b3c", SECRETS["serial"], SECRETS["uuid"][4:], SECRETS["boot_id"],
    CLUSTER_TEXT, CLUSTER_HEX, "3f2a9c1e-7b4d-4e8a-9c3f-1a2b3c4d5e6f",
]


def test_no_identifier_of_a_rich_host_survives_redaction(tmp_path):
    out, summary = record_rich_box(tmp_path)
    blob = b"\n".join(archive_bytes(out)).lower()
    for secret in RICH_SECRETS:
        assert secret.lower().encode() not in blob, f"{secret} survived"
    with tarfile.open(out) as tar:
        tape = json.loads(tar.extractfile("nvml.json").read())
        meta = json.loads(tar.extractfile("meta.json").read())
    clusters = [c["value"]["clusterUuid"] for c in tape["calls"] if c["fn"] == "nvmlDeviceGetGpuFabricInfoV"]
    assert len(clusters) == 8 and clusters[0] != CLUSTER and all(c == clusters[0] for c in clusters)
    assert meta["name"] == summary.name == "redacted-host-20261201"


def test_a_redacted_rich_host_still_replays_consistently(tmp_path):
    out, _summary = record_rich_box(tmp_path)
    snap = collect(open_recording(out))
    assert snap.host.hostname == "redacted-host"
    cmdline = snap.kernel.cmdline
    assert "iommu=pt" in cmdline and "console=ttyS0,115200n8" in cmdline and "token=redacted" in cmdline
    assert ":redacted-host:eth0:off" in cmdline and "ipa-api-url=redacted" in cmdline
    clusters = {g.fabric.cluster_uuid for g in snap.gpus}
    assert len(clusters) == 1 and CLUSTER_TEXT not in clusters and None not in clusters


def test_board_id_and_uuid_fields_on_the_tape_are_redacted_by_name():
    members = Members()
    members.files["nvml.json"] = json.dumps({"calls": [
        {"fn": "nvmlDeviceGetBoardId", "args": [0], "value": 123456789},
        {"fn": "nvmlDeviceGetBoardId", "args": [1], "value": 123456789},
        {"fn": "nvmlDeviceGetUUID", "args": [2], "value": "GPU-opaque-spelling-42"},
        {"fn": "someStruct", "args": [0], "value": {"boardId": 987654321, "serialNumber": "PX1234567"}},
    ]}).encode()
    redact_members(members)
    calls = json.loads(members.files["nvml.json"])["calls"]
    assert calls[0]["value"] == calls[1]["value"] != 123456789
    assert calls[2]["value"].startswith("GPU-") and "opaque" not in calls[2]["value"]
    assert calls[3]["value"]["boardId"] != 987654321 and calls[3]["value"]["serialNumber"] == "redacted"
