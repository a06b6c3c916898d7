"""What a response backend gets and gives, the backend registry, and the validate-and-retry loop.

Synthesis and validation are CPU work on a caller's schema: backends run them in a worker thread
(`asyncio.to_thread`), bounded by the request's `SchemaLimits`, so the event loop never waits on them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sim.bounds import DEFAULT_LIMITS, SchemaLimits
from sim.schemas import GENERIC_OBJECT, ToolSpec, canonical_json, is_valid
from sim.state import CREATE_VERBS, identical_calls, verb_of
from sim.synth import seed_of, synthesise


@dataclass
class SimRequest:
    spec: ToolSpec
    arguments: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    limits: SchemaLimits = DEFAULT_LIMITS
    """Bounds of the synthesis and validation this request causes."""

    @property
    def response_schema(self) -> dict[str, Any]:
        return self.spec.response_schema or GENERIC_OBJECT

    @property
    def synthesis_schema(self) -> dict[str, Any]:
        """What the synthesiser fills: the response schema, or (none declared) a status object echoing the call."""
        if self.spec.response_schema:
            return self.spec.response_schema
        props = dict(self.spec.parameters.get("properties", {})) if isinstance(self.spec.parameters, dict) else {}
        props.update({"status": {"type": "string", "enum": ["ok"]}, "result": {"type": "string"}})
        return {"type": "object", "properties": props, "required": ["status", "result"]}

    @property
    def seed(self) -> int:
        """The same call answers the same, except a creating call repeated in the episode: the real tool makes a
        second object (a second reservation with its own id), so the n-th repeat draws its own answer."""
        call = self.spec.name + "\x1f" + canonical_json(self.arguments)
        if verb_of(self.spec.name) in CREATE_VERBS and (
            repeats := identical_calls(self.history, self.spec.name, self.arguments)
        ):
            call += f"\x1f{repeats}"
        return seed_of(call)


@dataclass
class Answer:
    content: Any
    source: str
    """'schema' (synthesiser), 'model' (a model answer that validated) or 'fallback' (model failed; synthesiser)."""
    attempts: int = 0


class Backend(Protocol):
    name: str

    async def respond(self, request: SimRequest) -> Answer: ...

    async def close(self) -> None: ...


def schema_answer(request: SimRequest) -> Any:
    """The synthesiser's answer (CPU work: call it from a worker thread). Raises SchemaLimitError."""
    return synthesise(request.synthesis_schema, request.seed, request.limits)


async def validate_and_retry(
    request: SimRequest, attempt: Callable[[int], Awaitable[str | None]], max_retries: int
) -> Answer:
    """Ask the model up to 1 + max_retries times; keep the first answer that parses and validates.

    `attempt(i)` returns the model's raw text (None when the endpoint failed). When no attempt validates,
    the deterministic synthesiser answers, so the agent loop always gets a schema-valid response.
    """
    for i in range(1 + max_retries):
        text = await attempt(i)
        value = extract_json(text) if text is not None else _MISSING
        if value is not _MISSING and await asyncio.to_thread(is_valid, request.response_schema, value, request.limits):
            return Answer(value, "model", i + 1)
    return Answer(await asyncio.to_thread(schema_answer, request), "fallback", 1 + max_retries)


_MISSING = object()


def extract_json(text: str) -> Any:
    """The first JSON value in a model's text (code fences and surrounding prose tolerated)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text[i:])
                return value
            except json.JSONDecodeError:
                continue
    return _MISSING


def build_prompt(request: SimRequest, history_limit: int = 5) -> list[dict[str, str]]:
    """Chat messages casting the model as the API server of this tool."""
    spec = request.spec
    lines = [
        f"Tool: {spec.name}",
        f"Description: {spec.description}",
        f"Parameters schema: {json.dumps(spec.parameters, ensure_ascii=False)}",
        f"Response schema: {json.dumps(request.response_schema, ensure_ascii=False)}",
    ]
    for past in request.history[-history_limit:]:
        lines.append(
            f"Earlier call: {past['name']}({json.dumps(past['arguments'], ensure_ascii=False)}) -> "
            f"{json.dumps(past['content'], ensure_ascii=False)[:600]}"
        )
    lines.append(f"Call: {spec.name}({json.dumps(request.arguments, ensure_ascii=False)})")
    lines.append("Respond with the JSON response body only.")
    system = (
        "You are the server of a JSON API. Given a tool call, reply with a realistic JSON response that "
        "follows the response schema exactly and agrees with earlier calls. Output only JSON."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]
