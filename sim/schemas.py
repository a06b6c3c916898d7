"""JSON-schema helpers: argument validation with errors that name the field, canonical JSON, tool parts.

An OpenAI tool definition may carry our extensions either on the tool object or on its `function`:
`x-mode` ('simulated' | 'real'), `x-response-schema` (JSON schema of the result; `returns` is accepted too)
and `x-pack` (which real pack a real tool comes from, when two packs share a name).

Schemas come from API callers, so checking and validating them is bounded (`sim.bounds`): a schema too large,
too deep or with a refused regular expression is not a usable tool definition; no `$ref` is ever fetched (the
registry, `slca.schema_registry`, shared with serve, refuses: a remote or file reference is unresolvable, an
error, never a request); regular expressions run in `sim.patterns` (timeout, no catastrophic backtracking); every
keyword checks the deadline.
"""

from __future__ import annotations

import hashlib
import json
import reprlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from sim import patterns
from sim.bounds import DEFAULT_LIMITS, SchemaLimitError, SchemaLimits, check_deadline, within
from sim.lru import ByteLRU
from slca.schema_registry import SAFE_REGISTRY

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


def tool_spec(tool: dict[str, Any], limits: SchemaLimits = DEFAULT_LIMITS) -> ToolSpec:
    """Read an OpenAI tool definition (or a bare function object). Raises ValueError when unusable
    (SchemaLimitError, a ValueError, when a schema passes the bounds)."""
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
        if schema is None:
            continue
        if not _depth_within(schema, limits.max_schema_depth):
            raise SchemaLimitError(f"tool {name}: {label} nests deeper than {limits.max_schema_depth} levels")
        text = canonical_json(schema)
        if len(text) > limits.max_schema_bytes:
            raise SchemaLimitError(f"tool {name}: {label} is larger than {limits.max_schema_bytes} bytes")
        if problem := schema_problem(text):
            raise ValueError(f"tool {name}: {label} is not a valid JSON schema: {problem}")
    return ToolSpec(name, str(fn.get("description", "")), params, response, mode, _ext(tool, fn, "x-pack"))


def _depth_within(value: Any, limit: int) -> bool:
    if limit < 0:
        return False
    if isinstance(value, dict):
        return all(_depth_within(v, limit - 1) for v in value.values())
    if isinstance(value, list):
        return all(_depth_within(v, limit - 1) for v in value)
    return True


_PROBLEMS = ByteLRU(max_bytes=1 << 20)
"""Schema digest → why it is unusable (or None). Keyed by digest: a cached verdict costs ~200 bytes."""


def schema_problem(schema_json: str) -> str | None:
    """Why a schema (as canonical JSON) is not a usable JSON schema, or None. Cached: checking is slow."""
    return _PROBLEMS.get_or_make(
        digest(schema_json), lambda: _schema_problem(json.loads(schema_json)), lambda problem: 200 + len(problem or "")
    )


def _schema_problem(schema: Any) -> str | None:
    # our own bounds first: the metaschema's `format: regex` check compiles every pattern
    if problem := _pattern_problems(schema):
        return problem
    try:  # linear in the schema's size, which `tool_spec` bounded; its regexes passed the bounds above
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message
    if isinstance(schema, dict):
        return _remote_ref_problem(schema)
    return None


_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are instances, not schemas: a `pattern` key inside them is data."""


def _walk(schema: Any):
    """Every (key, value) pair of every object in a schema, not looking inside data keywords."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                yield key, value
                if key not in _DATA_KEYWORDS:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def _pattern_problems(schema: Any) -> str | None:
    has_unevaluated = has_pattern_properties = False
    for key, value in _walk(schema):
        found: list[str] = []
        if key == "pattern" and isinstance(value, str):
            found = [value]
        elif key == "patternProperties" and isinstance(value, dict):
            found, has_pattern_properties = list(value), True
        has_unevaluated = has_unevaluated or key == "unevaluatedProperties"
        for pattern in found:
            if problem := patterns.pattern_problem(pattern):
                return problem
    if has_unevaluated and has_pattern_properties:
        # jsonschema's unevaluatedProperties matches patternProperties with `re` (unbounded): not offered
        return "unevaluatedProperties together with patternProperties is not supported"
    return None


def _remote_ref_problem(schema: dict[str, Any]) -> str | None:
    """A `$ref` with a scheme (http:, file:, urn: ...) must name a resource embedded in the schema (`$id`)."""
    resolver = None
    for key, ref in _walk(schema):
        if key not in ("$ref", "$dynamicRef") or not isinstance(ref, str) or not urlsplit(ref).scheme:
            continue
        resolver = resolver or SAFE_REGISTRY.resolver_with_root(DRAFT202012.create_resource(schema))
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return f"$ref {ref[:100]!r} cannot be resolved (schemas are never fetched from the network or files)"
    return None


