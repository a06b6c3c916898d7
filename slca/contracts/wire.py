"""Serialisation of contracts: JSON or msgpack, always with a schema version. Never pickle."""

from __future__ import annotations

from typing import Any, TypeVar

import msgpack
from pydantic import BaseModel, ConfigDict, ValidationError

SCHEMA_VERSION = 3
"""Bump on an incompatible change; readers reject payloads from another version.
2: `ToolCallRecord.block` (required: every parsed call of every turn is recorded, executed or not, and the
workers score from these records instead of re-decoding tokens); `Trajectory.group_key`.
3: `WeightManifest.signature` (HMAC of the learner; servers refuse unsigned announcements)."""


class ContractError(ValueError):
    """A payload that does not satisfy its contract. The message names the broken field."""


class Contract(BaseModel):
    """Base of every wire type: strict field set, a schema version carried on the wire."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=False)

    schema_version: int = SCHEMA_VERSION


T = TypeVar("T", bound=Contract)


def _check_version(data: Any) -> None:
    if isinstance(data, dict):
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ContractError(f"schema_version: got {version}, this reader understands {SCHEMA_VERSION}")


def validate(cls: type[T], data: Any) -> T:
    """Validate a decoded payload into `cls`, raising `ContractError` naming the broken field."""
    _check_version(data)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise ContractError(_describe(cls, exc)) from None


def _describe(cls: type, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return f"invalid {cls.__name__}: " + "; ".join(parts)


def dump_json(obj: Contract) -> str:
    return obj.model_dump_json()


def load_json(cls: type[T], text: str | bytes) -> T:
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(f"invalid {cls.__name__}: not JSON ({exc})") from None
    return validate(cls, data)


MSGPACK_INTS = (-(2**63), 2**64 - 1)
"""The integers msgpack can hold; JSON (a model's tool-call arguments) can hold any."""


def msgpack_safe(value):
    """`value` with every integer msgpack cannot hold written as its decimal string (lossless, and still JSON). Why:
    a policy wrote a 25-digit number in a tool call's arguments and the recorder's `packb` raised OverflowError — a
    500 for the whole agent run (soak of 2026-12-06)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if MSGPACK_INTS[0] <= value <= MSGPACK_INTS[1] else str(value)
    if isinstance(value, dict):
        return {k: msgpack_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [msgpack_safe(v) for v in value]
    return value


def packb(data) -> bytes:
    """msgpack of JSON-shaped `data`; integers it cannot hold become strings (`msgpack_safe`) — only when one is
    there, so the common case walks nothing twice."""
    try:
        return msgpack.packb(data, use_bin_type=True)
    except OverflowError:
        return msgpack.packb(msgpack_safe(data), use_bin_type=True)


def dump_msgpack(obj: Contract) -> bytes:
    return packb(obj.model_dump(mode="json"))


def load_msgpack(cls: type[T], payload: bytes) -> T:
    try:
        data = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError) as exc:
        raise ContractError(f"invalid {cls.__name__}: not msgpack ({exc})") from None
    return validate(cls, data)
