"""Shared test helpers: small machine trees on disk (sysfs/procfs under a root) for the probe, and the
CLI run in this process (``run_cli``) or as a real ``python -m topodoc`` subprocess (``run_cli_process``).

Speed: temporary files go to ``/dev/shm`` when TMPDIR is unset and it is a writable tmpfs (replaying a
recording writes a few thousand small files; on a journaled disk that is most of the suite's system
time), and in-process CLI runs share the per-process cache of extracted recordings
(``topodoc.probe.record``). Every command keeps at least one real subprocess test.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NVML_TAPES = REPO / "fixtures" / "probe" / "nvml"
SHM = "/dev/shm"

if "TMPDIR" not in os.environ and os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK):
    os.environ["TMPDIR"] = SHM  # inherited by the subprocess CLI runs too
    tempfile.tempdir = None  # recomputed from TMPDIR on next use

# The per-user replay cache (topodoc.probe.replaycache) of this test session: a fresh folder, inherited by
# the subprocess CLI runs, so tests never read or fill the developer's ~/.cache and start cold.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="topodoc-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)


@dataclass(frozen=True)
class CliResult:
    """What a test reads from a CLI run, spelled like ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str | bytes
    stderr: str | bytes


def run_cli(*args: str, input: str | bytes | None = None, env: dict | None = None, text: bool = True):
    """``python -m topodoc ARGS`` in this process through click's CliRunner: the same exit code, stdout
    and stderr; a bug inside a command is, as in a real run, ``topodoc: internal error: ...`` and exit 2
    (set TOPODOC_DEBUG=1 to see its traceback on stderr)."""
    from click.testing import CliRunner

    from topodoc.cli import main

    runner = CliRunner()
    result = runner.invoke(main, list(args), input=input, env=env, catch_exceptions=False,
                           prog_name="python -m topodoc")
    if text:
        return CliResult(result.exit_code, result.stdout, result.stderr)
    return CliResult(result.exit_code, result.stdout_bytes, result.stderr_bytes)


def run_cli_process(*args: str, input=None, env: dict | None = None, text: bool = True, timeout: float = 120):
    """``python -m topodoc ARGS`` as a real subprocess."""
    return subprocess.run([sys.executable, "-m", "topodoc", *args], input=input, capture_output=True,
                          text=text, env=env, timeout=timeout, check=False)


def make_tree(root: Path, files: dict[str, str | bytes], links: dict[str, str] | None = None) -> Path:
    """Write ``files`` (machine path -> content) and ``links`` (machine path -> target) under ``root``."""
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    for path, target in (links or {}).items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    return root


def load_tape(name: str) -> dict:
    return json.loads((NVML_TAPES / f"{name}.json").read_text())


@pytest.fixture
def tree(tmp_path):
    """``tree(files, links)`` -> a root directory holding them."""
    return lambda files, links=None: make_tree(tmp_path / "root", files, links)


SECRETS = {
    "hostname": "gpu-node-0417",
    "mac": "b8:ce:f6:1a:2b:3c",
    "ipv4": "10.42.7.19",
    "gid": "fe80:0000:0000:0000:bace:f6ff:fe1a:2b3c",
    "guid": "b8ce:f603:001a:2b3c",
    "boot_id": "7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
    "serial": "1653223061234",
    "uuid": "GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0",
}


