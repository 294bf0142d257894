"""A constructed multi-node NCCL log for the fleet and fabric-check tests (rails: which NIC each GPU uses)."""

from __future__ import annotations


def rail_log(hosts: dict[str, tuple[int, int]]) -> str:
    """A multi-node NCCL log, two GPUs per host: host -> (NIC index used by GPU0, by GPU1)."""
    lines = []
    names = list(hosts)
    n = len(names) * 2
    for h, host in enumerate(names):
        pid = 1000 + h
        lines.append(
            f"{host}:{pid}:{pid} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; "
            f"OOB ib0:10.0.0.{h + 1}<0>"
        )
        for local in range(2):
            rank = 2 * h + local
            lines.append(
                f"{host}:{pid + local}:{pid + local} [{local}] NCCL INFO ncclCommInitRank "
                f"comm 0x{rank + 1:x}0 "
                f"rank {rank} nranks {n} cudaDev {local} nvmlDev {local} busId {local + 1}8000 "
                "commId 0xabc - Init START"
            )
        nic0, nic1 = hosts[host]
        prev, nxt = (2 * h - 1) % n, (2 * h + 2) % n
        lines.append(
            f"{host}:{pid}:{pid} [0] NCCL INFO Channel 00/0 : {prev}[1] -> {2 * h}[0] [receive] "
            f"via NET/IB/{nic0}/GDRDMA"
        )
        lines.append(
            f"{host}:{pid + 1}:{pid + 1} [1] NCCL INFO Channel 00/0 : {2 * h + 1}[1] -> {nxt}[0] [send] "
            f"via NET/IB/{nic1}/GDRDMA"
        )
    return "\n".join(lines) + "\n"
