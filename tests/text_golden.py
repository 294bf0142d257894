"""Rewrite (or check, with --check) the goldens of fixtures/text: each input's kind, parse and damage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "text"


def inputs() -> list[Path]:
    return sorted(p for p in ROOT.glob("*/*") if p.suffix in (".txt", ".xml") and p.parent.name != "cases")


def golden(path: Path) -> dict:
    from topodoc.codec import to_data
    from topodoc.text.inputs import read_input

    item = read_input(str(path))
    return {
        "kind": item.kind,
        "also": list(item.also),
        "error": item.error,
        "damaged": list(item.damaged),
        "parsed": to_data(item.parsed),
    }


def main(check: bool) -> int:
    sys.path.insert(0, str(ROOT.parent.parent))
    stale = 0
    for path in inputs():
        out = path.with_suffix(".json")
        text = json.dumps(golden(path), indent=1, sort_keys=True) + "\n"
        if check:
            stale += not out.exists() or out.read_text() != text
        else:
            out.write_text(text)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main("--check" in sys.argv))
