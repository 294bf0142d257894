"""Issue 21: a pasted ``nvidia-smi topo -m`` (or a topology XML) alone gets no finding that contradicts it and
no evidence citing a source that was not given.

Every real and constructed matrix in ``fixtures/topo`` (the NVLink machines of issue 21 among them: DGX-1,
DGX-2, DGX/HGX A100, H100, H200, H20, B200, B300, GB200 trays, bridged pairs; sources in its README) and
every topology XML in ``fixtures/text`` goes through the one diagnosis pipeline, and each finding is checked
against the paste's own cells.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from topodoc.diagnosis import DiagnosisError, Request, run
from topodoc.parsers.smi_topo import SmiTopoParseError, parse

ROOT = Path(__file__).resolve().parent.parent
TOPO = sorted((ROOT / "fixtures" / "topo").glob("*.txt"))
XML = sorted((ROOT / "fixtures" / "text" / "hwloc-xml").glob("*.xml")) + sorted(
    (ROOT / "fixtures" / "text" / "nccl-topo-xml").glob("*.xml"))
MACHINE_SOURCES = {"sysfs", "procfs", "nvml", "command"}  # what a probe reads; a paste is none of them
CELL_EVIDENCE = re.compile(r":\d+ (?P<row>\S+)/(?P<col>\S+)$")


def _matrix(path: Path):
    try:
        return parse(path.read_text(encoding="utf-8", errors="replace"))
    except SmiTopoParseError:
        return None


def _cells(matrix) -> dict[tuple[str, str], str]:
    out = {}
    for row, cells in matrix.links.items():
        for col, cell in cells.items():
            out.setdefault((row, col), cell)
            out.setdefault((col, row), cell)
    return out


def _names(matrix) -> dict[str, str]:
    """Device names the findings use (GPU0, mlx5_0, NIC3) -> matrix column."""
    names = {g.name: g.name for g in matrix.gpus}
    for nic in matrix.nics:
        names[nic.name] = nic.name
        if nic.device:
            names.setdefault(nic.device, nic.name)
    return names


@pytest.mark.parametrize("path", TOPO + XML, ids=lambda p: p.stem)
def test_a_paste_alone_gets_no_claim_beyond_it(path: Path) -> None:
    try:
        result = run(Request(files=(str(path),)))
    except DiagnosisError as err:  # an excerpt that cannot be read is one clear line, never a claim
        assert "\n" not in str(err) and str(path) in str(err)  # one file: one line
        return
    report = result.report
    assert not report.errors
    rules = {f.rule for f in report.findings}
    # one source cannot disagree with itself
    assert "smi-matrix-disagrees" not in rules
    for finding in report.findings:
        for ev in finding.evidence:
            assert ev.source not in MACHINE_SOURCES, (finding.rule, ev)
    matrix = _matrix(path) if path.suffix == ".txt" else None
    if matrix is None or matrix.kind != "topo":
        return
    cells, names = _cells(matrix), _names(matrix)
    printed_numa = {g.numa_affinity for g in matrix.gpus if g.numa_affinity}
    for finding in report.findings:
        for ev in finding.evidence:
            m = CELL_EVIDENCE.search(ev.where)
            if m and ev.source != "log":
                assert cells.get((m["row"], m["col"])) == ev.value, (finding.rule, ev)
        if finding.rule == "gpu-p2p-via-cpu":
            for a, b in re.findall(r"(GPU\d+)-(GPU\d+)", finding.subject):
                assert not cells.get((a, b), "").startswith("NV"), (a, b, "is NVLink in the paste")
        if finding.rule in ("gpu-nic-far", "gpu-nic-numa-mismatch", "rail-mismatch"):
            for gpu, nic in re.findall(r"(GPU\d+)->(\S+?)(?:,|$)", finding.subject):
                assert (gpu, names.get(nic, nic)) in cells, (finding.rule, gpu, nic, "not printed")
        for node in re.findall(r"\bnode (\d+)", finding.message):
            assert any(node in re.split(r"[-,]", n) for n in printed_numa), (finding.rule, node)


def test_nvlink_pastes_are_read_as_nvlink() -> None:
    """The false faults of issue 21, on the machines that drew them: NV12 / NV18 pairs through the CPU."""
    for name in ("dgx-a100-nv12-mlx5", "hgx-h100-nv18-prompt-and-log", "ansi-h200-nv18-4nic",
                 "gb200-tray-4gpu-gpu-numa-id", "sglang-check-env-h20-bonds"):
        result = run(Request(files=(str(ROOT / "fixtures" / "topo" / f"{name}.txt"),)))
        assert "gpu-p2p-via-cpu" not in {f.rule for f in result.report.findings}, name
        conn = result.topology.connection("GPU0", "GPU1")
        assert conn.smi.startswith("NV") and conn.nccl == "NVL", (name, conn.smi, conn.nccl)


def test_a_cut_paste_leaves_unprinted_pairs_unknown() -> None:
    path = ROOT / "fixtures" / "topo" / "truncated-8xh100-cut-mid-row.txt"
    result = run(Request(files=(str(path),)))
    matrix = _matrix(path)
    cells = _cells(matrix)
    for conn in result.topology.gpu_nic:
        if conn.a in ("GPU6", "GPU7"):
            printed = any(key[0] == conn.a for key in cells if key[1].startswith("NIC"))
            assert printed or conn.smi == "N/A", conn


PASTES = sorted(
    p for p in (ROOT / "fixtures" / "text").rglob("*")
    if p.is_file() and p.suffix not in (".json", ".md") and p.name != "README"
) + sorted((ROOT / "fixtures" / "rules").glob("*/*.paste"))
CASES = sorted(p for p in (ROOT / "fixtures" / "cases").iterdir() if p.is_dir())


@pytest.mark.parametrize("paths", [(p,) for p in PASTES] + [tuple(sorted(
    f for f in case.iterdir() if f.name != "case.json")) for case in CASES],
    ids=lambda ps: ps[0].parent.name + "/" + ps[0].name)
def test_no_paste_is_cited_as_a_machine_source(paths) -> None:
    """Every real paste in the fixtures (text goldens, rule cases, the real-case threads), alone: evidence
    cites the paste's lines or the inputs, never sysfs, NVML, procfs or a command this machine ran."""
    try:
        report = run(Request(files=tuple(str(p) for p in paths))).report
    except DiagnosisError:
        return
    assert not report.errors, report.errors
    cited = [(f.rule, e.source, e.where) for f in report.findings for e in f.evidence
             if e.source in MACHINE_SOURCES]
    assert not cited, cited
