"""`topodoc record` keeps the extra command outputs (probe.extras): each command run once with its own
timeout, a missing tool recorded as missing, serials in them redacted, and replay serving them back."""

from __future__ import annotations

import json
import tarfile

from topodoc.examples_index import example_path
from topodoc.probe import extras
from topodoc.probe.host import CommandResult, Host
from topodoc.probe.record import open_recording, write_recording

LSPCI = "3a:00.0 3D controller: NVIDIA Corporation GH100\n\tCapabilities: [140 v1] Device Serial Number " \
        "48-b0-2d-ff-fe-a1-b2-c3\n"


JOURNAL = ("[   12.1] systemd[1]: Started Session 4 of user alice.\n"
           "[ 1234.5] NVRM: Xid (PCI:0000:3a:00): 79, pid=1, GPU has fallen off the bus.\n"
           "[ 1235.0] sshd[991]: Accepted publickey for alice from 10.1.2.3\n"
           "[ 1236.0] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n")


class Answering:
    """lspci and lsmod answer, one tool hangs, everything else is not installed."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def run(self, argv, timeout):
        self.calls.append((tuple(argv), timeout))
        if argv[0] == "lspci":
            return CommandResult(list(argv), stdout=LSPCI, returncode=0)
        if argv[0] == "lsmod":
            return CommandResult(list(argv), stdout="Module  Size  Used by\nnvidia_peermem 16384 0\n")
        if argv[0] == "journalctl":
            return CommandResult(list(argv), stdout=JOURNAL, returncode=0)
        if argv[:2] == ["nvidia-smi", "nvlink"]:
            return CommandResult(list(argv), stderr="[topodoc: killed after 20 s]", timed_out=True)
        return CommandResult(list(argv), stderr=f"{argv[0]}: command not found", missing=True)


def _commands(archive) -> dict[str, dict]:
    with tarfile.open(archive) as tar:
        tape = json.load(tar.extractfile("commands.json"))
    return {" ".join(c["argv"]): c for c in tape["commands"]}


def test_record_keeps_every_extra_command_once_with_its_timeout_and_redacts_serials(tmp_path):
    replay = open_recording(example_path("hgx-h100-8x400g-ib"))
    runner = Answering()
    out = tmp_path / "node.tar.gz"
    write_recording(Host(replay.fs, replay.nvml, runner), out, redact=True)
    asked = [argv for argv, _ in runner.calls]
    for argv, timeout in extras.COMMANDS:
        assert asked.count(argv) == 1 and (argv, timeout) in runner.calls
    recorded = _commands(out)
    assert recorded["ibstat"]["missing"] and recorded["nvidia-smi nvlink -s"]["timed_out"]
    lspci = recorded["lspci -vvv"]["stdout"]
    assert "48-b0-2d-ff-fe-a1-b2-c3" not in lspci and "Device Serial Number SERIAL" in lspci
    journal = recorded[" ".join(extras.KERNEL_LOG)]["stdout"]
    assert journal.splitlines() == [JOURNAL.splitlines()[1], JOURNAL.splitlines()[3]]  # nothing else kept
    again = open_recording(out)  # replay answers the same outputs
    assert again.runner.run(["lsmod"], 5).stdout.startswith("Module")
    assert again.runner.run(["ibstat"], 5).missing


def test_the_bundled_recordings_say_which_tools_were_absent():
    recorded = _commands(example_path("hgx-h100-degraded-health"))
    for argv, _timeout in extras.COMMANDS:
        assert recorded[" ".join(argv)]["missing"]  # the synthetic machine has none of these tools
