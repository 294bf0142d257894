"""Properties: any bytes, any interleaving or truncation of real fixtures, never crash the analyzer and
never yield a transport the input does not show."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nccl_log_golden import cases

from topodoc.parsers.nccl_log import NoNcclLinesError, analyze
from topodoc.parsers.nccl_log import scan as nccl_log_scan

FIXTURE_LINES = [line for log in cases() for line in log.read_bytes().split(b"\n") if line]
# the words a transport verdict needs to have seen in the input (RoCE: a device line, or a RoCE-only GID)
TRANSPORT_WITNESS = {
    "IB": (b"IB",), "RoCE": (b"RoCE", b"Gid", b"GID"), "EFA": (b"efa",), "Socket": (b"Socket",),
    "TCPX": (b"GPUDirectTCPX", b"tcpxComm"),
    "TCPXO": (b"FasTrak", b"TCPXO"), "gIB": (b"gIB",), "Slingshot": (b"cxi",), "IBext": (b"IBext", b"SHARP"),
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(data: bytes):
    try:
        return analyze([("h.log", io.BytesIO(data))])
    except NoNcclLinesError:
        return None


def _assert_supported(analysis, data: bytes) -> None:
    if analysis is None:
        return
    transport = analysis.summary.transport
    if transport not in (None, "none"):
        witnesses = TRANSPORT_WITNESS.get(transport, (transport.split("/")[-1].encode(),))
        assert any(w in data for w in witnesses), transport
    for error in analysis.errors:
        assert error.line >= 1
        assert all(" -> " in ev.text for ev in error.related)  # only return-code chains are attached
    _assert_node_bound_and_distinct_evidence(analysis.summary)


def _assert_node_bound_and_distinct_evidence(summary) -> None:
    if summary.nnodes is not None:
        assert summary.nnodes_min == summary.nnodes
    elif summary.nnodes_min is not None:
        assert summary.nnodes_min >= 1 and summary.evidence["nnodes_min"]
    for lines in summary.evidence.values():
        assert len({(ev.file, ev.line) for ev in lines}) == len(lines)


@SETTINGS
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_crash(data):
    _assert_supported(_run(data), data)


@SETTINGS
@given(st.lists(st.sampled_from(FIXTURE_LINES), max_size=60), st.data())
def test_interleavings_and_truncations_of_real_lines(lines, draw):
    cut = [line[: draw.draw(st.integers(0, len(line)))] if draw.draw(st.booleans()) else line
           for line in lines]
    data = b"\n".join(cut)
    _assert_supported(_run(data), data)


@SETTINGS
@given(st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=40), st.integers(1, 300))
def test_result_does_not_depend_on_where_chunks_end(lines, chunk):
    data = b"\n".join(lines) + b"\n"
    whole = _run(data)
    saved = nccl_log_scan.CHUNK_BYTES
    nccl_log_scan.CHUNK_BYTES = chunk
    try:
        chunked = _run(data)
    finally:
        nccl_log_scan.CHUNK_BYTES = saved
    assert chunked == whole
