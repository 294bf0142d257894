"""CPU sets as ranges (``topodoc.cpuset``): the kernel's spellings, round trips against a plain set of
ints (hypothesis), and hostile cpulists that must stay small or be refused, never expanded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc.cpuset import MAX_CPU, CpuSet, CpuSetError
from topodoc.rules.machine import parse_cpulist as rules_parse

cpu_sets = st.sets(st.integers(0, 4095), max_size=300)


def expand(cpus: CpuSet) -> set[int]:
    return {c for a, b in cpus.ranges for c in range(a, b + 1)}


@settings(max_examples=60)
@given(cpu_sets)
def test_format_then_parse_round_trip(cpus):
    text = CpuSet.from_cpus(cpus).format()
    parsed = CpuSet.parse(text)
    assert expand(parsed) == cpus
    assert parsed.format() == text
    assert len(parsed) == len(cpus)


@settings(max_examples=60)
@given(cpu_sets, cpu_sets, st.integers(0, 4200))
def test_intersection_count_and_membership_match_plain_sets(a, b, probe):
    sa, sb = CpuSet.from_cpus(a), CpuSet.from_cpus(b)
    assert expand(sa & sb) == a & b
    assert sa.overlaps(sb) == bool(a & b)
    assert (probe in sa) == (probe in a)


@settings(max_examples=60)
@given(st.lists(st.integers(0, (1 << 64) - 1), max_size=16))
def test_mask_words_match_bit_by_bit_expansion(words):
    expected = {64 * k + bit for k, w in enumerate(words) for bit in range(64) if w >> bit & 1}
    assert expand(CpuSet.from_mask_words(words)) == expected


@pytest.mark.parametrize(
    "text, spelled, count",
    [("0-3,8,10-11", "0-3,8,10-11", 7), ("5", "5", 1), ("", "", 0), ("\n", "", 0),
     ("0-1, 2-3 ,7", "0-3,7", 5), ("8,0-3", "0-3,8", 5), ("0-3,2-5", "0-5", 6)],
)
def test_kernel_spellings(text, spelled, count):
    cpus = CpuSet.parse(text)
    assert (cpus.format(), len(cpus)) == (spelled, count)


def test_a_huge_range_is_refused_without_expanding():
    with pytest.raises(CpuSetError, match="beyond any machine"):
        CpuSet.parse("0-50000000")
    biggest = CpuSet.parse(f"0-{MAX_CPU - 1}")
    assert len(biggest) == MAX_CPU and biggest.ranges == ((0, MAX_CPU - 1),)


@pytest.mark.parametrize(
    "text",
    ["9" * 5000, "0-" + "9" * 5000, "3-1", "a", "1-2-3", "-", "\u00b2", "0x3", "1,,2-", "1.5"],
)
def test_garbage_is_a_cpuset_error(text):
    with pytest.raises(CpuSetError):
        CpuSet.parse(text)


@pytest.mark.parametrize("words", [[1 << 64], [-1], ["1"], [1.0], [True], [0] * (MAX_CPU // 64) + [1]])
def test_bad_mask_words_are_refused(words):
    with pytest.raises(CpuSetError):
        CpuSet.from_mask_words(words)


def test_rules_read_a_hostile_cpulist_as_no_cpu():
    assert not rules_parse("0-50000000")
    assert not rules_parse(None)
    assert rules_parse("0-3") & rules_parse("2-9") == CpuSet.parse("2-3")


def test_subset():
    assert CpuSet.parse("2-3") <= CpuSet.parse("0-7")
    assert not CpuSet.parse("2-9") <= CpuSet.parse("0-7")
    assert CpuSet.parse("") <= CpuSet.parse("0")
    assert CpuSet.parse("0,4-5").issubset(CpuSet.parse("0-1,4-6"))
