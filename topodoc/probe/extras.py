"""The command outputs ``topodoc record`` keeps beside what the collectors read, so a recording also
holds what a person (or ``diagnose FILE...``) would ask the machine for.

Runs, through the Host's runner (no shell; each with its own timeout, and the recording's overall
deadline over all of them), in this order: ``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``,
``nvidia-smi nvlink -e``, ``ibstat``, ``ibv_devinfo -v``, ``lspci -vvv`` (as the recording user: no sudo,
so what root alone sees is absent), ``lsmod``, ``systemctl status nvidia-fabricmanager`` (Fabric
Manager), ``journalctl -k -b`` (this boot's kernel log, of which the recording keeps only the NVIDIA,
PCIe AER, IOMMU and RDMA driver lines: :class:`KernelLinesOnly`, so a recording never carries the rest
of a kernel log), and reads ``/proc/cmdline`` through the filesystem. A tool that is not installed is
recorded as missing (the runner's answer, said once in the tape), never retried, and nothing here judges:
the outputs are data for replay.
"""

from __future__ import annotations

import functools

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
KERNEL_LOG = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic", "-n", "20000")
COMMANDS += ((KERNEL_LOG, 20.0),)
FILES = ("/proc/cmdline",)
# the kernel-log lines kept: what topodoc.parsers.kernel_log reads (Xid, lost GPU, RmInitAdapter, AER,
# DMAR / AMD-Vi faults, mlx5 / EFA / NVSwitch driver lines, "limited by ... PCIe")
KEPT = ("NVRM", "nvidia", "nvswitch", "AER", "pcieport", "PCIe Bus Error", "DMAR", "AMD-Vi", "mlx5", "efa ",
        "ib_core", "limited by")
MAX_KERNEL_LINES = 2000


class KernelLinesOnly:
    """A runner that passes every command through, and keeps of the kernel log's output only the lines
    naming one of :data:`KEPT` (the last :data:`MAX_KERNEL_LINES` of them)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def run(self, argv: list[str], timeout: float):
        import dataclasses

        result = self.inner.run(argv, timeout)
        if tuple(argv) != KERNEL_LOG or not result.stdout:
            return result
        kept = [line for line in result.stdout.splitlines() if any(word in line for word in KEPT)]
        return dataclasses.replace(result, stdout="".join(f"{line}\n" for line in kept[-MAX_KERNEL_LINES:]))


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


def recorded_kernel_events(spec: str | None) -> tuple | None:
    """The kernel-log events a recording (``NAME.tar.gz`` or ``example:NAME``) kept, as the ``kernel`` fact
    (``((label, KernelEvent), ...)``, label ``SPEC:journalctl -k``); None for a live source, a recording
    that holds no kernel log (recorded before topodoc asked, or the tool was absent), or anything else."""
    stdout = kept_outputs(spec).get(KERNEL_LOG)
    if not stdout:
        return None
    from topodoc.parsers import kernel_log  # only when there are lines: it loads the regex module

    label = f"{spec}:journalctl -k"
    return tuple((label, event) for event in kernel_log.parse(stdout))


# Recorded outputs that tell the rules what the collectors cannot: Fabric Manager's own state (its service
# status and log lines). The others (nvidia-smi -q -x, nvlink, ibstat, ibv_devinfo, lspci, lsmod) repeat
# what NVML and sysfs gave the snapshot; their rules would say it twice.
FABRIC_MANAGER = ("systemctl", "status", "nvidia-fabricmanager", "--no-pager", "--lines=20")
TEXTS = (FABRIC_MANAGER,)


def recorded_texts(spec: str | None) -> tuple[tuple[str, str], ...]:
    """``((label, output), ...)`` of :data:`TEXTS` a recording kept (label ``SPEC:command line``), for the
    rules that read those kinds of text; empty for a live source or a recording without them."""
    kept = kept_outputs(spec)
    return tuple((f"{spec}:{' '.join(argv)}", kept[argv]) for argv in TEXTS if kept.get(argv, "").strip())


MAX_COMMANDS_BYTES = 16 << 20  # commands.json: every output is already capped at 4 MiB by the runner


def kept_outputs(spec: str | None) -> dict[tuple[str, ...], str]:
    """``argv -> stdout`` of the commands a recording (``NAME.tar.gz``, ``example:NAME``) kept and that ran
    (not missing, not timed out); empty for a live source or anything else. Read from the archive's
    ``commands.json`` member alone, streamed and bounded, nothing written: no archive extraction and no
    collectors on the path of a warm ``--from`` (whose snapshot comes from the replay cache). The archive
    was checked by the safe extractor when its snapshot was first made."""
    recording = spec is not None and (spec.startswith("example:") or spec.endswith((".tar.gz", ".tgz")))
    if not recording:
        return {}
    from topodoc.probe.source import SourceError, recording_path

    try:
        return _kept(recording_path(spec))
    except SourceError:
        return {}


TAPE = "commands.json"


@functools.lru_cache(maxsize=4)
def _kept(path: str) -> dict[tuple[str, ...], str]:
    import json

    found, raw = _tape_bytes(path)
    if not found:
        return {}
    try:
        tape = json.loads(raw) if raw is not None else {}
    except (ValueError, RecursionError):
        return {}
    out = {}
    for item in tape.get("commands", []) if isinstance(tape, dict) else []:
        if not isinstance(item, dict) or item.get("missing") or item.get("timed_out"):
            continue
        argv, stdout = item.get("argv"), item.get("stdout")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(stdout, str):
            out[tuple(argv)] = stdout
    return out


def _tape_bytes(path: str) -> tuple[bool, bytes | None]:
    """``(True, bytes)`` of the archive's ``commands.json`` (``(True, None)``: it has none), ``(False,
    None)`` when the archive cannot be read or the member is not a file of at most the cap. The replay
    cache keeps the member beside the recording's tree, so a warm run neither loads tarfile nor
    decompresses the archive (the same bytes, checked by their SHA-256)."""
    from topodoc.probe import replaycache

    try:
        digest = replaycache.file_digest(path)
    except replaycache.DigestError:
        digest = None
    if digest is not None:
        known, raw = replaycache.cached_member(digest, TAPE)
        if known:
            return True, raw
    found, raw = _read_tape(path)
    if found and digest is not None:
        replaycache.store_member(digest, TAPE, raw)
    return found, raw


def _read_tape(path: str) -> tuple[bool, bytes | None]:
    import tarfile
    import zlib

    try:
        with tarfile.open(path, "r|gz") as archive:
            for member in archive:
                if member.name.removeprefix("./") != TAPE:
                    continue
                if not member.isfile() or not 0 <= member.size <= MAX_COMMANDS_BYTES:
                    return False, None
                handle = archive.extractfile(member)
                return True, handle.read(MAX_COMMANDS_BYTES) if handle else b"{}"
    except (OSError, EOFError, zlib.error, tarfile.TarError, ValueError, RecursionError):
        return False, None
    return True, None
