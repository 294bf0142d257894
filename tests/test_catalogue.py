"""The failure catalogue (topodoc/catalogue): every record is valid, every real example line matches its
own record and no other, the prefilter literals are necessary, patterns stay linear, and the analyzer
reports every example line under its own signature (benign ones as benign)."""

from __future__ import annotations

import dataclasses
import io
from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from topodoc import catalogue
from topodoc.logmodel import ERROR_CATEGORIES
from topodoc.parsers.nccl_log import LogInputError, analyze

SIGS = catalogue.signatures()
EXAMPLES = [(sig, i, ex) for sig in SIGS for i, ex in enumerate(sig.examples)]
EXAMPLE_IDS = [f"{sig.id}#{i}" for sig, i, _ in EXAMPLES]

# the failure classes issue 12 §3 requires the catalogue to cover
REQUIRED_FAMILIES = {
    "socket-interface", "fabric-manager", "nvls", "dev-shm", "rdma-stack-missing", "net-plugin",
    "gdr-disabled", "rendezvous", "connect", "ib-qp-rtr", "roce-gid", "collective-mismatch",
    "mixed-nccl-builds", "cuda-ipc", "cumem-unsupported", "cuda-driver-mismatch", "cuda-init-fork", "oom",
    "device-busy", "ib-async-event", "memory-registration", "nccl-too-old-for-gpu", "consumer-gpu-p2p",
    "efa-libfabric", "slingshot-vni", "mnnvl-imex", "pytorch-desync", "benign",
}
KEBAB = regex.compile(r"[a-z0-9]++(?:-[a-z0-9]++)*+")
VERSIONS = regex.compile(r"(?:[<>]=?)?\d++\.\d++(?:\.\d++)?(?:-\d++\.\d++(?:\.\d++)?)?")
# a repeated group (*, +, {n,}) with a quantifier inside must be possessive or atomic: no backtracking blowup
# (an optional group, "?", cannot nest repetitions and is allowed)
NESTED_QUANTIFIER = regex.compile(r"\((?!\?>)[^()]*[+*}][^()]*\)(?:[*+]|\{)(?!\+)")


def test_catalogue_size_and_coverage():
    assert len(SIGS) >= 80
    assert {sig.family for sig in SIGS} >= REQUIRED_FAMILIES
    assert all(sig.examples for sig in SIGS)


def test_ids_unique_and_kebab_case():
    counts = Counter(sig.id for sig in SIGS)
    assert [i for i, n in counts.items() if n > 1] == []
    assert [sig.id for sig in SIGS if not KEBAB.fullmatch(sig.id)] == []


@pytest.mark.parametrize("sig", SIGS, ids=[s.id for s in SIGS])
def test_record_fields(sig):
    assert sig.category in ERROR_CATEGORIES
    assert isinstance(sig.benign, bool)
    for name in ("family", "literal", "title", "cause", "fix"):
        assert getattr(sig, name).strip(), name
    assert len(sig.explanation) >= 80, "explanations say what the line means, not 'read the WARN line'"
    assert sig.nccl_versions is None or VERSIONS.fullmatch(sig.nccl_versions)
    regex.compile(sig.pattern)
    assert not NESTED_QUANTIFIER.search(sig.pattern), "quantified group with a quantifier inside"
    for ex in sig.examples:
        assert ex.source.startswith("https://github.com/"), ex.source
        assert sig.literal in ex.line
        assert len(ex.line) <= catalogue.MAX_LINE


@pytest.mark.parametrize(("sig", "index", "example"), EXAMPLES, ids=EXAMPLE_IDS)
def test_example_matches_its_own_record(sig, index, example):
    found = catalogue.match(example.line)
    assert found is not None and found.id == sig.id, (found and found.id)


@pytest.mark.parametrize(("sig", "index", "example"), EXAMPLES, ids=EXAMPLE_IDS)
def test_literal_is_necessary(sig, index, example):
    """Without its literal an example no longer matches the pattern: the prefilter never hides a match."""
    scrambled = example.line.replace(sig.literal, sig.literal[::-1] + "\x00")
    assert not regex.search(sig.pattern, scrambled)


def test_literals_are_the_records_literals():
    assert set(catalogue.literals()) == {sig.literal for sig in SIGS}
    assert list(catalogue.literals()) == sorted(catalogue.literals())
    # what the scanner looks for: every literal but those of records whose examples are all WARN lines
    assert set(catalogue.scan_literals()) < set(catalogue.literals())


@pytest.mark.parametrize(("sig", "index", "example"), EXAMPLES, ids=EXAMPLE_IDS)
def test_prefilter_finds_every_example(sig, index, example):
    assert catalogue.prefilter().search(example.line)


def test_prefilter_skips_ordinary_lines():
    assert not catalogue.prefilter().search("a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")
    assert not catalogue.prefilter().search("node-a:1:2 [0] NCCL INFO Using network IB")


def test_by_id_and_frozen():
    sig = catalogue.by_id("fabric-manager-not-ready-802")
    assert sig.family == "fabric-manager" and not sig.benign
    with pytest.raises(KeyError):
        catalogue.by_id("no-such-signature")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sig.id = "x"  # type: ignore[misc]


