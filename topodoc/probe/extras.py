"""The command outputs ``topodoc record`` keeps beside what the collectors read, so a recording also
holds what a person (or ``diagnose FILE...``) would ask the machine for.

Runs, through the Host's runner (no shell; each with its own timeout, and the recording's overall
deadline over all of them), in this order: ``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``,
``nvidia-smi nvlink -e``, ``ibstat``, ``ibv_devinfo -v``, ``lspci -vvv`` (as the recording user: no sudo,
so what root alone sees is absent), ``lsmod``, ``systemctl status nvidia-fabricmanager`` (Fabric
Manager), and reads ``/proc/cmdline`` through the filesystem. A tool that is not installed is recorded as
missing (the runner's answer, said once in the tape), never retried, and nothing here judges: the outputs
are data for replay.
"""

from __future__ import annotations

COMMANDS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("nvidia-smi", "-q", "-x"), 30.0),
    (("nvidia-smi", "nvlink", "-s"), 20.0),
    (("nvidia-smi", "nvlink", "-e"), 20.0),
    (("ibstat",), 10.0),
    (("ibv_devinfo", "-v"), 15.0),
    (("lspci", "-vvv"), 20.0),
    (("lsmod",), 5.0),
    (("systemctl", "status", "nvidia-fabricmanager", "--no-pager", "--lines=20"), 10.0),
)
FILES = ("/proc/cmdline",)


def capture(host) -> dict[str, str]:
    """Run every command once (their results go wherever ``host.runner`` keeps them, the tape when
    recording) and read :data:`FILES`; returns ``{command line: how it ended}`` for the summary."""
    from topodoc.probe.host import FsError

    ended = {}
    for argv, timeout in COMMANDS:
        result = host.runner.run(list(argv), timeout)
        ended[" ".join(argv)] = ("missing" if result.missing else "timed out" if result.timed_out
                                 else f"exit {result.returncode}")
    for path in FILES:
        try:
            host.fs.read_bytes(path)
            ended[path] = "read"
        except FsError as err:
            ended[path] = err.reason.value
    return ended
