"""A minimal schema-valid simulated tool provider, used only when `sim/` (SGLS) is not importable.

It validates arguments with jsonschema (an invalid call gives a 400-style error result, never an exception)
and answers with an object that satisfies the tool's declared response schema (`x-response-schema` or
`returns`), synthesised deterministically from the call; without a declared schema it echoes the call.

The schemas are the caller's, so the work is bounded as in SGLS, more bluntly: no `$ref` is ever fetched (the
registry's retrieve refuses); regular expressions (`pattern`, `patternProperties`) and `uniqueItems` are not
checked at all (Python's `re` cannot be interrupted, and SGLS, which bounds them, is the real simulator);
schemas past `MAX_SCHEMA_BYTES`/`MAX_SCHEMA_DEPTH` are refused; the synthesised value is bounded in depth,
properties and bytes; and the work runs in a worker thread that the call stops waiting for after
`DEADLINE_S`, so the event loop never runs it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from slca.chat.hermes import function_of
from slca.contracts import ToolResult

MAX_SCHEMA_BYTES = 256_000
MAX_SCHEMA_DEPTH = 32
MAX_DEPTH = 8
MAX_PROPERTIES = 64
MAX_OUTPUT_BYTES = 65_536
DEADLINE_S = 2.0
_UNCHECKED = frozenset({"pattern", "patternProperties", "uniqueItems", "format"})
"""Keywords the fallback does not check (see the module docstring)."""


class _TooLarge(ValueError):
    pass


def _refuse(uri: str):
    raise NoSuchResource(ref=uri)


_REGISTRY: Registry = Registry(retrieve=_refuse)  # type: ignore[call-arg]


def _reduced(schema: Any, depth: int = 0) -> Any:
    """The schema without the keywords the fallback does not check (a `patternProperties` also frees the
    `additionalProperties`/`unevaluatedProperties` beside it: the fallback accepts more, never less)."""
    if depth > MAX_SCHEMA_DEPTH:
        raise _TooLarge(f"schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(schema, list):
        return [_reduced(s, depth + 1) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("const", "enum", "default", "examples") else _reduced(v, depth + 1))
           for k, v in schema.items() if k not in _UNCHECKED}  # fmt: skip
    if "patternProperties" in schema:
        out.pop("additionalProperties", None)
        out.pop("unevaluatedProperties", None)
    return out


def _check(arguments: Any, schema: dict[str, Any]) -> str | None:
    try:
        reduced = _reduced(schema)  # first: it also refuses a schema too deep to serialise
        if len(json.dumps(reduced)) > MAX_SCHEMA_BYTES:
            raise _TooLarge(f"the parameters schema is larger than {MAX_SCHEMA_BYTES} bytes")
        cls = jsonschema.validators.validator_for(reduced, default=jsonschema.Draft202012Validator)
        cls.check_schema(reduced)
        error = jsonschema.exceptions.best_match(cls(reduced, registry=_REGISTRY).iter_errors(arguments))
    except _TooLarge as exc:
        return f"invalid arguments: {exc}"
    except jsonschema.SchemaError as exc:
        return f"invalid tool schema: {exc.message[:200]}"
    except Unresolvable as exc:
        return f"invalid tool schema: unresolvable $ref {str(getattr(exc, 'ref', exc))[:100]!r} (never fetched)"
    except RecursionError:
        return "invalid tool schema: it recurses too deeply to check"
    return None if error is None else f"invalid arguments: {error.message[:300]}"


class _Budget:
    def __init__(self, limit: int):
        self.left = limit

    def spend(self, value: Any) -> Any:
        self.left -= len(json.dumps(value, default=str)) if isinstance(value, (dict, list, str)) else 8
        if self.left < 0:
            raise _TooLarge(f"the response would be larger than {MAX_OUTPUT_BYTES} bytes")
        return value


def _synth(schema: Any, seed: str, budget: _Budget, depth: int = 0) -> Any:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return budget.spend(f"value-{int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16) % 1000}")
    kind = schema.get("type", "object")
    if "enum" in schema and schema["enum"]:
        return budget.spend(schema["enum"][int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(schema["enum"])])
    if "const" in schema:
        return budget.spend(schema["const"])
    if isinstance(kind, list):
        kind = kind[0] if kind else "object"
    digest = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    if kind == "object":
        props = list((schema.get("properties") or {}).items())[:MAX_PROPERTIES]
        out = {}
        for key, sub in props:
            budget.spend(key)
            out[key] = _synth(sub, f"{seed}/{key}", budget, depth + 1)
        return out
    if kind == "array":
        return [_synth(schema.get("items", {"type": "string"}), f"{seed}/0", budget, depth + 1)]
    if kind == "integer":
        return digest % 100
    if kind == "number":
        return (digest % 10000) / 100
    if kind == "boolean":
        return bool(digest % 2)
    if kind == "null":
        return None
    return budget.spend(f"value-{digest % 1000}")


def _answer(name: str, fn: dict[str, Any], arguments: Any) -> ToolResult:
    """Validate and synthesise (worker thread)."""
    problem = _check(arguments, fn.get("parameters") or {"type": "object"})
    if problem:
        return ToolResult(ok=False, status=400, error=problem)
    seed = f"{name}:{json.dumps(arguments, sort_keys=True)}"
    schema = fn.get("x-response-schema") or fn.get("returns")
    try:
        content = _synth(schema, seed, _Budget(MAX_OUTPUT_BYTES)) if schema else {"ok": True, "tool": name,
                                                                                   "arguments": arguments}  # fmt: skip
    except _TooLarge as exc:
        return ToolResult(ok=False, status=422, error=f"tool '{name}': no response within bounds: {exc}")
    return ToolResult(ok=True, content=content, meta={"backend": "serve-fallback"})


class SchemaEpisode:
    def __init__(self, tools: list[dict[str, Any]], episode_id: str):
        self.episode_id = episode_id
        self.tools = {function_of(t).get("name"): function_of(t) for t in tools}

    async def call(self, name: str, arguments: Any) -> ToolResult:
        fn = self.tools.get(name)
        if fn is None:
            return ToolResult(ok=False, status=404, error=f"unknown tool {name!r}")
        try:
            # a thread cannot be stopped: past the deadline the call answers and the thread finishes alone
            return await asyncio.wait_for(asyncio.to_thread(_answer, name, fn, arguments), DEADLINE_S)
        except asyncio.TimeoutError:
            return ToolResult(ok=False, status=422, error=f"tool '{name}': its schema took longer than "
                                                          f"{DEADLINE_S}s to check")  # fmt: skip

    async def close(self) -> None:
        return None


class SchemaToolProvider:
    async def new_episode(self, tools: list[dict[str, Any]], episode_id: str | None = None) -> SchemaEpisode:
        return SchemaEpisode(tools, episode_id or str(uuid.uuid4()))


def make_tool_provider(redis_url: str | None, sim_settings=None, metrics_registry=None):
    """SGLS (`sim.make_provider`) when `sim/` is installed, else the minimal fallback above."""
    try:
        import sim
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "sim":
            return SchemaToolProvider()
        raise
    if not hasattr(sim, "make_provider"):
        return SchemaToolProvider()
    # the simulator runs inside this process: its metrics belong on the API's /metrics registry
    return sim.make_provider(sim_settings, redis_url, metrics_registry=metrics_registry)