@pytest.mark.parametrize("line", [
    "dgx-a01:31001:31095 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA",
    "a01:31001:31090 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.1.1<0>",
    "dgx-a01:31001:31090 [0] NCCL INFO Bootstrap : Using ibp12s0:10.20.1.11<0>",
    "dgx-a01:31001:31090 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "dgx-a01:31001:31090 [0] NCCL INFO Using network IB",
    "dgx-a01:31001:31095 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 1a000 - Init COMPLETE",
    "NCCL version 2.21.5+cuda12.4",
])
def test_ordinary_lines_match_nothing(line):
    assert catalogue.match(line) is None


def test_match_reads_only_max_line():
    line = "x" * catalogue.MAX_LINE + " NCCL WARN Failed to CUDA calloc 6291456 bytes"
    assert catalogue.match(line) is None
    assert catalogue.match(line[catalogue.MAX_LINE:]).id == "cuda-calloc-failed"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([*catalogue.literals(), " ", ":", "0", "'", "(", "\n", "é"]), max_size=40))
def test_match_on_literal_soup_is_consistent(parts):
    line = "".join(parts)
    found = catalogue.match(line)
    assert found is None or found.literal in line[: catalogue.MAX_LINE]


# lines the analyzer reads as facts, never as findings: the CUDA driver echo (a fact of the summary) and
# the nccl-tests rank table row (the GPU model is read there by the nccl-tests parser)
FACT_LINES = {"cuda-driver-version-echo", "consumer-geforce-gpu"}


@pytest.mark.parametrize(("sig", "index", "example"), EXAMPLES, ids=EXAMPLE_IDS)
def test_every_example_through_the_analyzer(sig, index, example):
    """Each example line alone through the analyzer as `logs` and `diagnose` call it (with the catalogue's
    prefilter literals): a failure is an error carrying its signature id, cause and fix; a benign line is
    listed as benign and never among the errors."""
    data = io.BytesIO((example.line + "\n").encode("utf-8"))
    try:
        analysis = analyze([(sig.id, data)], catalogue.scan_literals())
    except LogInputError:
        assert sig.id in FACT_LINES
        return
    if sig.id in FACT_LINES:
        assert not analysis.errors and not analysis.benign
        return
    found, other = (analysis.benign, analysis.errors) if sig.benign else (analysis.errors, analysis.benign)
    mine = [e for e in found if e.signature == sig.id]
    assert mine and not [e for e in other if e.signature == sig.id]
    assert (mine[0].fix, mine[0].cause, mine[0].benign) == (sig.fix, sig.cause, sig.benign)


@pytest.mark.parametrize(("line", "version"), [
    # PyTorch 1.10-era releases print NCCL 2.10.3's version code 21003 as "21.0.3": not a release to report
    ("  what():  NCCL error: unhandled system error, NCCL version 21.0.3", None),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:891, internal error, "
     "NCCL version 21.0.3", None),
    ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system error, "
     "NCCL version 2.4.8", "2.4.8"),
])
def test_framework_nccl_version_mangled_code_is_not_a_version(line, version):
    sig = catalogue.match(line)
    assert sig is not None
    assert catalogue.fields(sig, line).get("nccl_version") == version
    analysis = analyze([("x", io.BytesIO((line + "\n").encode()))], catalogue.scan_literals())
    assert analysis.summary.nccl_version == version
    assert analysis.summary.nccl_versions == ((version,) if version else ())


@pytest.mark.parametrize("line", [
    # the rows of hex that libmlx5 prints after "got completion with error:" hold no literal: never matched
    "00000000 00008813 10012abe 0dd0c1d3",
    # a Slurm cancel with a reason other than the time limit is not the time-limit record
    "slurmstepd: error: *** STEP 3495064.0 ON node-a CANCELLED AT 2021-10-27T19:35:36 DUE TO PREEMPTION ***",
])
def test_lines_outside_the_records_shapes_match_nothing(line):
    assert catalogue.match(line) is None


@pytest.mark.parametrize(("footer", "signature"), [
    ("# Out of bounds values : 0 OK", None),
    ("# Out of bounds values : 24 FAILED", "nccl-tests-out-of-bounds-failed"),
])
def test_nccl_tests_footer_is_an_error_only_when_it_failed(footer, signature):
    text = f"node-a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n{footer}\n"
    analysis = analyze([("x", io.BytesIO(text.encode()))], catalogue.scan_literals())
    assert [e.signature for e in analysis.errors] == ([signature] if signature else [])


def test_holds_literal_answers_as_the_compiled_prefilter_in_both_of_its_modes(monkeypatch):
    """``holds_literal`` tests ``in`` for the first lines asked and searches the compiled alternation after
    that: the same answer as ``prefilter()`` on every example line, every literal and lines holding none."""
    from topodoc import catalogue

    lines = [ex.line for sig in catalogue.signatures() for ex in sig.examples]
    lines += list(catalogue.literals()) + ["", "nothing to see here", "NCCL INFO Channel 00/0 : 0[0] -> 1[1]"]
    lines += [lit[1:] + "x" + lit[:-1] for lit in catalogue.literals()]  # near misses
    for calls in (0, catalogue._HELD_COMPILE_AFTER):
        monkeypatch.setattr(catalogue, "_HELD_CALLS", [calls])
        for line in lines:
            assert catalogue.holds_literal(line) == (catalogue.prefilter().search(line) is not None), line
