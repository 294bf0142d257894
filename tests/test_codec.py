import json
from pathlib import Path

from topodoc import codec, model

ROOT = Path(__file__).resolve().parent.parent


def _sample() -> model.Snapshot:
    dev = model.PciDevice(
        address="0000:1a:00.0",
        class_code=0x030200,
        vendor_id=0x10DE,
        numa_node=0,
        link=model.PciLink(speed_gts=16.0, width=16, max_speed_gts=32.0, max_width=16),
        parent="0000:19:00.0",
        aer={"fatal": 0},
    )
    gpu = model.Gpu(
        index=0,
        name="NVIDIA H100",
        pci_address="0000:1a:00.0",
        nvlinks=(
            model.NvLink(
                link=0, active=True, version=6, remote_pci_address="0000:05:00.0", remote_type="switch"
            ),
        ),
        fabric=model.GpuFabric(state="completed", clique_id=3),
    )
    matrix = model.ConnectionMatrix(
        gpus=(model.MatrixGpu(name="GPU0", cpu_affinity="0-31", numa_affinity="0"),),
        nics=(model.MatrixNic("NIC0", "mlx5_0"),),
        links={"GPU0": {"GPU0": "X", "NIC0": "PXB"}, "NIC0": {"GPU0": "PXB", "NIC0": "X"}},
    )
    return model.Snapshot(
        pci={dev.address: dev},
        gpus=(gpu,),
        smi_topo=matrix,
        gaps=(
            model.Gap(what="gpu[0].serial", reason=model.GapReason.UNSUPPORTED, source="nvmlDeviceGetSerial"),
        ),
        numa=(model.NumaNode(node=0, cpulist="0-31", memory_total_kb=1024, distances=(10, 21)),),
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


def test_snapshot_document_is_named_and_versioned():
    data = json.loads(codec.dump(model.Snapshot()))
    assert list(data)[:2] == ["schema", "schema_version"]
    assert (data["schema"], data["schema_version"]) == ("topodoc.snapshot", model.SCHEMA_VERSION)


def test_version_1_snapshots_still_load():
    """Recordings' ``probe --json`` files written before documents were named: ``{"schema": 1, ...}``."""
    snap = _sample()
    old = json.loads(codec.dump(snap))
    del old["schema_version"]
    old["schema"] = 1
    assert codec.load(json.dumps(old)) == snap
    assert codec.load((ROOT / "fixtures/rules/base.json").read_text()).schema_version == model.SCHEMA_VERSION


def test_unknown_versions_are_refused_naming_what_was_found():
    import pytest

    with pytest.raises(codec.CodecError, match="'topodoc.snapshot' version 9"):
        codec.load('{"schema": "topodoc.snapshot", "schema_version": 9}')
    with pytest.raises(codec.CodecError):
        codec.load('{"schema": 1, "schema_version": 1}')
