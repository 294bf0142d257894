"""The live side of the NVML seam: pynvml calls keyed by GPU index, results as plain data.

Only :class:`PynvmlAdapter` touches ``pynvml`` (imported on first use). It swaps GPU indexes for
handles (both for the pair calls), fills the structs of the functions that take one by reference
(``nvmlDeviceGetGpuFabricInfoV`` and the older ``nvmlDeviceGetGpuFabricInfo``), and turns ctypes
results into JSON-able values (:func:`plain`):
structures become dicts, char arrays strings, other arrays lists; ``nvmlDeviceGetFieldValues``
answers become :func:`field_values` dicts. Every ``pynvml.NVMLError`` becomes
:class:`~topodoc.probe.host.NvmlError` with its numeric code; no pynvml module at all reads as
LibraryNotFound (12); a string NVML returns that is not UTF-8 reads as Unknown (999).

Checked against nvidia-ml-py 13.615.71 (``tests/test_probe_pynvml.py``): pynvml's
``_PrintableStructure`` decodes ``char[]`` fields strictly on attribute access, so :func:`plain`
reads fields through the ctypes descriptor and decodes with replacement instead.
"""

from __future__ import annotations

import ctypes

from topodoc.probe.host import NvmlError

LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
UNKNOWN = 999
PAIR_CALLS = {"nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor"}
NO_HANDLE = {
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetHandleBySerial",
}
# nvmlValueType_t -> the member of the c_nvmlValue_t union that holds it (NVML_VALUE_TYPE_*)
VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def plain(value):
    """A ctypes/pynvml result as plain JSON-able data."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").rstrip("\x00")
    if isinstance(value, ctypes.Structure):
        return {name: plain(raw_field(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Union):
        raise TypeError(f"{type(value).__name__}: a union has no plain value without its type tag")
    if isinstance(value, ctypes.Array):
        if value._type_ is ctypes.c_char:
            return plain(bytes(value))
        return [plain(item) for item in value]
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, ctypes._SimpleCData):
        return plain(value.value)
    return value


def raw_field(struct: ctypes.Structure, name: str):
    """A struct field as ctypes stores it, bypassing pynvml's strict bytes decoding."""
    return getattr(type(struct), name).__get__(struct, type(struct))


def field_values(values) -> list[dict]:
    """``nvmlDeviceGetFieldValues`` answers: id, scope, per-field return code and the typed value.

    Timestamps and latencies are left out so a tape holds only what describes the machine."""
    out = []
    for entry in values:
        ret = int(entry.nvmlReturn)
        member = VALUE_MEMBER.get(int(entry.valueType))
        value = getattr(entry.value, member) if ret == 0 and member else None
        out.append({"fieldId": int(entry.fieldId), "scopeId": int(entry.scopeId), "nvmlReturn": ret,
                    "valueType": int(entry.valueType), "value": value})
    return out


def device_args(fn: str, args: tuple, handle) -> tuple:
    """``args`` with the leading GPU index (two for the pair calls) replaced by ``handle(index)``."""
    if not fn.startswith("nvmlDevice") or fn in NO_HANDLE or not args:
        return tuple(args)
    count = 2 if fn in PAIR_CALLS else 1
    return tuple(handle(int(i)) for i in args[:count]) + tuple(args[count:])


class PynvmlAdapter:
    def __init__(self) -> None:
        self._pynvml = None
        self._handles: dict[int, object] = {}

    def _module(self):
        if self._pynvml is None:
            try:
                import pynvml
            except ImportError as err:
                raise NvmlError(LIBRARY_NOT_FOUND, "pynvml (nvidia-ml-py) is not installed") from err
            self._pynvml = pynvml
        return self._pynvml

    def call(self, fn: str, *args):
        nv = self._module()
        try:
            return self._dispatch(nv, fn, args)
        except nv.NVMLError as err:
            raise NvmlError(int(err.value), str(err)) from err
        except UnicodeDecodeError as err:
            raise NvmlError(UNKNOWN, f"{fn} returned a string that is not UTF-8") from err

    def _dispatch(self, nv, fn: str, args: tuple):
        func = getattr(nv, fn, None)
        if func is None:
            raise NvmlError(FUNCTION_NOT_FOUND, f"pynvml has no {fn}")
        args = device_args(fn, args, lambda i: self._handle(nv, i))
        if fn == "nvmlDeviceGetGpuFabricInfoV":
            info = nv.c_nvmlGpuFabricInfoV_t()  # its constructor sets the struct version
            func(args[0], ctypes.byref(info))
            return plain(info)
        if fn == "nvmlDeviceGetGpuFabricInfo":  # drivers before the V struct (no health mask)
            info = nv.c_nvmlGpuFabricInfo_t()
            func(args[0], ctypes.byref(info))
            return plain(info)
        if fn == "nvmlDeviceGetFieldValues":
            return field_values(func(args[0], list(args[1])))
        return plain(func(*args))

    def _handle(self, nv, index: int):
        if index not in self._handles:
            self._handles[index] = nv.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]


class XidEvents:
    """NVML's critical-Xid events on every GPU that supports them: ``nvmlEventSetCreate``,
    ``nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError)``, ``nvmlEventSetWait_v2``. Works without
    root (unlike ``/dev/kmsg``). ``wait(timeout_s) -> [(pci_bus_id, xid)]``; every failure is
    :class:`~topodoc.probe.host.NvmlError` with NVML's code (no library: LibraryNotFound; no GPU that
    supports the events: NotSupported, 3)."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as err:
            raise NvmlError(LIBRARY_NOT_FOUND) from err
        self._nvml = pynvml
        self._set = None
        try:
            pynvml.nvmlInit()
            self._set = pynvml.nvmlEventSetCreate()
            registered = sum(self._register(i) for i in range(pynvml.nvmlDeviceGetCount()))
        except pynvml.NVMLError as err:
            raise NvmlError(err.value) from err
        if not registered:
            self.close()
            raise NvmlError(3)

    def _register(self, index: int) -> int:
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._set)
            return 1
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_GpuIsLost):
            return 0

    def wait(self, timeout_s: float) -> list[tuple[str, int]]:
        nvml = self._nvml
        try:
            data = nvml.nvmlEventSetWait_v2(self._set, max(1, int(timeout_s * 1000)))
            bus = nvml.nvmlDeviceGetPciInfo(data.device)
        except nvml.NVMLError_Timeout:
            return []
        except nvml.NVMLError as err:
            raise NvmlError(err.value) from err
        return [(plain(raw_field(bus, "busId")), int(data.eventData))]

    def close(self) -> None:
        try:
            if self._set is not None:
                self._nvml.nvmlEventSetFree(self._set)
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass
