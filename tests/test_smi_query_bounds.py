"""``nvidia-smi -q`` pastes (text and XML) of more GPUs than one machine has are refused as soon as the
GPU sections are counted, before every section is read or the XML tree is built."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from topodoc.numbers import LimitError
from topodoc.parsers import smi_query

ROOT = Path(__file__).resolve().parent.parent


def _text(gpus: int) -> str:
    text = (ROOT / "fixtures/text/nvidia-smi-q/rtx4070-laptop-full.txt").read_text()
    head, gpu = text.split("\nGPU 00000000:01:00.0\n", 1)
    return head + "".join(f"\nGPU 00000000:{i + 1:02x}:00.0\n" + gpu.replace("00000000:01:00.0",
                                                                          f"00000000:{i + 1:02x}:00.0")
                          for i in range(gpus))


def _xml(gpus: int) -> str:
    text = (ROOT / "fixtures/text/nvidia-smi-q-xml/gtx950-cut.xml").read_text()
    start = text.index('        <gpu id="')
    gpu = text[start:].rstrip() + "\n        </gpu>"
    body = "\n".join(gpu.replace("00000000:05:00.0", f"00000000:{i + 1:02x}:00.0") for i in range(gpus))
    return text[:start] + body + "\n</nvidia_smi_log>\n"


@pytest.mark.parametrize("make", [_text, _xml], ids=["text", "xml"])
def test_more_gpu_sections_than_a_machine_has_are_refused_at_the_count(monkeypatch, make):
    monkeypatch.setattr(importlib.import_module("topodoc.topology.derive"), "MAX_GPUS", 4)
    assert len(smi_query.parse(make(4)).gpus) == 4
    with pytest.raises(LimitError, match="5 GPUs: more than any machine has"):
        smi_query.parse(make(5))
