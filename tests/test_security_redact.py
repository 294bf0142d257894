"""Redaction residue on an identifier-rich host (issue 22, item 7): host names as tokens wherever they
appear, every kernel command-line value but known-harmless parameters, user names (home paths,
``name@host``, passwd-like sources) also in a command's stderr and the driver's build string."""

from __future__ import annotations

from conftest import gpu_box, load_tape, make_tree
from test_record_redact import archive_bytes

from topodoc.probe.collect import collect
from topodoc.probe.host import CommandResult, Host, RootFs, TapeNvml
from topodoc.probe.record import open_recording, write_recording
from topodoc.probe.redact import Redactor, redact_cmdline

HOST = "gpu-node-17"
CMDLINE = ("BOOT_IMAGE=/vmlinuz-5.15.0 root=/dev/nvme0n1p2 ro pw=hunter2 "
           "netroot=iscsi:10.0.0.5::::iqn.2020-01.com.example:storage home=/home/alice rack=R17 "
           "assettag=ABC123XYZ site=ams3 iommu=pt intel_iommu=on pci=realloc quiet\n")
DRIVER = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  "
          "(alice@gpu-build-03)  Tue Aug 22 18:19:25 UTC 2023\nGCC version:  gcc version 12.3.0\n")
OS_RELEASE = f'PRETTY_NAME="Ubuntu 22.04.3 LTS"\nNAME="Ubuntu"\nBUILD_ID="{HOST}-20261201"\n'
SECRET = [HOST, "corp.example.com", "hunter2", "iqn.2020-01", "alice", "R17", "ABC123XYZ", "ams3",
          "gpu-build-03", "10.0.0.5"]


class Runner:
    def run(self, argv, timeout):
        return CommandResult(argv, f"GPU0\t X \t0-3\t0\t\tN/A\nbmc {HOST}-bmc.corp.example.com\n",
                             "sudo: alice is not in the sudoers file.  This incident will be reported.\n", 1)


def test_host_name_followed_by_a_dash_or_inside_an_fqdn():
    r = Redactor({HOST, HOST}, set())
    text = (f"{HOST}-bmc.corp.example.com ipmi-{HOST} BUILD_ID={HOST}-20261201 {HOST}.corp.example.com "
            f"{HOST}_x numa_node {HOST}0")
    out = r.text(text)
    assert out.split() == ["redacted-host", "redacted-host", "BUILD_ID=redacted-host", "redacted-host",
                           f"{HOST}_x", "numa_node", f"{HOST}0"]


def test_every_cmdline_value_but_harmless_kernel_parameters():
    out = redact_cmdline(CMDLINE).split()
    assert out == ["BOOT_IMAGE=/vmlinuz-5.15.0", "root=/dev/nvme0n1p2", "ro", "pw=redacted",
                   "netroot=redacted", "home=redacted", "rack=redacted", "assettag=redacted",
                   "site=redacted", "iommu=pt", "intel_iommu=on", "pci=realloc", "quiet"]


def test_user_names_in_home_paths_build_strings_and_stderr():
    r = Redactor(set(), set(), {"alice"})
    out = r.text("cd /home/alice/x; sudo: alice is not in the sudoers file (alice@gpu-build-03) bob@h-1")
    assert out == ("cd /home/redacted-user/x; sudo: redacted-user is not in the sudoers file "
                   "(redacted-user@redacted-host) redacted-user@redacted-host")


def test_a_recording_of_an_identifier_rich_host_leaves_none_behind(tmp_path):
    files, links = gpu_box()
    files["/proc/sys/kernel/hostname"] = f"{HOST}\n"
    files["/proc/cmdline"] = CMDLINE
    files["/proc/driver/nvidia/version"] = DRIVER
    files["/etc/os-release"] = OS_RELEASE
    root = make_tree(tmp_path / "root", files, links)
    out = tmp_path / "rec.tar.gz"
    write_recording(Host(RootFs(root), TapeNvml(load_tape("healthy-8xh100")), Runner()), out, redact=True)
    blob = b"\n".join(archive_bytes(out))
    left = [secret for secret in SECRET if secret.encode() in blob]
    assert not left, left
    snap = collect(open_recording(out))
    assert snap.kernel.iommu_mode and "iommu=pt" in snap.kernel.cmdline  # what the rules read is kept
