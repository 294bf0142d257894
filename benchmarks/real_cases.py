"""Score ``topodoc diagnose`` on real threads whose cause is confirmed (``fixtures/cases/``).

    python benchmarks/real_cases.py [--cases DIR] [--json | --markdown] [--timeout S] [ID ...]

Each case directory holds the texts a user posted and a ``case.json`` (see ``fixtures/cases/README.md``).
For every case the installed CLI is run as a user would run it, ``topodoc diagnose FILE... --json`` (one
subprocess per case, a time limit each, no network, ``NCCL_*`` variables removed from its environment), and
the answer is scored against the thread's confirmed cause:

- ``refused``: exit 2 (no input recognized) or no JSON document came back;
- ``right-fix``: some finding names the cause: its rule id or a failure-catalogue signature it cites
  (``[failure catalogue: ID]``) is in ``expect.rules`` (counted apart as "by rule"), or one finding's text
  holds an area word and its message or fix holds a fix word ("by words": lenient, such a finding may list
  the cause among others);
- ``right-area``: no right fix, but some finding's text holds an area word;
- ``wrong``: findings at warning or above, none of them in the right area;
- ``silent``: nothing at warning or above and nothing in the right area.

Findings of ``nccl-benign-lines`` (lines declared "not a fault") never count as naming a cause. False
statements are counted per case, explicitly: a finding whose text holds a ``false_if`` phrase, and a
``nccl-benign-lines`` finding that declares benign a catalogue signature listed in ``expect.rules`` (it calls
the confirmed cause harmless). Files topodoc did not recognize (kind ``unknown``) are counted as unread.

The table lists one line per case and the totals by verdict and by family; ``--json`` prints the same as a
document. Deterministic: cases in name order, no clock or machine data in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "cases"
REQUIRED = ("id", "source", "class", "cause", "fix", "files", "expect")
EXPECT_KEYS = ("rules", "area_words", "fix_words")
VERDICTS = ("right-fix", "right-area", "wrong", "silent", "refused")
WARNING_UP = {"warning", "error", "critical"}
BENIGN_RULE = "nccl-benign-lines"
CATALOGUE_REF = re.compile(r"\[failure catalogue: ([A-Za-z0-9_.-]+)\]")


class CaseError(ValueError):
    """A case directory that does not follow the format of fixtures/cases/README.md."""


def load_case(case_dir: Path) -> dict:
    """``case.json`` of one case, checked: required keys, non-empty files that exist, expectations."""
    path = case_dir / "case.json"
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CaseError(f"{path}: {exc}") from exc
    missing = [k for k in REQUIRED if k not in case]
    if missing:
        raise CaseError(f"{path}: missing {', '.join(missing)}")
    if case["id"] != case_dir.name:
        raise CaseError(f"{path}: id {case['id']!r} differs from the directory name")
    if not str(case["source"]).startswith("https://"):
        raise CaseError(f"{path}: source is not a URL")
    if not case["files"]:
        raise CaseError(f"{path}: no files")
    for name in case["files"]:
        if not (case_dir / name).is_file():
            raise CaseError(f"{path}: file {name} does not exist")
    expect = case["expect"]
    for key in EXPECT_KEYS:
        if not isinstance(expect.get(key), list):
            raise CaseError(f"{path}: expect.{key} is not a list")
    if not expect["area_words"] or not expect["fix_words"]:
        raise CaseError(f"{path}: expect.area_words and expect.fix_words must not be empty")
    if not isinstance(case.get("false_if", []), list):
        raise CaseError(f"{path}: false_if is not a list")
    return case


def cli_command() -> list[str]:
    """The installed ``topodoc`` next to this interpreter, else ``python -m topodoc``."""
    here = Path(sys.executable).parent / "topodoc"
    if here.exists():
        return [str(here)]
    found = shutil.which("topodoc")
    return [found] if found else [sys.executable, "-m", "topodoc"]


def run_diagnose(files: list[Path], timeout: float) -> tuple[int | None, dict | None, str]:
    """(exit status, parsed --json document or None, one-line note)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["NO_COLOR"] = "1"
    cmd = [*cli_command(), "diagnose", *(str(f) for f in files), "--json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None, None, f"timed out after {timeout:g} s"
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return proc.returncode, None, tail[:200]
    return proc.returncode, doc, (doc.get("error") or "")[:200]


def _lower(*parts) -> str:
    return " ".join(str(p or "") for p in parts).lower()


def _has(words: list[str], text: str) -> list[str]:
    return [w for w in words if w.lower() in text]


def finding_ids(finding: dict) -> set[str]:
    return {finding.get("rule", "")} | set(CATALOGUE_REF.findall(str(finding.get("message", ""))))


def score(case: dict, rc: int | None, doc: dict | None) -> dict:
    """The verdict for one case from the CLI's answer (pure function, no I/O)."""
    expect = case["expect"]
    rules, area, fixw = set(expect["rules"]), expect["area_words"], expect["fix_words"]
    findings = (doc or {}).get("findings") or []
    files = ((doc or {}).get("inputs") or {}).get("files") or []
    unread = sum(1 for f in files if f.get("kind") == "unknown")
    out = {"findings": len(findings), "warning_up": 0, "unread_files": unread, "matched": [], "false": []}
    hits_fix, hits_area, via = [], [], set()
    for f in findings:
        text = _lower(f.get("title"), f.get("subject"), f.get("message"), f.get("fix"))
        ids = finding_ids(f)
        for phrase in case.get("false_if", []):
            if phrase.lower() in text:
                out["false"].append(f"{f.get('rule')}: says {phrase!r}")
        if f.get("rule") == BENIGN_RULE:
            for sig in sorted(ids & rules):
                out["false"].append(f"{BENIGN_RULE}: calls {sig} benign")
            continue
        if f.get("severity") in WARNING_UP:
            out["warning_up"] += 1
        named = sorted(ids & rules)
        a = _has(area, text)
        x = _has(fixw, _lower(f.get("message"), f.get("fix")))
        if named:
            hits_fix.append(f"{f.get('rule')} names {','.join(named)}")
            via.add("rule")
        elif a and x:
            hits_fix.append(f"{f.get('rule')}: area {a[0]!r}, fix {x[0]!r}")
            via.add("words")
        elif a:
            hits_area.append(f"{f.get('rule')}: area {a[0]!r}")
    if rc is None or doc is None or rc == 2:
        verdict = "refused"
    elif hits_fix:
        verdict = "right-fix"
    elif hits_area:
        verdict = "right-area"
    elif out["warning_up"]:
        verdict = "wrong"
    else:
        verdict = "silent"
    out["verdict"] = verdict
    out["matched"] = hits_fix or hits_area
    # how a right fix was recognized: a rule/signature id (strict) or only words (lenient: the finding may
    # list the cause among others)
    out["via"] = ("rule" if "rule" in via else "words") if verdict == "right-fix" else ""
    return out


def score_case(case_dir: Path, timeout: float = 60.0) -> dict:
    case = load_case(case_dir)
    rc, doc, note = run_diagnose([case_dir / n for n in case["files"]], timeout)
    result = score(case, rc, doc)
    result.update(id=case["id"], family=case["class"], rc=rc, note=note.replace(f"{case_dir}{os.sep}", ""),
                  seen_before=bool(case.get("source_in_project_before")))
    return result


def totals(results: list[dict]) -> dict:
    def count(rows):
        c = Counter(r["verdict"] for r in rows)
        return {v: c.get(v, 0) for v in VERDICTS} | {
            "cases": len(rows), "false_statements": sum(len(r["false"]) for r in rows),
            "cases_with_false": sum(1 for r in rows if r["false"]),
            "right_fix_by_rule": sum(1 for r in rows if r["via"] == "rule"),
            "unread_files": sum(r["unread_files"] for r in rows)}
    families = sorted({r["family"] for r in results})
    return {"all": count(results),
            "blind_subset": count([r for r in results if not r["seen_before"]]),
            "by_family": {fam: count([r for r in results if r["family"] == fam]) for fam in families}}


def _table(results: list[dict], tot: dict, markdown: bool) -> str:
    lines = []
    head = ("case", "family", "verdict", "false", "w+", "unread", "why")
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        why = "; ".join(r["matched"][:2]) or (r["note"] or "")[:100]
        if r["false"]:
            why += (" | FALSE: " if why else "FALSE: ") + "; ".join(r["false"][:2])
        cells = (r["id"], r["family"], r["verdict"], str(len(r["false"])), str(r["warning_up"]),
                 str(r["unread_files"]), why)
        if markdown:
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        else:
            lines.append(f"{cells[0]:<48} {cells[1]:<20} {cells[2]:<10} {cells[3]:>2} {cells[4]:>3} "
                         f"{cells[5]:>2}  {why}")
    lines.append("")

    def line(name, t):
        body = ", ".join(f"{v} {t[v]}" for v in VERDICTS)
        return (f"{name}: {t['cases']} cases: {body} (right-fix by rule/signature id "
                f"{t['right_fix_by_rule']}, by words only {t['right-fix'] - t['right_fix_by_rule']}); "
                f"false statements {t['false_statements']} "
                f"(in {t['cases_with_false']} cases); unread files {t['unread_files']}")
    lines.append(line("ALL", tot["all"]))
    lines.append(line("URL not in repo before (blind subset)", tot["blind_subset"]))
    lines.append("")
    if markdown:
        lines += ["| family | cases | right-fix | right-area | wrong | silent | refused | false |",
                  "|---|---|---|---|---|---|---|---|"]
    for fam, t in tot["by_family"].items():
        row = (fam, t["cases"], t["right-fix"], t["right-area"], t["wrong"], t["silent"], t["refused"],
               t["false_statements"])
        if markdown:
            lines.append("| " + " | ".join(map(str, row)) + " |")
        else:
            lines.append(f"  {fam:<22} {t['cases']:>2} cases: fix {t['right-fix']}, area {t['right-area']}, "
                         f"wrong {t['wrong']}, silent {t['silent']}, refused {t['refused']}, "
                         f"false {t['false_statements']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*", help="only these case ids")
    ap.add_argument("--cases", type=Path, default=DEFAULT_DIR, help="directory of case directories")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (default 60)")
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the per-case verdicts and totals as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = ap.parse_args(argv)
    if not args.cases.is_dir():
        print(f"real_cases: {args.cases}: not a directory", file=sys.stderr)
        return 2
    dirs = sorted(p for p in args.cases.iterdir() if (p / "case.json").is_file())
    if args.ids:
        dirs = [d for d in dirs if d.name in set(args.ids)]
    if not dirs:
        print(f"real_cases: no case under {args.cases}", file=sys.stderr)
        return 2
    try:
        results = [score_case(d, args.timeout) for d in dirs]
    except CaseError as exc:
        print(f"real_cases: {exc}", file=sys.stderr)
        return 2
    tot = totals(results)
    if args.json:
        print(json.dumps({"cases": results, "totals": tot}, indent=2))
    else:
        print(_table(results, tot, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