def gpu_box() -> tuple[dict[str, str], dict[str, str]]:
    """A small machine: root port > PLX switch (up, down) > H100 and a ConnectX-7 (IB + RoCE GIDs)."""
    s = SECRETS
    chain = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0"
    gpu, nic, ib = f"{chain}/0000:1a:00.0", f"{chain}/0000:18:00.0", "/sys/class/infiniband/mlx5_0"
    files = {
        "/proc/sys/kernel/hostname": s["hostname"] + "\n",
        "/proc/sys/kernel/osrelease": "5.15.0-105-generic\n",
        "/proc/cmdline": f"BOOT_IMAGE=/vmlinuz ro iommu=pt ip={s['ipv4']}::10.42.7.1:255.255.255.0\n",
        "/proc/cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon 8480C\n"
        "physical id\t: 0\nflags\t\t: fpu sse\n",
        "/proc/sys/kernel/random/boot_id": s["boot_id"] + "\n",
        "/proc/self/status": "Cpus_allowed_list:\t0-3\n",
        "/sys/devices/system/node/node0/cpulist": "0-3\n",
        "/sys/devices/system/node/node0/distance": "10\n",
        "/sys/devices/system/node/node0/meminfo": "Node 0 MemTotal:       16384000 kB\n",
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  "
        "Release Build  (dvs-builder@U16-I3-B13-4-3)  Tue Mar  5 22:15:33 UTC 2024\n",
        "/sys/module/nvidia_peermem/version": "550.54.15\n",
        f"{ib}/node_guid": s["guid"] + "\n",
        f"{ib}/fw_ver": "28.39.1002\n",
        f"{ib}/hca_type": "MT4129\n",
        f"{ib}/ports/1/state": "4: ACTIVE\n",
        f"{ib}/ports/1/phys_state": "5: LinkUp\n",
        f"{ib}/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        f"{ib}/ports/1/link_layer": "InfiniBand\n",
        f"{ib}/ports/1/gids/0": s["gid"] + "\n",
        f"{ib}/ports/1/gids/1": "0000:0000:0000:0000:0000:0000:0000:0000\n",
        f"{ib}/ports/1/gids/2": "0000:0000:0000:0000:0000:ffff:0a2a:0713\n",
        f"{ib}/ports/1/gid_attrs/types/0": "IB/RoCE v1\n",
        f"{ib}/ports/1/gid_attrs/types/2": "RoCE v2\n",
        f"{nic}/net/ib0/address": f"00:00:10:87:fe:80:00:00:00:00:00:00:{s['mac']}:00:00\n".replace(
            f"{s['mac']}:00:00", "b8:ce:f6:03:00:1a:2b:3c"
        ),
        f"{nic}/net/ib0/operstate": "up\n",
        f"{nic}/net/ib0/mtu": "4092\n",
        f"{nic}/net/ib0/speed": "400000\n",
        "/sys/devices/virtual/net/eth9/address": s["mac"] + "\n",
        "/sys/devices/virtual/net/eth9/operstate": "up\n",
        "/sys/devices/virtual/net/eth9/mtu": "1500\n",
    }
    for _bdf, path, cls, vendor, device, speed in [
        (
            "0000:15:01.0",
            "/sys/devices/pci0000:15/0000:15:01.0",
            "0x060400",
            "0x8086",
            "0x352a",
            "32.0 GT/s PCIe",
        ),
        (
            "0000:16:00.0",
            "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0",
            "0x060400",
            "0x10b5",
            "0xc030",
            "32.0 GT/s PCIe",
        ),
        ("0000:17:00.0", chain, "0x060400", "0x10b5", "0xc030", "32.0 GT/s PCIe"),
        ("0000:1a:00.0", gpu, "0x030200", "0x10de", "0x2330", "16.0 GT/s PCIe"),
        ("0000:18:00.0", nic, "0x020700", "0x15b3", "0x1021", "32.0 GT/s PCIe"),
    ]:
        for attr, value in [
            ("class", cls),
            ("vendor", vendor),
            ("device", device),
            ("numa_node", "0"),
            ("local_cpulist", "0-3"),
            ("current_link_speed", speed),
            ("current_link_width", "16"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("max_link_width", "16"),
        ]:
            files[f"{path}/{attr}"] = value + "\n"
    links = {
        f"/sys/bus/pci/devices/{b}": "../../.." + p
        for b, p in [
            ("0000:15:01.0", "/devices/pci0000:15/0000:15:01.0"),
            ("0000:16:00.0", "/devices/pci0000:15/0000:15:01.0/0000:16:00.0"),
            ("0000:17:00.0", chain.removeprefix("/sys")),
            ("0000:1a:00.0", gpu.removeprefix("/sys")),
            ("0000:18:00.0", nic.removeprefix("/sys")),
        ]
    }
    links[f"{ib}/device"] = "../../.." + nic.removeprefix("/sys")
    links["/sys/class/net/ib0"] = (
        "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/net/ib0"
    )
    links[f"{nic}/net/ib0/device"] = "../../../0000:18:00.0"
    links["/sys/class/net/eth9"] = "../../devices/virtual/net/eth9"
    links[f"{gpu}/driver"] = "../../../../../../bus/pci/drivers/nvidia"
    links[f"{nic}/driver"] = "../../../../../../bus/pci/drivers/mlx5_core"
    return files, links
