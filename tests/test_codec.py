from topodoc import codec, model


def _sample() -> model.Snapshot:
    dev = model.PciDevice(
        address="0000:1a:00.0", class_code=0x030200, vendor_id=0x10DE, numa_node=0,
        link=model.PciLink(16.0, 16, 32.0, 16), parent="0000:19:00.0", aer={"fatal": 0},
    )
    gpu = model.Gpu(
        index=0, name="NVIDIA H100", pci_address="0000:1a:00.0",
        nvlinks=(model.NvLink(0, True, 6, "0000:05:00.0", "switch"),),
        fabric=model.GpuFabric(state="completed", clique_id=3),
    )
    matrix = model.ConnectionMatrix(
        gpus=(model.MatrixGpu("GPU0", "0-31", "0"),), nics=(model.MatrixNic("NIC0", "mlx5_0"),),
        links={"GPU0": {"GPU0": "X", "NIC0": "PXB"}, "NIC0": {"GPU0": "PXB", "NIC0": "X"}},
    )
    return model.Snapshot(
        pci={dev.address: dev}, gpus=(gpu,), smi_topo=matrix,
        gaps=(model.Gap("gpu[0].serial", model.GapReason.UNSUPPORTED, "nvmlDeviceGetSerial"),),
        numa=(model.NumaNode(0, "0-31", 1024, (10, 21)),),
    )


def test_round_trip_is_exact():
    snap = _sample()
    assert codec.load(codec.dump(snap)) == snap


def test_round_trip_of_empty_snapshot():
    assert codec.load(codec.dump(model.Snapshot())) == model.Snapshot()


def test_wrong_schema_is_refused():
    import pytest

    with pytest.raises(codec.CodecError):
        codec.load('{"schema": 999}')
    with pytest.raises(codec.CodecError):
        codec.load("not json")
