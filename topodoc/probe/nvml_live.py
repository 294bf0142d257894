"""The live side of the NVML seam: pynvml calls keyed by GPU index, results as plain data.

Only :class:`PynvmlAdapter` touches ``pynvml`` (imported on first use). It swaps GPU indexes for
handles (both for the pair calls), fills the structs of the functions that take one by reference
(``nvmlDeviceGetGpuFabricInfoV``), and turns ctypes results into JSON-able values: structures become
dicts, char arrays strings, other arrays lists. Every ``pynvml.NVMLError`` becomes
:class:`~topodoc.probe.host.NvmlError` with its numeric code; no pynvml module at all reads as
LibraryNotFound (12).
"""

from __future__ import annotations

import ctypes

from topodoc.probe.host import NvmlError

LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
PAIR_CALLS = {"nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor"}
NO_HANDLE = {
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetHandleBySerial",
}


def plain(value):
    """A ctypes/pynvml result as plain JSON-able data."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").rstrip("\x00")
    if isinstance(value, ctypes.Structure):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        if value._type_ is ctypes.c_char:
            return plain(bytes(value))
        return [plain(item) for item in value]
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "value") and isinstance(value, ctypes._SimpleCData):
        return value.value
    return value


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
            return plain(self._dispatch(nv, fn, args))
        except nv.NVMLError as err:
            raise NvmlError(int(err.value), str(err)) from err

    def _dispatch(self, nv, fn: str, args: tuple):
        func = getattr(nv, fn, None)
        if func is None:
            raise NvmlError(FUNCTION_NOT_FOUND, f"pynvml has no {fn}")
        if fn.startswith("nvmlDevice") and fn not in NO_HANDLE and args:
            count = 2 if fn in PAIR_CALLS else 1
            args = tuple(self._handle(nv, i) for i in args[:count]) + tuple(args[count:])
        if fn == "nvmlDeviceGetGpuFabricInfoV":
            info = nv.c_nvmlGpuFabricInfoV_t()
            func(args[0], ctypes.byref(info))
            return info
        return func(*args)

    def _handle(self, nv, index: int):
        if index not in self._handles:
            self._handles[index] = nv.nvmlDeviceGetHandleByIndex(int(index))
        return self._handles[index]
