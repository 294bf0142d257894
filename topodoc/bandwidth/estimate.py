"""Tensor-parallel traffic: how many bytes one GPU moves per micro batch and what share of the step
that costs (shared/DOMAIN.md, "Worked example to reproduce").

Megatron-style TP does 4 all-reduces of the activations per layer per step (2 forward, 2 backward).
A ring all-reduce of S bytes over n GPUs moves 2(n-1)/n x S bytes in and out of every GPU, with
S = seq x hidden x micro_batch x dtype bytes. Units: bytes and bytes/s inside; GB = 1e9, GiB = 2**30.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
GB, GIB = 1e9, 2**30


class EstimateError(ValueError):
    """Inputs that do not describe a TP job (zero layers, unknown dtype, low > high, ...)."""


@dataclass(frozen=True)
class TpJob:
    layers: int
    hidden: int
    seq: int
    micro_batch: int
    dtype: str
    tp: int
    allreduces_per_layer: int = 4


@dataclass(frozen=True)
class TpEstimate:
    job: TpJob
    message_bytes: int  # S: one activation tensor, seq x hidden x micro_batch x dtype bytes
    bytes_per_allreduce: int  # per GPU: 2(n-1)/n x S
    bytes_per_gpu: int  # per micro batch: bytes_per_allreduce x allreduces_per_layer x layers
    compute_time_s: tuple[float, float]
    required_bytes_per_s: tuple[float, float]  # to hide communication entirely in the compute time
    bandwidth_bytes_per_s: tuple[float, float]  # the bandwidth assumed (given or derived)
    comm_time_s: tuple[float, float]
    comm_fraction: tuple[float, float]  # comm / (comm + compute) with no overlap, 0..1
    bandwidth_source: str = "given"


def ring_allreduce_bytes(message_bytes: int, ranks: int) -> int:
    """Bytes each GPU sends (and receives) in a ring all-reduce of ``message_bytes``."""
    return message_bytes * 2 * (ranks - 1) // ranks


def estimate_tp(
    job: TpJob,
    compute_time_s: tuple[float, float],
    bandwidth_bytes_per_s: tuple[float, float],
    bandwidth_source: str = "given",
) -> TpEstimate:
    """Bytes per GPU per micro batch, the bandwidth that hides them, and the no-overlap comm share."""
    _check(job, compute_time_s, bandwidth_bytes_per_s)
    message = job.seq * job.hidden * job.micro_batch * DTYPE_BYTES[job.dtype]
    per_allreduce = ring_allreduce_bytes(message, job.tp)
    total = per_allreduce * job.allreduces_per_layer * job.layers
    fast_compute, slow_compute = compute_time_s
    low_bw, high_bw = bandwidth_bytes_per_s
    comm = (total / high_bw, total / low_bw)
    return TpEstimate(
        job=job, message_bytes=message, bytes_per_allreduce=per_allreduce, bytes_per_gpu=total,
        compute_time_s=compute_time_s,
        required_bytes_per_s=(total / slow_compute, total / fast_compute),
        bandwidth_bytes_per_s=bandwidth_bytes_per_s, comm_time_s=comm,
        comm_fraction=(comm[0] / (comm[0] + slow_compute), comm[1] / (comm[1] + fast_compute)),
        bandwidth_source=bandwidth_source,
    )


def _check(job: TpJob, compute: tuple[float, float], bandwidth: tuple[float, float]) -> None:
    if job.dtype not in DTYPE_BYTES:
        raise EstimateError(f"unknown dtype {job.dtype!r} (known: {', '.join(DTYPE_BYTES)})")
    sizes = (job.layers, job.hidden, job.seq, job.micro_batch, job.allreduces_per_layer)
    if min(sizes) <= 0 or job.tp < 2:
        raise EstimateError("layers, hidden, seq and micro batch must be positive and --tp at least 2")
    for name, (low, high) in (("compute time", compute), ("bandwidth", bandwidth)):
        if low <= 0 or high < low:
            raise EstimateError(f"{name} range must be positive and low <= high, got {low:g}:{high:g}")


def parse_range(text: str) -> tuple[float, float]:
    """"0.25:0.5" -> (0.25, 0.5); "29" -> (29.0, 29.0)."""
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError as err:
        raise EstimateError(f"not a number or LOW:HIGH range: {text!r}") from err
    if len(values) not in (1, 2):
        raise EstimateError(f"expected a number or LOW:HIGH, got {text!r}")
    return (values[0], values[-1])
