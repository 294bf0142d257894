"""Snapshot (or any model dataclass) <-> JSON, versioned, with an exact round trip.

:mod:`topodoc.model` is imported only by the functions that decode (encoding reads the dataclass it is
given), so ``logs --json`` does not pay for the machine model.

``load(dump(x)) == x`` for every dataclass in :mod:`topodoc.model`: the decoder rebuilds nested
dataclasses, enums, tuples and dicts from the type hints, so the JSON stays plain and readable.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topodoc import model


class CodecError(ValueError):
    """The JSON does not describe a model object of the expected shape or schema."""


def to_data(obj: Any) -> Any:
    """Model object -> plain JSON-able data (dicts, lists, str, int, float, bool, None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
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
        return _decode(cls, data)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise CodecError(f"cannot decode {getattr(cls, '__name__', cls)}: {err}") from err


def dump(snapshot: model.Snapshot, indent: int | None = 2) -> str:
    return json.dumps(to_data(snapshot), indent=indent, sort_keys=False)


def load(text: str) -> model.Snapshot:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CodecError(f"not JSON: {err}") from err
    return snapshot_from_data(data)


def snapshot_from_data(data: Any) -> model.Snapshot:
    """A snapshot document (``probe --json``), current or of an older supported version, decoded."""
    if not isinstance(data, dict):
        raise CodecError("a snapshot must be a JSON object")
    from topodoc import model

    return from_data(model.Snapshot, upgrade_snapshot(data))


def upgrade_snapshot(data: dict) -> dict:
    """The snapshot document in the current form: ``{"schema": 1, ...}`` (version 1, before documents
    were named) becomes ``{"schema": "topodoc.snapshot", "schema_version": 2, ...}``; any other
    schema than these two is refused."""
    from topodoc import model

    schema, version = data.get("schema"), data.get("schema_version")
    if schema == 1 and version is None:
        return {**data, "schema": model.SCHEMA, "schema_version": model.SCHEMA_VERSION}
    if schema == model.SCHEMA and version == model.SCHEMA_VERSION:
        return data
    found = f"{schema!r}" + (f" version {version!r}" if version is not None else "")
    raise CodecError(
        f"snapshot schema {found} is not supported (expected {model.SCHEMA!r} version "
        f"{model.SCHEMA_VERSION}, or the older 1)"
    )


@cache
def _hints(cls: type) -> dict[str, Any]:
    from topodoc import model

    return typing.get_type_hints(cls, vars(model))


def _decode(tp: Any, data: Any) -> Any:
    if tp is Any:
        return data
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _decode_union(typing.get_args(tp), data)
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(data)
    if origin is tuple:
        return _decode_tuple(typing.get_args(tp), data)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_decode(item, v) for v in data]
    if origin is dict:
        _key, value = typing.get_args(tp)
        return {str(k): _decode(value, v) for k, v in data.items()}
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if isinstance(tp, type) and not isinstance(data, tp):
        raise TypeError(f"expected {tp.__name__}, got {type(data).__name__}")
    return data


def _decode_union(args: tuple, data: Any) -> Any:
    if data is None and type(None) in args:
        return None
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _decode(arg, data)
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            errors.append(str(err))
    raise TypeError("; ".join(errors) or "no matching type")


def _decode_tuple(args: tuple, data: Any) -> tuple:
    if not isinstance(data, list):
        raise TypeError(f"expected a list, got {type(data).__name__}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], v) for v in data)
    return tuple(_decode(a, v) for a, v in zip(args, data, strict=True))


def _decode_dataclass(cls: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"expected an object for {cls.__name__}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name])
    return cls(**kwargs)
