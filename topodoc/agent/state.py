"""Findings across cycles: each is new, still open, or resolved, with first-seen and last-seen times.

A finding's identity is ``(scope, rule, subject)`` — ``scope`` is ``"host"`` for the hardware cycle or
the watched log file's path. Resolved findings are kept for :data:`KEEP_RESOLVED` seconds (bounded
memory), so ``/findings`` and the metrics can show what just cleared.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

KEEP_RESOLVED = 3600.0
MAX_TRACKED = 5000


@dataclass(frozen=True)
class Tracked:
    scope: str
    rule: str
    subject: str
    severity: str
    message: str
    status: str  # "new" (first cycle it appears), "open", "resolved"
    first_seen: float
    last_seen: float
    resolved_at: float | None = None


class FindingTracker:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], Tracked] = {}
        self._lock = threading.Lock()

    def update(self, scope: str, findings, now: float) -> None:
        """Record this cycle's ``findings`` (engine ``Finding`` objects) for ``scope``."""
        seen = set()
        with self._lock:
            for f in findings:
                key = (scope, f.rule, f.subject)
                seen.add(key)
                old = self._items.get(key)
                if old is None or old.status == "resolved":
                    if len(self._items) < MAX_TRACKED:
                        self._items[key] = Tracked(scope, f.rule, f.subject, f.severity.value, f.message,
                                                   "new", now, now)
                else:
                    self._items[key] = replace(old, status="open", last_seen=now, severity=f.severity.value,
                                               message=f.message)
            for key, item in list(self._items.items()):
                if key[0] != scope or key in seen:
                    continue
                if item.status != "resolved":
                    self._items[key] = replace(item, status="resolved", resolved_at=now)
                elif now - (item.resolved_at or now) > KEEP_RESOLVED:
                    del self._items[key]

    def items(self) -> list[Tracked]:
        with self._lock:
            return sorted(self._items.values(), key=lambda t: (t.scope, t.rule, t.subject))

    def forget(self, scope: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == scope]:
                del self._items[key]
