"""The live NVML path against the installed nvidia-ml-py: every function the collectors call exists,
and every conversion works on real pynvml ctypes structs (no driver needed, nothing replayed)."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pynvml
import pytest

from topodoc import pciaddr
from topodoc.probe import nvml_gpus
from topodoc.probe.host import NvmlError, TapeNvml
from topodoc.probe.nvml_live import VALUE_MEMBER, PynvmlAdapter, device_args, field_values, plain
from topodoc.topology.rates import NVLINK_VERSION_NAME

PROBE = Path(nvml_gpus.__file__).parent


def called_functions() -> set[str]:
    """Every NVML function name the collectors and the adapter name in code (docstrings left out)."""
    names = set()
    for module in ("nvml_gpus.py", "nvml_live.py", "collect.py"):
        code = re.sub(r'"""[\s\S]*?"""', "", (PROBE / module).read_text())
        names |= set(re.findall(r'"(nvml(?:Init|Shutdown|System\w+|Device\w+))"', code))
    return names


def test_every_function_the_collectors_call_exists_in_pynvml():
    names = called_functions()
    assert {"nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetP2PStatus"} <= names
    assert sorted(n for n in names if not callable(getattr(pynvml, n, None))) == []


def test_pci_info_struct_gives_the_bus_id_string():
    info = pynvml.nvmlPciInfo_t()
    info.busId, info.busIdLegacy = b"00000000:1A:00.0", b"0000:1A:00.0"
    info.bus, info.pciDeviceId = 0x1A, 0x233010DE
    data = plain(info)
    assert data["busId"] == "00000000:1A:00.0" and data["bus"] == 26 and data["pciDeviceId"] == 0x233010DE
    assert pciaddr.try_normalize(data["busId"]) == "0000:1a:00.0"


def test_a_string_that_is_not_utf8_does_not_break_the_struct():
    info = pynvml.nvmlPciInfo_t()
    info.busId = b"0000\xff:1A"
    with pytest.raises(UnicodeDecodeError):
        _ = info.busId  # pynvml's own attribute access decodes strictly
    assert plain(info)["busId"] == "0000\ufffd:1A"


def test_fabric_struct_version_size_and_conversion():
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    assert info.version == pynvml.nvmlGpuFabricInfo_v2 == 0x02000024
    assert ctypes.sizeof(info) == info.version & 0xFFFFFF  # NVML struct versions carry their size
    info.clusterUuid[:] = list(range(16))
    info.cliqueId, info.state, info.status = 7, pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0
    fabric = nvml_gpus._fabric(plain(info))
    assert fabric.state == "completed" and fabric.clique_id == 7
    assert fabric.cluster_uuid == "00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_memory_info_and_cpu_affinity_words():
    memory = pynvml.c_nvmlMemory_t()
    memory.total = 85520809984
    assert plain(memory)["total"] == 85520809984
    words = (ctypes.c_ulonglong * nvml_gpus.AFFINITY_WORDS)()  # what nvmlDeviceGetCpuAffinity returns
    words[0], words[1] = 0xFF, 1 << 63
    assert nvml_gpus.mask_to_cpulist(plain(words)) == "0-7,127"


def test_field_values_carry_the_typed_value_and_drop_timestamps():
    values = (pynvml.c_nvmlFieldValue_t * 2)()
    values[0].fieldId, values[0].valueType, values[0].timestamp = 91, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 17
    values[0].value.uiVal = 18
    values[1].fieldId, values[1].nvmlReturn = 166, pynvml.NVML_ERROR_NOT_SUPPORTED
    answer = field_values(values)
    assert answer[0] == {"fieldId": 91, "scopeId": 0, "nvmlReturn": 0, "valueType": 1, "value": 18}
    assert answer[1]["nvmlReturn"] == 3 and answer[1]["value"] is None
    tape = {"calls": [{"fn": "nvmlDeviceGetFieldValues", "args": [0, [91]], "code": 0, "value": answer[:1]}]}
    assert nvml_gpus._link_count(nvml_gpus.Query(TapeNvml(tape), []), 0) == 18
    with pytest.raises(TypeError):
        plain(values[0].value)  # a bare union has no meaning without its type tag


def test_value_members_follow_the_value_type_enum():
    members = [name for name, _ in pynvml.c_nvmlValue_t._fields_]
    for name in dir(pynvml):
        if name.startswith("NVML_VALUE_TYPE_") and name != "NVML_VALUE_TYPE_COUNT":
            assert VALUE_MEMBER[getattr(pynvml, name)] in members, name
    assert len(VALUE_MEMBER) == pynvml.NVML_VALUE_TYPE_COUNT


def test_p2p_index_gotcha_and_status_codes():
    assert pynvml.NVML_P2P_CAPS_INDEX_READ in ((0,), 0)  # a tuple in 13.615: never pass the constant
    with pytest.raises(TypeError):
        ctypes.c_uint((0,))
    caps = dict(nvml_gpus.P2P_CAPS)
    assert all(type(i) is int for i in caps.values())
    assert (caps["p2p_read"], caps["p2p_write"]) == (0, pynvml.NVML_P2P_CAPS_INDEX_WRITE)
    assert (caps["p2p_nvlink"], caps["p2p_atomics"]) == (
        pynvml.NVML_P2P_CAPS_INDEX_NVLINK,
        pynvml.NVML_P2P_CAPS_INDEX_ATOMICS,
    )
    assert nvml_gpus.P2P_STATUS[pynvml.NVML_P2P_STATUS_OK] == "OK"
    assert nvml_gpus.P2P_STATUS[pynvml.NVML_P2P_STATUS_NOT_SUPPORTED] == "NS"
    assert nvml_gpus.P2P_STATUS[pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY] == "DR"


def test_enum_tables_match_pynvml():
    assert nvml_gpus.ANCESTOR[pynvml.NVML_TOPOLOGY_SINGLE] == "PIX"
    assert nvml_gpus.ANCESTOR[pynvml.NVML_TOPOLOGY_HOSTBRIDGE] == "PHB"
    assert nvml_gpus.ANCESTOR[pynvml.NVML_TOPOLOGY_SYSTEM] == "SYS"
    assert nvml_gpus.REMOTE_TYPE[pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH] == "switch"
    assert nvml_gpus.REMOTE_TYPE[pynvml.NVML_NVLINK_DEVICE_TYPE_UNKNOWN] == "unknown"
    assert nvml_gpus.FABRIC_STATE[pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS] == "in_progress"
    for code, name in NvmlError.NAMES.items():
        constant = "NVML_ERROR_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()
        assert getattr(pynvml, constant) == code, constant


def test_nvlink_version_enum_and_link_limits():
    versions = {v: k for k, v in vars(pynvml).items() if k.startswith("NVML_NVLINK_VERSION_") and v}
    assert versions[5] == "NVML_NVLINK_VERSION_3_1"  # what an A100 reports
    for value, name in versions.items():
        assert NVLINK_VERSION_NAME[value] == name.removeprefix("NVML_NVLINK_VERSION_").replace("_", ".")
    assert nvml_gpus.MAX_LINKS >= pynvml.NVML_NVLINK_MAX_LINKS
    assert nvml_gpus.NVLINK_LINK_COUNT_FIELD == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT


def test_device_args_swap_gpu_indexes_for_handles():
    handle = "h{}".format
    assert device_args("nvmlDeviceGetP2PStatus", (0, 3, 2), handle) == ("h0", "h3", 2)
    assert device_args("nvmlDeviceGetNvLinkState", (1, 17), handle) == ("h1", 17)
    assert device_args("nvmlDeviceGetFieldValues", (2, [91]), handle) == ("h2", [91])
    assert device_args("nvmlDeviceGetCount", (), handle) == ()
    assert device_args("nvmlSystemGetDriverVersion", (), handle) == ()


def test_live_adapter_reports_nvml_codes_without_a_driver():
    adapter = PynvmlAdapter()
    with pytest.raises(NvmlError) as err:
        adapter.call("nvmlDeviceGetNoSuchThing", 0)
    assert err.value.code == 13
    with pytest.raises(NvmlError) as err:
        adapter.call("nvmlDeviceGetCount")  # no nvmlInit in this adapter: NVML says Uninitialized
    assert err.value.code == pynvml.NVML_ERROR_UNINITIALIZED
