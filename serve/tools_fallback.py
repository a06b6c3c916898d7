"""A minimal schema-valid simulated tool provider, used only when `sim/` (SGLS) is not importable.

It validates arguments with jsonschema (an invalid call gives a 400-style error result, never an exception)
and answers with an object that satisfies the tool's declared response schema (`x-response-schema` or
`returns`), synthesised deterministically from the call; without a declared schema it echoes the call.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import jsonschema

from slca.chat.hermes import function_of
from slca.contracts import ToolResult


def _synth(schema: dict[str, Any], seed: str) -> Any:
    kind = schema.get("type", "object")
    if "enum" in schema:
        return schema["enum"][int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    if isinstance(kind, list):
        kind = kind[0]
    digest = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _synth(v, f"{seed}/{k}") for k, v in props.items()}
    if kind == "array":
        return [_synth(schema.get("items", {"type": "string"}), f"{seed}/0")]
    if kind == "integer":
        return digest % 100
    if kind == "number":
        return (digest % 10000) / 100
    if kind == "boolean":
        return bool(digest % 2)
    if kind == "null":
        return None
    return f"value-{digest % 1000}"


class SchemaEpisode:
    def __init__(self, tools: list[dict[str, Any]], episode_id: str):
        self.episode_id = episode_id
        self.tools = {function_of(t).get("name"): function_of(t) for t in tools}

    async def call(self, name: str, arguments: Any) -> ToolResult:
        fn = self.tools.get(name)
        if fn is None:
            return ToolResult(ok=False, status=404, error=f"unknown tool {name!r}")
        try:
            jsonschema.validate(arguments, fn.get("parameters") or {"type": "object"})
        except jsonschema.ValidationError as exc:
            return ToolResult(ok=False, status=400, error=f"invalid arguments: {exc.message}")
        seed = f"{name}:{json.dumps(arguments, sort_keys=True)}"
        schema = fn.get("x-response-schema") or fn.get("returns")
        content = _synth(schema, seed) if schema else {"ok": True, "tool": name, "arguments": arguments}
        return ToolResult(ok=True, content=content, meta={"backend": "serve-fallback"})

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
