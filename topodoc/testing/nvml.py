"""A drop-in ``pynvml`` that answers from a recording's NVML tape.

:func:`replay_module` builds a module object that code under test gets from ``import pynvml`` while
the pytest plugin's ``topodoc_machine.nvml()`` context is active. Constants and the error classes are
the real pynvml's (nvidia-ml-py is a topodoc dependency), so ``except pynvml.NVMLError_NotSupported``
works as on the machine; every ``nvml*`` function answers what the recorded machine answered, raises
the NVMLError the machine raised, or, for a call the recording does not hold, raises
:class:`NotRecordedError` naming the call and the machine: a test never passes on an answer nobody
recorded. ``nvmlInit`` (and its variants) raise what the recorded machine's ``nvmlInit`` raised (a
machine without a driver replays ``NVMLError_DriverNotLoaded`` / ``LibraryNotFound``); ``nvmlShutdown``
does nothing.

:func:`installed` puts the replay in ``sys.modules`` **and** points every ``nvml*`` function of the real
pynvml module object at it, so code that did ``import pynvml`` at its top level, before the test, is
answered by the replay too. Only names bound by value before the test (``from pynvml import
nvmlInit``) still reach the real library.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager, suppress

from topodoc.probe.host import NotRecorded, NvmlError, TapeNvml
from topodoc.probe.nvml_gpus import MAX_GPUS

INIT = {"nvmlInit", "nvmlInitWithFlags", "nvmlInit_v2"}
NO_OP = {"nvmlShutdown"}


class NotRecordedError(LookupError):
    """The code under test made an NVML call that the recording cannot answer."""


class Handle:
    """What ``nvmlDeviceGetHandleByIndex`` returns in a replay: the GPU index, opaque to callers."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<replayed nvmlDevice_t {self.index}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("nvml-handle", self.index))


class Struct(types.SimpleNamespace):
    """A recorded NVML struct: fields as attributes (``pci.busId``), like pynvml's structures."""


def _value(fn: str, data):
    if isinstance(data, dict):
        return Struct(**{k: _value(fn, v) for k, v in data.items()})
    if isinstance(data, list):
        items = [_value(fn, v) for v in data]
        return tuple(items) if fn == "nvmlDeviceGetCudaComputeCapability" else items
    return data


def replay_module(tape: TapeNvml, machine: str = "the recording") -> types.ModuleType:
    """A module standing in for ``pynvml``, answering from ``tape``."""
    import pynvml as real

    module = types.ModuleType("pynvml", f"topodoc NVML replay of {machine}")
    for name in dir(real):
        if not name.startswith("nvml") and not name.startswith("_"):
            setattr(module, name, getattr(real, name))
    module.TOPODOC_REPLAY = machine

    def call(fn: str, *args):
        if fn in NO_OP:
            return None
        if fn in INIT:  # replay the recorded machine's nvmlInit: a failure there fails here
            try:
                tape.call("nvmlInit")
            except NotRecorded:
                return None
            except NvmlError as err:
                raise real.NVMLError(err.code) from None
            return None
        if fn == "nvmlDeviceGetHandleByIndex":
            return _by_index(fn, args)
        if fn == "nvmlDeviceGetHandleByPciBusId":
            return _by_bus_id(args[0])
        plain = [a.index if isinstance(a, Handle) else a for a in args]
        out_struct = None
        if fn in ("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo") and len(plain) == 2:
            out_struct = plain.pop()
        try:
            value = tape.call(fn, *plain)
        except NotRecorded as err:
            shown = ", ".join(repr(a) for a in plain)
            raise NotRecordedError(
                f"topodoc NVML replay: {fn}({shown}) was not recorded on {machine} "
                "(record a machine that answers it, or stub this call in the test)"
            ) from err
        except NvmlError as err:
            raise real.NVMLError(err.code) from None
        if out_struct is not None:
            _fill(getattr(out_struct, "_obj", out_struct), value)
            return None
        return _value(fn, value)

    def _count() -> int:
        return int(call("nvmlDeviceGetCount"))

    def _by_index(fn: str, args: tuple):
        index = int(args[0])
        if not 0 <= index < _count():
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return Handle(index)

    def _by_bus_id(bus_id):
        want = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
        for index in range(min(_count(), MAX_GPUS)):  # a tape's count is input: bounded
            pci = call("nvmlDeviceGetPciInfo", Handle(index))
            if _same_bus(getattr(pci, "busId", ""), want):
                return Handle(index)
        raise real.NVMLError(real.NVML_ERROR_NOT_FOUND)

    def module_getattr(name: str):
        if name.startswith("nvml"):
            return lambda *args: call(name, *args)
        raise AttributeError(f"module 'pynvml' (topodoc replay) has no attribute {name!r}")

    module.__getattr__ = module_getattr
    return module


def _same_bus(a: str, b: str) -> bool:
    from topodoc.pciaddr import normalize

    try:
        return normalize(a) == normalize(b)
    except ValueError:
        return a.lower() == b.lower()


def _fill(target, value) -> None:
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        with suppress(AttributeError, TypeError):
            setattr(target, key, item)


@contextmanager
def installed(module: types.ModuleType):
    """Inside the block ``import pynvml`` gives ``module``, and the real pynvml module object (the one a
    top-level ``import pynvml`` bound earlier) answers every ``nvml*`` call from it too; everything is
    put back after the block."""
    import pynvml as real

    saved = sys.modules.get("pynvml")
    originals = {name: value for name, value in vars(real).items()
                 if name.startswith("nvml") and callable(value)}
    sys.modules["pynvml"] = module
    for name in originals:
        setattr(real, name, getattr(module, name))
    try:
        yield module
    finally:
        for name, value in originals.items():
            setattr(real, name, value)
        if saved is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved
