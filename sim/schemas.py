"""JSON-schema helpers: argument validation with errors that name the field, canonical JSON, tool parts.

An OpenAI tool definition may carry our extensions either on the tool object or on its `function`:
`x-mode` ('simulated' | 'real'), `x-response-schema` (JSON schema of the result; `returns` is accepted too)
and `x-pack` (which real pack a real tool comes from, when two packs share a name).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

GENERIC_OBJECT: dict[str, Any] = {"type": "object"}


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no spaces (the seed and cache key of a call)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class ToolSpec:
    """The parts of an offered tool definition that SGLS and the real registry read."""

    name: str
    description: str
    parameters: dict[str, Any]
    response_schema: dict[str, Any] | None
    mode: str
    pack: str | None


def _ext(tool: dict[str, Any], fn: dict[str, Any], key: str) -> Any:
    return fn.get(key, tool.get(key))


def tool_spec(tool: dict[str, Any]) -> ToolSpec:
    """Read an OpenAI tool definition (or a bare function object). Raises ValueError when unusable."""
    if not isinstance(tool, dict):
        raise ValueError("a tool definition must be a JSON object")
    fn = tool.get("function", tool)
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError("a tool definition needs function.name")
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    response = _ext(tool, fn, "x-response-schema") or _ext(tool, fn, "returns")
    mode = _ext(tool, fn, "x-mode") or "simulated"
    if mode not in ("simulated", "real"):
        raise ValueError(f"tool {name}: x-mode must be 'simulated' or 'real', got {mode!r}")
    for label, schema in (("parameters", params), ("x-response-schema", response)):
        if schema is not None and (problem := schema_problem(canonical_json(schema))):
            raise ValueError(f"tool {name}: {label} is not a valid JSON schema: {problem}")
    return ToolSpec(name, str(fn.get("description", "")), params, response, mode, _ext(tool, fn, "x-pack"))


@lru_cache(maxsize=1024)
def schema_problem(schema_json: str) -> str | None:
    """Why a schema (as canonical JSON) is not a valid JSON schema, or None. Cached: checking is slow."""
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as exc:
        return exc.message
    return None


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A cached validator per distinct schema (building one resolves every `$ref`, which is costly)."""
    return _validator(canonical_json(schema))


def _path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        parts.append(missing)
    if error.validator == "additionalProperties" and "'" in error.message:
        parts.append(error.message.split("'")[1])
    return ".".join(p for p in parts if p) or "<root>"


def validation_error(schema: dict[str, Any], value: Any) -> str | None:
    """None when `value` satisfies `schema`, else one message naming the offending field."""
    errors = sorted(validator(schema).iter_errors(value), key=lambda e: (len(e.absolute_path), e.path))
    if not errors:
        return None
    first = errors[0]
    return f"invalid argument '{_path(first)}': {first.message}"


def is_valid(schema: dict[str, Any] | None, value: Any) -> bool:
    return validator(schema or GENERIC_OBJECT).is_valid(value)
