"""errno-aware explanations (issue 26): one verbs call means different things by its errno, and a catalogue
signature is never more specific than its line (a record that explains one errno matches only that one)."""

from __future__ import annotations

import pytest

from topodoc.parsers.nccl_log import errors

WARN = "node-a:1:2 [0] misc/ibvwrap.cc:288 NCCL WARN "


def _verdict(message: str) -> errors.Verdict:
    found = errors.lookup(message, WARN + message)
    assert found is not None, message
    return found


@pytest.mark.parametrize(("message", "name", "words"), [
    ("Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory", "ENOMEM", "locked-memory limit"),
    ("Call to ibv_reg_mr failed with error Operation not permitted", "EPERM", "IPC_LOCK"),
    ("Call to ibv_modify_qp failed with error Invalid argument", "EINVAL", "GID index"),
    ("Call to ibv_reg_mr_iova2 failed with error Invalid argument", "EINVAL", "peer-memory client"),
    ("Call to ibv_create_cq failed with error Resource temporarily unavailable", "EAGAIN", "out of a"),
])
def test_a_verbs_failure_is_explained_by_its_errno(message, name, words):
    found = _verdict(message)
    assert found.category == "system_error" and f"with {name} (" in found.explanation
    assert words in found.explanation


def test_the_dmabuf_record_explains_eopnotsupp_only():
    assert _verdict("Call to ibv_reg_dmabuf_mr failed with error Operation not supported").signature == \
        "ibv-reg-dmabuf-mr-failed"
    other = _verdict("Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory")
    assert other.signature is None and "Operation not supported" not in other.explanation


def test_an_unknown_errno_names_the_call_and_claims_no_cause():
    found = _verdict("Call to ibv_reg_mr failed with error Input/output error")
    assert "ibv_reg_mr failed ('with error Input/output error')" in found.explanation
    assert "the errno is what tells" in found.explanation


@pytest.mark.parametrize("line", [
    "RuntimeError: pidfd_getfd(pidfd=3, fd=7) failed with errno 38: Function not implemented.",
    "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : Operation not supported",
    "node-a:1:2 [0] transport/p2p.cu:526 WARN failed to open CUDA IPC handle : 1 invalid device pointer",
    "node-a:1:2 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: Function not "
    "implemented",
])
def test_records_for_one_errno_leave_other_errnos_alone(line):
    found = errors.lookup(line, line)
    assert found is None or found.signature is None, (found.signature if found else None)