# --- bounded validation -------------------------------------------------------------------------------------


def _search(pattern: str, text: str) -> bool:
    return patterns.search(pattern, text)  # the budget of the context (`within`)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{_REPR.repr(instance)} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    properties, pattern_props = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in pattern_props)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        extras_text = ", ".join(repr(e) for e in sorted(extras)[:10])
        yield ValidationError(f"Additional properties are not allowed ({_short(extras_text)} unexpected)")


def _unique_items(validator, unique, instance, schema):
    """jsonschema's own check falls back to comparing every pair (quadratic) for objects; this one hashes."""
    if unique and validator.is_type(instance, "array"):
        keys = [_identity(item) for item in instance]
        if len(set(keys)) != len(keys):
            yield ValidationError(f"{_REPR.repr(instance)} has non-unique elements")


def _identity(value: Any) -> Any:
    """A hashable key equal for JSON-equal values (1 == 1.0, but true is not 1)."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_identity(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _identity(v)) for k, v in value.items()))
    return ("other", repr(value))


def _with_deadline(keyword):
    def checked(validator, value, instance, schema):
        check_deadline("schema validation")
        yield from keyword(validator, value, instance, schema)

    return checked


_OVERRIDES = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
BoundedValidator = validators.extend(
    Draft202012Validator,
    {name: _with_deadline(_OVERRIDES.get(name, fn)) for name, fn in Draft202012Validator.VALIDATORS.items()},
)
"""Draft 2020-12 with bounded regular expressions and uniqueness, and the deadline checked at every keyword."""

VALIDATOR_CACHE_BYTES = 64 << 20
_VALIDATORS = ByteLRU(max_bytes=VALIDATOR_CACHE_BYTES)
"""Schema digest → validator. A validator holds the parsed schema: charged ~10 bytes per byte of its JSON."""


def _bounded_validator(schema: dict[str, Any]):
    return BoundedValidator(schema, registry=SAFE_REGISTRY)


def validator(schema: dict[str, Any]):
    """A cached validator per distinct schema (building one resolves every `$ref`, which is costly)."""
    text = canonical_json(schema)
    return _VALIDATORS.get_or_make(
        digest(text), lambda: _bounded_validator(json.loads(text)), lambda _v: 1024 + 10 * len(text)
    )


def _path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        parts.append(missing)
    if error.validator == "additionalProperties" and "'" in error.message:
        parts.append(error.message.split("'")[1])
    return ".".join(p for p in parts if p) or "<root>"


def _excerpts() -> reprlib.Repr:
    """Values in messages: a bounded excerpt (an argument may be a megabyte)."""
    out = reprlib.Repr()
    out.maxlevel, out.maxlist, out.maxdict, out.maxstring, out.maxother = 3, 5, 5, 80, 80
    return out


_REPR = _excerpts()


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unchecked(exc: Exception) -> str:
    """The message of a validation that could not run to the end within the bounds."""
    if isinstance(exc, Unresolvable):
        return f"unresolvable $ref {_short(str(getattr(exc, 'ref', exc)), 100)!r} (schemas are never fetched)"
    if isinstance(exc, RecursionError):
        return "the schema recurses too deeply to check"
    return _short(str(exc))


def validation_error(schema: dict[str, Any], value: Any, limits: SchemaLimits | None = None) -> str | None:
    """None when `value` satisfies `schema`, else one message naming the offending field (or saying why the
    check could not finish within the bounds: a pattern too slow, the deadline, an unresolvable `$ref`)."""
    try:
        with within(limits):
            errors = sorted(validator(schema).iter_errors(value), key=lambda e: (len(e.absolute_path), e.path))
    except (SchemaLimitError, Unresolvable, RecursionError) as exc:
        return f"arguments could not be checked: {_unchecked(exc)}"
    if not errors:
        return None
    first = errors[0]
    return f"invalid argument '{_short(_path(first), 100)}': {_short(first.message)}"


def is_valid(schema: dict[str, Any] | None, value: Any, limits: SchemaLimits | None = None) -> bool:
    """Whether `value` satisfies `schema`; False too when that cannot be established within the bounds."""
    try:
        with within(limits):
            return validator(schema or GENERIC_OBJECT).is_valid(value)
    except (SchemaLimitError, Unresolvable, RecursionError):
        return False
