"""Version knowledge: a known bug of the NCCL (or net plugin) release in use, matched against the symptom
the log shows (:mod:`topodoc.catalogue.known_bugs`). A finding needs both: the release (printed, or every
release a host's message wordings fit) inside the affected range, and the symptom line. The symptom's other
causes stay open; the finding says which outputs tell them apart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from topodoc.rules.common import kept_lines, log_line
from topodoc.rules.engine import Evidence, Hit, Rule, rule

if TYPE_CHECKING:  # annotations only: diagnose without logs never loads the log model or the catalogue
    from topodoc.catalogue.known_bugs import KnownBug
    from topodoc.logmodel import LogAnalysis, LogError, PluginInfo


def _span(bug: KnownBug) -> str:
    if bug.first and bug.fixed:
        return f"{bug.first} up to (not including) {bug.fixed}"
    if bug.fixed:
        return f"releases before {bug.fixed}"
    return f"{bug.first} and later (no fixed release known)"


def _symptoms(logs: LogAnalysis, bug: KnownBug) -> list[LogError]:
    wanted = set(bug.symptom_signatures)
    return [err for err in (*logs.errors, *logs.benign) if err.signature in wanted
            and (bug.symptom_text is None or bug.symptom_text in err.text)]


def _release_shown(logs: LogAnalysis, bug: KnownBug) -> tuple[str, tuple[Evidence, ...]] | None:
    """How the log puts this NCCL inside the bug's releases, and the lines: the printed version(s), else
    the range every host's message wordings fit. ``None`` when it does not (or cannot tell)."""
    printed = sorted(set(logs.summary.nccl_versions) | {v for v in (logs.summary.nccl_version,) if v})
    if printed:
        hit = [v for v in printed if bug.affects(v)]
        if not hit:
            return None
        lines = logs.summary.evidence.get("nccl_versions") or logs.summary.evidence.get("nccl_version") or ()
        return f"NCCL {', '.join(hit)} (printed)", kept_lines(lines, 1)
    rows = [row for row in logs.host_versions if row.first or row.last]
    if not rows or not all(bug.affects_range(row.first, row.last) for row in rows):
        return None
    spans = sorted({f"{row.first}-{row.last}" for row in rows})
    lines = tuple(log_line(ev) for row in rows[:1] for ev in row.evidence[:1])
    return f"NCCL {', '.join(spans)} (no version printed; the range its message wordings fit)", lines


def _driver_note(logs: LogAnalysis, bug: KnownBug) -> str | None:
    """'' when the CUDA driver condition holds or there is none, a note when it is not printed, None when
    the printed driver is older than the bug needs."""
    if bug.cuda_driver_min is None:
        return ""
    driver = logs.summary.cuda_driver_version
    need = f"{bug.cuda_driver_min // 1000}.{bug.cuda_driver_min % 1000 // 10}"
    if driver is None:
        return f" The bug needs a CUDA driver {need} or newer, which the log does not print."
    return "" if driver >= bug.cuda_driver_min else None


def _nccl_hit(logs: LogAnalysis, bug: KnownBug) -> Hit | None:
    symptoms = _symptoms(logs, bug)
    shown = _release_shown(logs, bug) if symptoms else None
    note = _driver_note(logs, bug) if shown else None
    if shown is None or note is None:
        return None
    which, lines = shown
    first = symptoms[0]
    message = (f"{which} is among the releases with a known bug ({_span(bug)}), and "
               f"{first.file}:{first.line} shows its symptom [failure catalogue: {first.signature}]. "
               f"{bug.explanation}{note} What settles it, in order: {bug.settle} "
               f"[known bug {bug.id}: {'; '.join(bug.sources)}]")
    return Hit("job", f"{bug.title}: {message}", (log_line(first), *lines), fix=bug.fix,
               confidence=0.5 if note else 0.8)


def _plugin_hit(logs: LogAnalysis, bug: KnownBug) -> Iterator[Hit]:
    from topodoc.catalogue.known_bugs import release

    nccl = release(logs.summary.nccl_version)
    need = release(bug.requires_nccl)
    if nccl is None or need is None or nccl >= need:
        return
    for plugin in logs.plugins:
        if plugin.name != bug.component or not bug.affects(plugin.version):
            continue
        status = _status(plugin)
        if status not in bug.plugin_status:
            continue
        lines = tuple(log_line(ev) for ev in (plugin.evidence, plugin.failure) if ev is not None)
        lines += kept_lines(logs.summary.evidence.get("nccl_version", ()), 1)
        what = "failed to initialize" if status == "failed" else "loaded but NCCL did not use it"
        yield Hit("job", f"{bug.title}: {plugin.name} {plugin.version} {what} with NCCL "
                  f"{logs.summary.nccl_version}, older than the {bug.requires_nccl} this plugin release "
                  f"supports. {bug.explanation} What settles it, in order: {bug.settle} "
                  f"[known bug {bug.id}: {'; '.join(bug.sources)}]", lines, fix=bug.fix, confidence=0.8)


def _status(plugin: PluginInfo) -> str:
    if plugin.status == "failed":
        return "failed"
    return "passed_over" if plugin.status == "loaded" and plugin.selected is False else plugin.status


@rule(
    "nccl-known-bug", "warning", ("nccl", "version", "catalogue", "log"),
    title="A known bug of the NCCL (or net plugin) release in use, and the symptom it causes",
    fix="upgrade past the release that fixed it, or apply the workaround the finding names",
)
def nccl_known_bug(logs: LogAnalysis) -> Iterator[Hit]:
    from topodoc.catalogue.known_bugs import known_bugs  # the table is read only when a log is judged

    for bug in known_bugs():
        if bug.component == "nccl":
            hit = _nccl_hit(logs, bug)
            if hit is not None:
                yield hit
        else:
            yield from _plugin_hit(logs, bug)


RULES: tuple[Rule, ...] = (nccl_known_bug,)
