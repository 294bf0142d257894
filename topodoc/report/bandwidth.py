"""Text for people: the TP estimate, the bandwidth model and measured-vs-expected comparisons."""

from __future__ import annotations

import re
import textwrap

from topodoc.bandwidth.estimate import GB, GIB, TpEstimate
from topodoc.report.safe import human


def _pair(values: tuple[float, float], fmt: str) -> str:
    low, high = (format(v, fmt) for v in values)
    return low if low == high else f"{low}-{high}"


@human
def render_tp(est: TpEstimate) -> str:
    job = est.job
    pct = (est.comm_fraction[0] * 100, est.comm_fraction[1] * 100)
    lines = [
        f"TP={job.tp}, {job.layers} layers, hidden {job.hidden}, seq {job.seq},"
        f" micro batch {job.micro_batch}, {job.dtype}",
        f"  one activation tensor S = seq x hidden x micro batch x dtype ="
        f" {est.message_bytes / 2**20:.0f} MiB",
        f"  per all-reduce, per GPU: 2(n-1)/n x S = {est.bytes_per_allreduce / 2**20:.0f} MiB",
        f"  per micro batch, per GPU: x {job.allreduces_per_layer} all-reduces x {job.layers} layers ="
        f" {est.bytes_per_gpu / GIB:.1f} GiB ({est.bytes_per_gpu / GB:.1f} GB)",
        f"  bandwidth to hide it in {_pair(est.compute_time_s, 'g')} s of compute:"
        f" {_pair(tuple(v / GIB for v in est.required_bytes_per_s), '.0f')} GiB/s"
        f" ({_pair(tuple(v / GB for v in est.required_bytes_per_s), '.0f')} GB/s)",
        f"  at {_pair(tuple(v / GB for v in est.bandwidth_bytes_per_s), 'g')} GB/s ({est.bandwidth_source}):"
        f" communication takes {_pair(est.comm_time_s, '.2f')} s,"
        f" {_pair(pct, '.0f')} % of the step with no overlap",
    ]
    return "\n".join(lines)


@human
def render_model(bw_model) -> str:
    lines = [f"{bw_model.source}: {bw_model.shape}", "",
             "GPU pairs (bottleneck link; GB/s per direction, NCCL's effective model):"]
    lines += grouped_pairs(bw_model.pairs, "GPU pairs") or ["  (fewer than two GPUs)"]
    if bw_model.gpu_nic:
        lines += ["", "GPU ↔ NIC:"] + grouped_pairs(bw_model.gpu_nic, "GPU-NIC pairs")
    lines += ["", "Expected busbw (nccl-tests, large messages):"]
    for exp in bw_model.expectations:
        figure = f"{exp.busbw_gbps:g} GB/s" if exp.busbw_gbps else "no fixed figure"
        lines.append(f"  {exp.scope}, {exp.algorithm}, {exp.ranks} ranks on {exp.nodes} node(s): {figure}")
        lines.append(f"    why: {exp.reason}")
        lines.append(f"    limiter: {exp.limiter}")
        lines += [f"    assumes: {a}" for a in exp.assumptions]
    if not bw_model.expectations:
        lines.append("  none: the machine has fewer than two GPUs and no RDMA NIC rate")
    lines += [f"note: {n}" for n in bw_model.notes]
    return "\n".join(lines)


_VIA = re.compile(r" via (GPU\d+)\)")


def grouped_pairs(pairs, noun: str) -> list[str]:
    """One entry per distinct bottleneck, naming its pairs (wrapped); the biggest group last, as
    "the other N pairs" -- 28 identical NV12 lines or 80 GPU-NIC lines say less than four groups."""
    groups: dict[str, list[str]] = {}
    for pair in pairs:
        head, _, why = pair.reason.partition(": ")
        relay = _VIA.search(why)
        if relay:  # one group per kind of relayed path; each pair names its relay GPU
            why, head = _VIA.sub(")", why), f"{head} via {relay.group(1)}"
        groups.setdefault(why, []).append(head)
    if not groups:
        return []
    if len(groups) == 1:
        why, names = next(iter(groups.items()))
        return [f"  all {len(names)} {noun}: {why}" if len(names) > 1 else f"  {names[0]}: {why}"]
    biggest = max(groups, key=lambda why: len(groups[why]))
    lines: list[str] = []
    for why, names in groups.items():
        if why == biggest and len(names) > 1:
            continue
        if len(names) == 1:
            lines.append(f"  {names[0]}: {why}")
            continue
        lines.append(f"  {why}:")
        joined = ", ".join(name.replace(" ", "\u00a0") for name in names)  # never split "X via GPU2"
        wrapped = textwrap.wrap(joined, 100, initial_indent="    ", subsequent_indent="    ")
        lines += [line.replace("\u00a0", " ") for line in wrapped]
    if len(groups[biggest]) > 1:
        lines.append(f"  {biggest}: the other {len(groups[biggest])} {noun}")
    return lines


@human
def render_comparisons(comparisons) -> str:
    if not comparisons:
        return "no expectation applies (no large-message rows, or no model for this collective)"
    marks = {"ok": "ok", "above": "ok", "below": "LOW", "far-below": "FAR BELOW"}
    return "\n".join(f"[{marks[c.verdict]}] {c.explanation}" for c in comparisons)


@human
def render_cluster(est) -> str:
    """The cross-node estimate: each collective that leaves the node, per step, then the verdict."""
    job, m, net = est.job, est.job.model, est.network
    pct = (est.comm_fraction[0] * 100, est.comm_fraction[1] * 100)
    lines = [
        f"TP={m.tp} PP={job.pp} DP={job.dp} EP={job.ep} = {est.gpus} GPUs on {est.nodes_used} of "
        f"{net.nodes} nodes ({net.gpus_per_node} GPUs each); {m.layers} layers, hidden {m.hidden}, seq "
        f"{m.seq}, micro batch {m.micro_batch} x {job.micro_batches} per step, {m.dtype}; "
        f"{est.params / 1e9:.1f} B params",
        f"  network per GPU across nodes: {_pair(tuple(v / GB for v in net.gpu_bytes_per_s), 'g')} GB/s "
        f"({net.source})",
        "  per step, per GPU:",
    ]
    for c in est.collectives:
        if not c.crosses_nodes:
            lines.append(f"    {c.name}: {c.group} ranks inside one node (NVLink / PCIe, not the network)")
            continue
        lines.append(f"    {c.name}: {c.group} ranks, {c.ranks_per_node} per node -> "
                     f"{c.bytes_per_gpu / GIB:.2f} GiB through the NIC, {_pair(c.time_s, '.3f')} s")
    lines.append(f"  compute {_pair(est.compute_time_s, 'g')} s, cross-node communication "
                 f"{_pair(est.comm_time_s, '.3f')} s -> {_pair(pct, '.0f')} % of the step with no overlap: "
                 f"{est.verdict}")
    lines.append("  assumptions:")
    lines += [textwrap.fill(a, 100, initial_indent="    - ", subsequent_indent="      ")
              for a in est.assumptions]
    return "\n".join(lines) + "\n"
