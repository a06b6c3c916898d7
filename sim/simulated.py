"""A simulated tool (SGLS): validate, apply the documented rules (`sim.rules`), maybe fault, answer from cache or
backend shaped by the episode (`sim.answer`), keep episode state.

The CPU work on the caller's schemas (validating the arguments, overlaying and re-checking the response) runs
in a worker thread under the provider's `SchemaLimits` deadline; the event loop only awaits it. A response
that cannot be produced within the limits is an error result (422), never an exception.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from sim.answer import consistent, effect
from sim.backends import Backend, SimRequest
from sim.bounds import DEFAULT_LIMITS, SchemaLimitError, SchemaLimits, within
from sim.cache import ResponseCache
from sim.faults import FAULTS, FaultPlan
from sim.metrics import SimMetrics
from sim.rules import refusal
from sim.schemas import ToolSpec, is_valid, validation_error
from sim.state import EpisodeState
from slca.contracts import ToolResult


@dataclass
class SimContext:
    """What every simulated tool of a provider shares."""

    backend: Backend
    faults: FaultPlan
    metrics: SimMetrics
    cache: ResponseCache | None
    timeout_delay_s: float = 0.0
    limits: SchemaLimits = field(default=DEFAULT_LIMITS)


def bad_request(message: str) -> ToolResult:
    return ToolResult(ok=False, status=400, error=message)


class SimulatedTool:
    def __init__(self, spec: ToolSpec, ctx: SimContext):
        self.spec = spec
        self.ctx = ctx
        self.name = spec.name
        self.description = spec.description
        self.parameters = spec.parameters
        self.response_schema = spec.response_schema

    @property
    def label(self) -> str:
        """The metrics' label of this tool: its name, or `other` once the label set is full (sim/metrics.py). Taken
        when it is called, so that tools offered and never called take no place in the set."""
        return self.ctx.metrics.tool(self.name)

    async def call(self, arguments: Any, episode) -> ToolResult:
        start = time.perf_counter()
        result = await self._call(arguments, episode.state)
        result.latency_s = time.perf_counter() - start
        self.ctx.metrics.seconds.labels(self.label).observe(result.latency_s)
        self.ctx.metrics.calls.labels(self.label, self.ctx.backend.name).inc()
        result.meta.setdefault("mode", "simulated")
        return result

    async def _call(self, arguments: Any, state: EpisodeState) -> ToolResult:
        problem = "arguments must be a JSON object" if not isinstance(arguments, dict) else None
        problem = problem or await asyncio.to_thread(validation_error, self.parameters, arguments, self.ctx.limits)
        if problem:
            self.ctx.metrics.validation_failures.labels(self.label).inc()
            return bad_request(problem)
        state.adopt(arguments)  # with a world seed: the seeded objects the call names, as if the episode stated them
        fault = self.ctx.faults.draw(self.name)
        if fault is None and (refused := refusal(self.spec, arguments, state)) is not None:
            if refused.ok:  # a search no value could match (no results), or an id the world seed holds
                refused.meta.setdefault("source", "rule")
                state.record(self.name, arguments, refused.content)
            return refused
        content_meta: dict[str, Any] = {}

        async def content() -> Any:
            value, meta = await self._content(arguments, state)
            content_meta.update(meta)
            return value

        try:
            if fault is not None:
                self.ctx.metrics.faults.labels(self.label, fault).inc()
                result = await FAULTS[fault](content, self.ctx.timeout_delay_s)
            else:
                result = ToolResult(ok=True, content=await content())
        except SchemaLimitError as exc:
            return ToolResult(
                ok=False, status=422, error=f"tool '{self.name}': no response within the simulator's bounds: {exc}"
            )
        result.meta.update(content_meta)
        return result

    async def _content(self, arguments: dict[str, Any], state: EpisodeState) -> tuple[Any, dict[str, Any]]:
        """The response body, consistent with the episode, and where it came from."""
        backend = self.ctx.backend
        key = None
        if self.ctx.cache is not None:
            key = self.ctx.cache.key(backend.name, self.name, arguments, state.fingerprint(), self.response_schema)
            cached = await self.ctx.cache.get(key)
            if not self.ctx.cache.missed(cached):
                self.ctx.metrics.cache_hits.labels(self.label).inc()
                state.record(self.name, arguments, cached, effect(self.spec, arguments))
                return cached, {"source": "cache"}
        answer = await backend.respond(SimRequest(self.spec, arguments, state.history, self.ctx.limits))
        content, changed = await asyncio.to_thread(self._consistent, state, arguments, answer.content)
        state.record(self.name, arguments, content, changed)
        if key is not None:
            await self.ctx.cache.set(key, content)
        return content, {"source": answer.source, "attempts": answer.attempts}

    def _consistent(self, state: EpisodeState, arguments: dict[str, Any], answer: Any) -> tuple[Any, dict[str, Any]]:
        """The answer shaped by the episode and the call (`sim.answer`), if that stays valid (worker thread, one
        deadline), and the state change it carries."""
        with within(self.ctx.limits):
            content, changed = consistent(self.spec, arguments, answer, state)
            if content is not answer and not is_valid(self.response_schema, content):  # never hand out an invalid body
                content = answer
        return content, changed
