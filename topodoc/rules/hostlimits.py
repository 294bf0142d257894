"""Rules on pasted host settings that GPUDirect RDMA and NCCL's network transport depend on: ``ulimit -a``
(the locked-memory limit), ``lsmod`` (the GPU peer-memory module) and ``df``/``mount`` lines for
/dev/shm (NCCL's shared-memory transport), given to ``diagnose FILE...``.

The ``texts`` fact holds ``(path, kind, parsed)``; these rules read kinds ``ulimit``
(:mod:`topodoc.parsers.ulimit`), ``lsmod`` (:mod:`topodoc.parsers.lsmod`) and ``shm``
(:mod:`topodoc.parsers.shm`), by attribute. Sources:
NCCL's networking troubleshooting (ibv_reg_mr / ibv_create_qp failures: memlock) and GPU troubleshooting
(DMA-BUF instead of nvidia-peermem), REFERENCE.md §1 lines 209, 251, 501;
/dev/shm: NVIDIA/nccl#290, #342, #525 (posix_fallocate / Error while creating shared memory segment in
containers), moby/moby#16168 (--shm-size, 64m default), pytorch/ci-infra#490 (emptyDir medium: Memory).
"""

from __future__ import annotations

from collections.abc import Iterator

from topodoc.rules.common import texts_of
from topodoc.rules.engine import Evidence, Hit, Rule, rule

PEERMEM = ("nvidia_peermem", "nv_peer_mem")




@rule(
    "memlock-limited", "warning", ("rdma", "limits", "gdr"),
    title="The locked-memory limit (ulimit -l) is not unlimited",
    fix="make memlock unlimited where the job runs: /etc/security/limits.conf (* - memlock unlimited), "
    "LimitMEMLOCK=infinity for the daemon that starts the job (slurmd, dockerd, kubelet), "
    "docker --ulimit memlock=-1; check `ulimit -l` inside the launcher (e.g. mpirun ... sh -c 'ulimit -l')",
)
def memlock_limited(texts) -> Iterator[Hit]:
    for path, limits in texts_of(texts, "ulimit"):
        kb = limits.memlock_kb
        if kb is None:
            continue
        yield Hit(
            subject="max locked memory",
            message=f"max locked memory is {kb} KB: RDMA needs NCCL's buffers pinned, so over "
            "InfiniBand/RoCE/EFA registration and queue creation fail (`ibv_reg_mr` / `ibv_create_qp` / "
            "`ibv_create_cq` ... Cannot allocate memory, ncclSystemError) once NCCL registers more than "
            "this; NCCL's troubleshooting guide asks for unlimited. A limit set in limits.conf does not "
            "reach processes started by a daemon or a container with its own limit",
            evidence=(Evidence("ulimit", f"{path}:{limits.memlock_line}", f"max locked memory {kb}"),),
        )


@rule(
    "peermem-not-loaded", "warning", ("gdr", "rdma", "kernel"),
    title="No GPU peer-memory module is loaded (nvidia_peermem / nv_peer_mem)",
    fix="sudo modprobe nvidia-peermem (and list it in /etc/modules-load.d/), or use DMA-BUF: the open GPU "
    "kernel module on a recent kernel, with NCCL_DMABUF_ENABLE left at 1",
)
def peermem_not_loaded(texts) -> Iterator[Hit]:
    for path, mods in texts_of(texts, "lsmod"):
        if any(mods.loaded(name) for name in PEERMEM):
            continue
        empty = [g for g in mods.greps if not g.found and any(p.startswith(g.pattern) or g.pattern in p
                                                               for p in PEERMEM)]
        if mods.whole:
            where = Evidence("lsmod", f"{path}:{mods.modules[0].line if mods.modules else 0}",
                             "the whole lsmod list has neither nvidia_peermem nor nv_peer_mem")
        elif empty:
            where = Evidence("lsmod", f"{path}:{empty[0].line}", f"lsmod | grep {empty[0].pattern}: nothing")
        else:
            continue  # a grep for something else says nothing about peermem
        yield Hit(
            subject="nvidia_peermem",
            message="no GPU peer-memory module is loaded: NCCL can then use GPUDirect RDMA only through "
            "DMA-BUF (the open GPU kernel module on a recent kernel, CUDA driver 11.7+); without it NCCL "
            "logs 'GPU Direct RDMA Disabled for HCA' and stages every network transfer through host memory. "
            "Whether DMA-BUF is in use here is not in this paste: NCCL_DEBUG=INFO prints 'DMA-BUF is "
            "available on GPU device N' when it is",
            evidence=(where,),
            confidence=0.5 if not mods.whole else 0.7,
        )


DOCKER_SHM = 64 << 20  # docker run / create without --shm-size (moby/moby#16168: "the system uses 64m")
SHM_NEARLY_FULL = 90  # Use% at or above which the next communicator's segments may not fit


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.1f} GiB"


@rule(
    "shm-too-small", "warning", ("shm", "container", "nccl"),
    title="/dev/shm is Docker's 64 MiB default or smaller, or nearly full",
    fix="docker run --shm-size=1g (or --ipc=host); Kubernetes: an emptyDir {medium: Memory} mounted at "
    "/dev/shm; remove stale /dev/shm/nccl-* files; NCCL_SHM_DISABLE=1 only as a workaround (intra-node "
    "traffic then goes through P2P or the network)",
)
def shm_too_small(texts) -> Iterator[Hit]:
    for path, shm in texts_of(texts, "shm"):
        for mount in shm.mounts:
            size, pct = mount.size_bytes, mount.use_pct
            where = Evidence("shm", f"{path}:{mount.line}", " ".join(mount.text.split()))
            if size is not None and size <= DOCKER_SHM:
                yield Hit(
                    subject=mount.mountpoint,
                    message=f"{mount.mountpoint} is {_mib(size)} ({mount.origin}), Docker's default when "
                    "no --shm-size is given: NCCL's SHM transport (and, without cuMem host memory, its "
                    "proxy buffers) creates one /dev/shm segment per connection to a local peer, about "
                    "9.2 MB each with the default NCCL_BUFFSIZE (size 9637888 in NVIDIA/nccl#525 and "
                    "pytorch/ci-infra#490), so a few GPUs in one container exhaust it: 'posix_fallocate "
                    "failed : No space left on device', 'failed to extend /dev/shm/nccl-...', 'Error while "
                    "creating shared memory segment' during communicator setup",
                    evidence=(where,),
                )
            elif pct is not None and pct >= SHM_NEARLY_FULL:
                left = f", {_mib(mount.avail_bytes)} free" if mount.avail_bytes is not None else ""
                yield Hit(
                    subject=mount.mountpoint,
                    message=f"{mount.mountpoint} is {pct}% used{left}: NCCL's next shared-memory segments "
                    "(about 9.2 MB per connection to a local peer) may not fit; segments left by killed "
                    "jobs (/dev/shm/nccl-*, llm-d/llm-d#352) fill it over time. What holds the space is not "
                    "in this paste: `ls -la /dev/shm` shows it",
                    evidence=(where,),
                    confidence=0.7,
                )


RULES: tuple[Rule, ...] = (memlock_limited, peermem_not_loaded, shm_too_small)
