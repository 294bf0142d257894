"""Rewrite or check every golden family, one line per changed file.

    python -m tools.goldens [FAMILY|all] [--check]

Families: ``hosts`` (recordings and expected-* beside them: tools/fixtures/hosts/regen.py), ``rules``
(fixtures/rules/<rule-id>/*.json: tools/fixtures/rules/build.py), ``tapes`` (fixtures/probe/nvml/*.json:
tools/fixtures/probe/make_tapes.py), ``logs`` (fixtures/logs/<case>.json: tests/nccl_log_golden.py).
``--check`` writes nothing and exits 1 when a file is stale. Fixture data lives in fixtures/; the tools
that write it live here and are not shipped in the wheel.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ("hosts", "rules", "tapes", "logs")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_golden_tool", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT))
    spec.loader.exec_module(module)
    return module


def _rules() -> dict[Path, str]:
    return _load(ROOT / "tools" / "fixtures" / "rules" / "build.py").outputs()


def _tapes() -> dict[Path, str]:
    return _load(ROOT / "tools" / "fixtures" / "probe" / "make_tapes.py").outputs()


def _logs() -> dict[Path, str]:
    golden = _load(ROOT / "tests" / "nccl_log_golden.py")
    logs = [p for p in sorted(golden.FIXTURES.glob("*.log")) if not p.name.startswith("not_nccl")]
    return {p.with_suffix(".json"): json.dumps(golden.golden_view(p), indent=1) + "\n" for p in logs}


OUTPUTS: dict[str, Callable[[], dict[Path, str]]] = {"rules": _rules, "tapes": _tapes, "logs": _logs}


def sync(family: str, check: bool) -> list[str]:
    """One line per file of ``family`` whose content changes (written unless ``check``)."""
    lines = []
    for path, text in OUTPUTS[family]().items():
        current = path.read_text() if path.is_file() else None
        if current == text:
            continue
        lines.append(f"{family}: {path.relative_to(ROOT)}: {'new' if current is None else 'changed'}")
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return lines


def hosts(check: bool) -> tuple[int, list[str]]:
    argv = [sys.executable, str(ROOT / "tools" / "fixtures" / "hosts" / "regen.py")] + (["--check"] * check)
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    lines = [f"hosts: {line}" for line in done.stdout.splitlines() if line and "up to date" not in line
             and not line.endswith(("stale", "updated"))]
    return done.returncode, lines + [f"hosts: {line}" for line in done.stderr.splitlines()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.goldens", description=__doc__.splitlines()[0])
    parser.add_argument("family", nargs="?", default="all", choices=(*FAMILIES, "all"))
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    args = parser.parse_args(argv)
    stale, failed = 0, 0
    for family in FAMILIES if args.family == "all" else (args.family,):
        if family == "hosts":
            code, lines = hosts(args.check)
            failed += code not in (0, 1)
        else:
            lines = sync(family, args.check)
        stale += len(lines)
        for line in lines:
            print(line)
    done = "stale" if args.check else "rewritten"
    print(f"{stale} file(s) {done}" if stale else "every golden is up to date")
    return 2 if failed else (1 if args.check and stale else 0)


if __name__ == "__main__":
    sys.exit(main())
