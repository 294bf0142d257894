"""railmap's tests, run on four recorded GPU servers through topodoc's pytest plugin: no GPU needed."""

import pytest
import railmap

from topodoc.testing import NotRecordedError

MACHINES = ("dgx-a100", "hgx-h100-8x400g-ib", "dgx1-v100-hybrid-cube-mesh", "8xgpu-roce-2s")


@pytest.mark.topodoc_machines(*MACHINES)
def test_every_gpu_gets_its_nearest_nic(topodoc_machine):
    mapping = railmap.nearest_nics(root=topodoc_machine.sysfs_root)
    assert len(mapping) == len(topodoc_machine.snapshot.gpus)
    # topodoc's own derived topology is the reference: the NIC at the smallest PCIe distance
    topo = topodoc_machine.topology
    order = ("PIX", "PXB", "PHB", "NODE", "SYS")
    for gpu in topo.gpus:
        conns = [c for c in topo.gpu_nic if c.a == gpu.name and c.pci_level]
        best = min(order.index(c.pci_level) for c in conns)
        nearest = {
            nic.device
            for nic in topo.nics
            for c in conns
            if c.b == nic.name and order.index(c.pci_level) == best
        }
        assert mapping[gpu.index] in nearest, (gpu.name, mapping[gpu.index], nearest)


@pytest.mark.topodoc_machines("dgx-a100")
def test_rank_env_pins_a_nic_on_the_gpus_switch(topodoc_machine):
    env = railmap.rank_env(3, root=topodoc_machine.sysfs_root)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    # on a DGX A100, GPU2/GPU3 and mlx5_2/mlx5_3 share one PCIe switch complex (PXB)
    assert env["NCCL_IB_HCA"] in ("=mlx5_2", "=mlx5_3")


@pytest.mark.topodoc_machines("gcp-a3-highgpu-8g")
def test_no_rdma_nic_means_no_hca_pin(topodoc_machine):
    assert "NCCL_IB_HCA" not in railmap.rank_env(0, root=topodoc_machine.sysfs_root)


@pytest.mark.topodoc_machines(*MACHINES)
def test_nvidia_smi_replays_what_the_machine_did(topodoc_machine):
    import subprocess

    if topodoc_machine.snapshot.smi_topo is not None:
        assert railmap.topology_text().splitlines()[0].split()[0] == "GPU0"
    else:  # recorded where nvidia-smi was not installed: the replay fails the same way
        with pytest.raises(subprocess.CalledProcessError) as err:
            railmap.topology_text()
        assert err.value.returncode == 127


@pytest.mark.topodoc_machines("dgx-a100")
def test_a_call_nobody_recorded_fails_loudly(topodoc_machine):
    import pynvml

    with pytest.raises(NotRecordedError, match="nvmlDeviceGetFanSpeed"):
        pynvml.nvmlDeviceGetFanSpeed(pynvml.nvmlDeviceGetHandleByIndex(0))


@pytest.mark.topodoc_machines("dgx-a100")
def test_recorded_errors_replay_as_pynvml_errors(topodoc_machine):
    import pynvml

    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetNumaNodeId(pynvml.nvmlDeviceGetHandleByIndex(0))
