"""Lists of NCCL / libfabric / UCX settings as people paste them: ``env | grep NCCL``, ``export NCCL_X=...``
lines of a job script, launcher flags (``-x NCCL_X=1``, ``-e NCCL_X=1``, ``--env NCCL_X=1``), Dockerfile
``ENV`` lines, Kubernetes ``- name: NCCL_X`` / ``value: "1"`` pairs, ``os.environ["NCCL_X"] = "1"``, and
``/etc/nccl.conf`` (``KEY=VALUE``).

Schema (:class:`EnvList`): ``settings``, one :class:`Setting` per occurrence in input order (name, value
with its quotes removed, the form it was written in, 1-based ``line``); ``unknown``: the other non-blank
lines, kept with their numbers. Names read: ``NCCL_*``, ``TORCH_NCCL_*``, ``FI_*``, ``UCX_*``,
``CUDA_VISIBLE_DEVICES``, ``GLOO_SOCKET_IFNAME``. :meth:`EnvList.last` gives the value a shell would end up
with (the last occurrence wins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class EnvListParseError(ValueError):
    """No NCCL_* / FI_* / UCX_* setting in the text."""


@dataclass(frozen=True, kw_only=True)
class Setting:
    name: str
    value: str
    form: str  # "env", "export", "flag", "dockerfile", "yaml", "python"
    line: int


@dataclass(frozen=True, kw_only=True)
class EnvList:
    settings: tuple[Setting, ...] = ()
    unknown: tuple[tuple[int, str], ...] = ()
    damaged: tuple[str, ...] = ()

    def last(self) -> dict[str, Setting]:
        out: dict[str, Setting] = {}
        for setting in self.settings:
            out[setting.name] = setting
        return out


_NAME = r"(?P<name>(?:NCCL|TORCH_NCCL|FI|UCX)_[A-Z0-9_]{1,60}|CUDA_VISIBLE_DEVICES|GLOO_SOCKET_IFNAME)"
_VALUE = r"(?P<value>\"[^\"\n]{0,400}\"|'[^'\n]{0,400}'|[^\s;&|#]{0,400})"
_FORMS = (
    ("export", re.compile(r"^\s*(?:export|setenv|declare -x)\s+" + _NAME + r"(?:=|\s+)" + _VALUE)),
    ("dockerfile", re.compile(r"^\s*ENV\s+" + _NAME + r"(?:=|\s+)" + _VALUE)),
    ("python", re.compile(r"os\.environ\[\s*[\"']" + _NAME + r"[\"']\s*\]\s*=\s*" + _VALUE)),
    ("flag", re.compile(r"(?:^|\s)(?:-x|-e|--env|-genv|--export=(?:ALL,)?)\s*" + _NAME + r"=" + _VALUE)),
    ("env", re.compile(r"^\s*" + _NAME + r"=" + _VALUE + r"\s*(?:#.*)?$")),
    ("yaml", re.compile(r"^\s*" + _NAME + r":\s+" + _VALUE + r"\s*$")),
)
_YAML_NAME = re.compile(r"^\s*(?:-\s*)?name:\s*[\"']?" + _NAME + r"[\"']?\s*$")
_YAML_VALUE = re.compile(r"^\s*value:\s*" + _VALUE + r"\s*$")
# several settings on one command line: "NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 torchrun ..."
_INLINE = re.compile(r"(?:^|\s)" + _NAME + r"=" + _VALUE)


def looks_like(lines: list[str]) -> bool:
    """Two settings, or one on a line that holds nothing else (or writes nccl.conf)."""
    found = 0
    for line in lines:
        if any(p.search(line) for _form, p in _FORMS) or _YAML_NAME.match(line) or _INLINE.search(line):
            found += max(1, len(_INLINE.findall(line)))
            if found >= 2 or _FORMS[4][1].match(line) or _FORMS[0][1].match(line) or "nccl.conf" in line:
                return True
    return False


def parse(text: str) -> EnvList:
    settings: list[Setting] = []
    unknown: list[tuple[int, str]] = []
    pending: tuple[str, int] | None = None  # a YAML "- name: NCCL_X" waiting for its "value:"
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if pending is not None:
            value = _YAML_VALUE.match(line)
            if value:
                settings.append(Setting(name=pending[0], value=_unquote(value["value"]), form="yaml",
                                        line=pending[1]))
                pending = None
                continue
            pending = None
        named = _YAML_NAME.match(line)
        if named:
            pending = (named["name"], number)
            continue
        found = _settings(line, number)
        if found:
            settings.extend(found)
        else:
            unknown.append((number, line))
    if not settings:
        raise EnvListParseError("no NCCL_*, FI_* or UCX_* setting")
    return EnvList(settings=tuple(settings), unknown=tuple(unknown))


def _settings(line: str, number: int) -> list[Setting]:
    for form, pattern in _FORMS:
        m = pattern.search(line)
        if m:
            out = [Setting(name=m["name"], value=_unquote(m["value"]), form=form, line=number)]
            if form in ("flag", "env"):  # more on the same command line
                out += [
                    Setting(name=x["name"], value=_unquote(x["value"]), form=form, line=number)
                    for x in _INLINE.finditer(line, m.end())
                ]
            return out
    inline = list(_INLINE.finditer(line))
    return [Setting(name=x["name"], value=_unquote(x["value"]), form="env", line=number) for x in inline]


def _unquote(value: str) -> str:
    """Quotes removed; an unquoted value loses the sentence punctuation after it (``...=1.`` in prose)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value.rstrip(".,;:)")
