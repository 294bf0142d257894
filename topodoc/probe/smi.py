"""``nvidia-smi topo -m`` through the runner, parsed by the foundation's topo-matrix parser and kept
beside the probe's own view.

Runs: ``nvidia-smi topo -m`` (timeout :data:`TIMEOUT_S`; a hung nvidia-smi is cut there, a missing
binary is a MISSING gap). Parses with ``topodoc.parsers.smi_topo.parse`` (imported when needed).
"""

from __future__ import annotations

from topodoc.model import ConnectionMatrix, Gap, GapReason

ARGV = ["nvidia-smi", "topo", "-m"]
TIMEOUT_S = 20.0
WHAT = "nvidia-smi topo -m"


def collect_smi_topo(runner, gaps: list[Gap]) -> ConnectionMatrix | None:
    result = runner.run(list(ARGV), TIMEOUT_S)
    if result.missing:
        if result.stderr == "not recorded":
            gaps.append(
                Gap(
                    what=WHAT,
                    reason=GapReason.NOT_RECORDED,
                    source="command",
                    detail="the recording holds no nvidia-smi output",
                )
            )
        else:
            gaps.append(
                Gap(
                    what=WHAT,
                    reason=GapReason.MISSING,
                    source="command",
                    detail="nvidia-smi is not installed",
                )
            )
        return None
    if result.timed_out:
        note = result.stderr.strip()
        detail = note if note.startswith("[topodoc:") else f"no answer within {TIMEOUT_S:g} s (killed)"
        gaps.append(Gap(what=WHAT, reason=GapReason.ERROR, source="command", detail=detail))
        return None
    if result.truncated:
        gaps.append(
            Gap(
                what=WHAT,
                reason=GapReason.ERROR,
                source="command",
                detail="output without end: cut and stopped at the cap",
            )
        )
        return None
    if result.returncode != 0:
        detail = " ".join((result.stderr or result.stdout).strip().splitlines()[:1])[:200]
        gaps.append(Gap(what=WHAT, reason=GapReason.ERROR, source="command",
                        detail=f"exit {result.returncode}: {detail}"))
        return None
    return _parse(result.stdout, gaps)


def _parse(text: str, gaps: list[Gap]) -> ConnectionMatrix | None:
    try:
        from topodoc.parsers.smi_topo import SmiTopoParseError, parse
    except ImportError:
        gaps.append(
            Gap(
                what=WHAT,
                reason=GapReason.ERROR,
                source="command",
                detail="the topo -m parser is not available",
            )
        )
        return None
    try:
        return parse(text)
    except SmiTopoParseError as err:
        gaps.append(Gap(what=WHAT, reason=GapReason.ERROR, source="command",
                        detail=f"unparseable output: {err}"))
        return None
