"""Kernel-log findings in ``diagnose FILE...`` from text inputs only: Xid / AER / IOMMU events
(fixtures/kernel_log, real excerpts, sources in its README) and the joined finding "an Xid on the GPU whose
rank failed" (the Xid's PCI address vs the busId NCCL printed for a rank that logged an error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "fixtures" / "kernel_log"
NCCL = ROOT / "fixtures" / "logs" / "ib-loc-prot-err4-vendor81.log"  # rank 9, busId 2a000, then a WARN


def diagnose(*paths: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "topodoc", "diagnose", *map(str, paths), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def rules(data: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for finding in data["findings"]:
        out.setdefault(finding["rule"], []).append(finding)
    return out


def test_xid_lines_become_findings_with_the_catalogue_action():
    found = rules(diagnose(KERNEL / "xid-48-64-syslog.log"))
    xids = {f["message"].split(" ", 2)[1] for f in found["kernel-xid"]}
    assert {"48", "64"} <= xids
    assert all(f["fix"] for f in found["kernel-xid"])


def test_aer_and_dmar_lines_become_findings():
    assert "kernel-pcie-iommu-events" in rules(diagnose(KERNEL / "aer-uncorrectable-nonfatal-journalctl.log"))
    assert "kernel-pcie-iommu-events" in rules(diagnose(KERNEL / "dmar-fault.log"))


def _xid_on(tmp_path: Path, address: str) -> Path:
    """The real Xid 109 line of fixtures/kernel_log/xid-13-109-dmesg-ctime.log (leptonai/gpud#46), its PCI
    address rewritten to ``address`` so that the two real excerpts describe one machine."""
    line = (KERNEL / "xid-13-109-dmesg-ctime.log").read_text().splitlines()[4]
    assert "Xid (PCI:0000:cb:00): 109" in line
    path = tmp_path / "dmesg.txt"
    path.write_text(line.replace("PCI:0000:cb:00", f"PCI:{address}") + "\n")
    return path


def test_xid_on_the_gpu_of_the_failed_rank_is_joined(tmp_path):
    found = rules(diagnose(_xid_on(tmp_path, "0000:2a:00"), NCCL))
    (joined,) = found["xid-on-failed-rank-gpu"]
    assert joined["subject"] == "0000:2a:00.0" and "rank 9" in joined["message"]
    wheres = [e["where"] for e in joined["evidence"]]
    assert wheres[0].endswith("dmesg.txt:1") and wheres[1].endswith("ib-loc-prot-err4-vendor81.log:9")


def test_an_xid_on_another_gpu_is_not_joined(tmp_path):
    found = rules(diagnose(_xid_on(tmp_path, "0000:cb:00"), NCCL))
    assert "kernel-xid" in found and "xid-on-failed-rank-gpu" not in found
