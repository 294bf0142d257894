"""Snapshot (or any model dataclass) <-> JSON, versioned, with an exact round trip.

:mod:`topodoc.model` is imported only by the functions that decode (encoding reads the dataclass it is
given), so ``logs --json`` does not pay for the machine model.

``load(dump(x)) == x`` for every dataclass in :mod:`topodoc.model`: the decoder rebuilds nested
dataclasses, enums, tuples and dicts from the type hints, so the JSON stays plain and readable.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import types
import typing
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Any

from topodoc import jsontext

if TYPE_CHECKING:
    from topodoc import model


class CodecError(ValueError):
    """The JSON does not describe a model object of the expected shape or schema."""


_SCALARS = frozenset({str, int, float, bool, type(None)})  # exact types: an Enum of str is not one
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # dataclass -> its field names, looked up once per class


def to_data(obj: Any) -> Any:
    """Model object -> plain JSON-able data (dicts, lists, str, int, float, bool, None)."""
    kind = type(obj)
    if kind in _SCALARS:
        return obj
    names = _FIELD_NAMES.get(kind)
    if names is None and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        return {name: to_data(getattr(obj, name)) for name in names}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    return obj


def from_data(cls: Any, data: Any) -> Any:
    """Plain data -> an instance of ``cls`` (a type hint: dataclass, Optional, tuple, dict, ...)."""
    try:
        return _decoder(cls)(data)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise CodecError(f"cannot decode {getattr(cls, '__name__', cls)}: {err}") from err


def dump(snapshot: model.Snapshot, indent: int | None = 2) -> str:
    return json.dumps(to_data(snapshot), indent=indent, sort_keys=False)


def load(text: str) -> model.Snapshot:
    try:
        data = jsontext.loads(text)
    except json.JSONDecodeError as err:
        raise CodecError(f"not JSON: {err}") from err
    return snapshot_from_data(data)


def snapshot_from_data(data: Any) -> model.Snapshot:
    """A snapshot document (``probe --json``), current or of an older supported version, decoded."""
    if not isinstance(data, dict):
        raise CodecError("a snapshot must be a JSON object")
    from topodoc import model

    return from_data(model.Snapshot, upgrade_snapshot(data))


# snapshot versions whose documents the current model reads as they are: every version since added fields
# with defaults only (3: gpu_pairs[].nvlink_count and the health values)
ADDITIVE_SINCE = (2,)


def upgrade_snapshot(data: dict) -> dict:
    """The snapshot document in the current form: ``{"schema": 1, ...}`` (version 1, before documents
    were named) becomes ``{"schema": "topodoc.snapshot", "schema_version": 3, ...}``; version 2 (no health
    values) is read as it is; any other schema is refused."""
    from topodoc import model

    schema, version = data.get("schema"), data.get("schema_version")
    if schema == 1 and version is None:
        return {**data, "schema": model.SCHEMA, "schema_version": model.SCHEMA_VERSION}
    if schema == model.SCHEMA and version == model.SCHEMA_VERSION:
        return data
    if schema == model.SCHEMA and version in ADDITIVE_SINCE:
        return {**data, "schema_version": model.SCHEMA_VERSION}  # later versions only added fields
    found = f"{schema!r}" + (f" version {version!r}" if version is not None else "")
    raise CodecError(
        f"snapshot schema {found} is not supported (expected {model.SCHEMA!r} version "
        f"{model.SCHEMA_VERSION}, or the older 1)"
    )


@cache
def _hints(cls: type) -> dict[str, Any]:
    from topodoc import model

    # the class's own module first (a type outside topodoc.model names its neighbours), then the model's
    return typing.get_type_hints(cls, vars(model), vars(sys.modules[cls.__module__]))


def _decoder(tp: Any) -> Callable[[Any], Any]:
    """The function that decodes plain data into type hint ``tp``, built once per hint: the type hints are
    read once, not once per value (a snapshot holds thousands)."""
    try:
        return _cached_decoder(tp)
    except TypeError:  # an unhashable hint
        return _build_decoder(tp)


@cache
def _cached_decoder(tp: Any) -> Callable[[Any], Any]:
    return _build_decoder(tp)


def _build_decoder(tp: Any) -> Callable[[Any], Any]:
    if tp is Any:
        return _same
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(typing.get_args(tp))
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp
    if origin is tuple:
        return _tuple_decoder(typing.get_args(tp))
    if origin is list:
        (item,) = typing.get_args(tp)
        decode_item = _decoder(item)
        return lambda data: [decode_item(v) for v in data]
    if origin is dict:
        _key, value = typing.get_args(tp)
        decode_value = _decoder(value)
        return lambda data: {str(k): decode_value(v) for k, v in data.items()}
    if tp is float:
        return _float
    if isinstance(tp, type):
        return functools.partial(_checked, tp)
    return _same


def _same(data: Any) -> Any:
    return data


def _float(data: Any) -> Any:
    if isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    return _checked(float, data)


def _checked(tp: type, data: Any) -> Any:
    if not isinstance(data, tp):
        raise TypeError(f"expected {tp.__name__}, got {type(data).__name__}")
    return data


def _union_decoder(args: tuple) -> Callable[[Any], Any]:
    optional = type(None) in args
    choices = [_decoder(arg) for arg in args if arg is not type(None)]

    def decode(data: Any) -> Any:
        if data is None and optional:
            return None
        errors = []
        for choice in choices:
            try:
                return choice(data)
            except (TypeError, ValueError, KeyError, AttributeError) as err:
                errors.append(str(err))
        raise TypeError("; ".join(errors) or "no matching type")

    return decode


def _tuple_decoder(args: tuple) -> Callable[[Any], Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        decode_item = _decoder(args[0])

        def decode(data: Any) -> tuple:
            _a_list(data)
            return tuple([decode_item(v) for v in data])
    else:
        decoders = [_decoder(a) for a in args]

        def decode(data: Any) -> tuple:
            _a_list(data)
            return tuple([d(v) for d, v in zip(decoders, data, strict=True)])

    return decode


def _a_list(data: Any) -> None:
    if not isinstance(data, list):
        raise TypeError(f"expected a list, got {type(data).__name__}")


def _dataclass_decoder(cls: type) -> Callable[[Any], Any]:
    fields: list[tuple[str, Callable[[Any], Any]]] = []
    ready = False

    def decode(data: Any) -> Any:
        nonlocal ready
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {cls.__name__}")
        if not ready:  # on first use: a dataclass may hold itself (its decoder is being built meanwhile)
            hints = _hints(cls)
            fields[:] = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls)]
            ready = True
        return cls(**{name: decode_field(data[name]) for name, decode_field in fields if name in data})

    return decode
