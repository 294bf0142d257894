"""Known bugs and compatibility limits by release (``known_bugs.toml`` next to this module), and the
release arithmetic that matches them: a printed version, or the range of releases a host's message
wordings fit. Each record cites its sources; the rule ``nccl-known-bug`` reads them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "known_bugs.toml"
COMPONENTS = ("nccl", "aws-ofi-nccl")
PLUGIN_STATUSES = ("failed", "passed_over")

Release = tuple[int, int, int]


@dataclass(frozen=True)
class KnownBug:
    id: str
    component: str
    title: str
    explanation: str
    settle: str
    fix: str
    sources: tuple[str, ...]
    first: str | None = None  # first affected release (inclusive); None: every earlier release
    fixed: str | None = None  # first release without it; None: no fixed release known
    symptom_signatures: tuple[str, ...] = ()
    symptom_text: str | None = None
    cuda_driver_min: int | None = None  # 12060 == 12.6
    requires_nccl: str | None = None  # aws-ofi-nccl rows: the oldest NCCL the plugin release supports
    plugin_status: tuple[str, ...] = ()

    def affects(self, version: str | None) -> bool:
        """Whether the printed release ``version`` lies in ``first`` .. before ``fixed``."""
        found = release(version)
        return found is not None and self._inside(found, found)

    def affects_range(self, low: str | None, high: str | None) -> bool:
        """Whether every release from ``low`` to ``high`` ("major.minor", each minor taken whole) is
        affected: a range told by message wordings, when no version is printed. Open ends never match."""
        lo, hi = release(low), release(high)
        if lo is None or hi is None:
            return False
        return self._inside(lo, (hi[0], hi[1], 1 << 30) if (high or "").count(".") == 1 else hi)

    def _inside(self, lo: Release, hi: Release) -> bool:
        first, fixed = release(self.first), release(self.fixed)
        return (first is None or lo >= first) and (fixed is None or hi < fixed)


def release(text: str | None) -> Release | None:
    """``"2.20.3+cuda12.2"`` -> (2, 20, 3); ``"1.9.1-aws"`` -> (1, 9, 1); ``"2.20"`` -> (2, 20, 0)."""
    if not text:
        return None
    head = text.strip().lstrip("v").split("+", 1)[0].split("-", 1)[0]
    parts = head.split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and len(p) <= 6 for p in parts):
        return None
    major, minor, *patch = (int(p) for p in parts)
    return (major, minor, patch[0] if patch else 0)


@lru_cache(maxsize=1)
def known_bugs() -> tuple[KnownBug, ...]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    rows = []
    for raw in data.get("bug", ()):
        row = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        bug = KnownBug(**row)
        _check(bug)
        rows.append(bug)
    return tuple(rows)


def _check(bug: KnownBug) -> None:
    if bug.component not in COMPONENTS:
        raise ValueError(f"{bug.id}: unknown component {bug.component!r}")
    if not bug.sources or not all(s.startswith("https://") for s in bug.sources):
        raise ValueError(f"{bug.id}: every row cites its sources (https URLs)")
    for name in ("first", "fixed", "requires_nccl"):
        value = getattr(bug, name)
        if value is not None and release(value) is None:
            raise ValueError(f"{bug.id}: {name} {value!r} is no release")
    if not set(bug.plugin_status) <= set(PLUGIN_STATUSES):
        raise ValueError(f"{bug.id}: plugin_status {bug.plugin_status}")
    if not bug.symptom_signatures and not bug.plugin_status:
        raise ValueError(f"{bug.id}: a row needs a symptom")
