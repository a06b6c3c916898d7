"""Fault injection: rate limits, timeouts, server errors, malformed payloads, missing fields.

Why: agents must learn to recover from a flaky API, and tests must prove they do. Rates are per kind,
global or per tool; one uniform draw per call picks at most one fault (rates add up, capped at 1).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

from slca.contracts import ToolResult

FAULT_KINDS = ("rate_limit", "timeout", "server_error", "malformed", "missing_fields")


class FaultPlan:
    """Which fault (if any) a call gets, drawn from the configured rates."""

    def __init__(self, rates: dict[str, float], per_tool: dict[str, dict[str, float]], seed: int | None):
        for table in (rates, *per_tool.values()):
            unknown = set(table) - set(FAULT_KINDS)
            if unknown:
                raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        self.rates = rates
        self.per_tool = per_tool
        self.rng = random.Random(seed)

    @classmethod
    def from_settings(cls, settings) -> "FaultPlan":
        kinds = [k for k in settings.fault_kinds]
        share = settings.fault_rate / len(kinds) if kinds else 0.0
        rates = {k: share for k in kinds} | dict(settings.fault_rates)
        return cls({k: v for k, v in rates.items() if v > 0}, settings.tool_fault_rates, settings.fault_seed)

    def draw(self, tool: str) -> str | None:
        rates = self.per_tool.get(tool, self.rates)
        if not rates:
            return None
        x, edge = self.rng.random(), 0.0
        for kind in FAULT_KINDS:
            edge += rates.get(kind, 0.0)
            if x < edge:
                return kind
        return None


async def _rate_limit(content_fn, delay_s: float) -> ToolResult:
    return ToolResult(
        ok=False,
        status=429,
        error="rate limit exceeded; retry after 1 second",
        fault="rate_limit",
        meta={"retry_after_s": 1},
    )


async def _timeout(content_fn, delay_s: float) -> ToolResult:
    if delay_s:
        await asyncio.sleep(delay_s)
    return ToolResult(ok=False, status=504, error="upstream request timed out", fault="timeout")


async def _server_error(content_fn, delay_s: float) -> ToolResult:
    return ToolResult(ok=False, status=503, error="service temporarily unavailable", fault="server_error")


async def _malformed(content_fn, delay_s: float) -> ToolResult:
    # A truncated JSON body, as a proxy cutting a response short would give.
    text = json.dumps(await content_fn(), ensure_ascii=False)
    return ToolResult(ok=True, content=text[: max(1, len(text) // 2)], fault="malformed")


async def _missing_fields(content_fn, delay_s: float) -> ToolResult:
    content = await content_fn()
    if isinstance(content, dict) and content:
        keys = sorted(content)
        content = {k: v for k, v in content.items() if k not in keys[: max(1, len(keys) // 2)]}
    else:
        content = {}
    return ToolResult(ok=True, content=content, fault="missing_fields")


FAULTS: dict[str, Callable[[Callable[[], Awaitable[Any]], float], Awaitable[ToolResult]]] = {
    "rate_limit": _rate_limit,
    "timeout": _timeout,
    "server_error": _server_error,
    "malformed": _malformed,
    "missing_fields": _missing_fields,
}
