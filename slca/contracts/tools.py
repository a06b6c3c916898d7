"""The tool interface the agent loop calls; simulated (SGLS) and real tools both satisfy it (docs/design.md#tools).

`serve/` depends only on these types; `sim/` provides the implementations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolResult:
    """What a tool call gave. Errors are results (an HTTP-like status and message), never exceptions."""

    ok: bool
    content: Any = None
    """JSON-serialisable payload shown to the model inside `<tool_response>`."""
    status: int = 200
    """HTTP-style status: 200, 400 (invalid arguments), 404, 429, 500, 503, 504 (timeout)..."""
    error: str | None = None
    fault: str | None = None
    """Name of the injected fault, when SGLS injected one (rate_limit, timeout, server_error, malformed,
    missing_fields)."""
    latency_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def for_model(self) -> Any:
        """The payload the model sees: the content, or an error object shaped like an API's."""
        if self.ok:
            return self.content
        return {"error": {"status": self.status, "message": self.error or "error"}}


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments."""
    response_schema: dict[str, Any] | None

    async def call(self, arguments: Any, episode: "Episode") -> ToolResult: ...


@runtime_checkable
class Episode(Protocol):
    """Per-episode state shared by the tool calls of one agent run (ids created, writes made)."""

    episode_id: str

    async def call(self, name: str, arguments: Any) -> ToolResult:
        """Run one tool call of this episode; an unknown tool or bad arguments give an error result."""
        ...

    async def close(self) -> None: ...


class ToolProvider(Protocol):
    """Builds episodes over a set of offered tools (OpenAI tool definitions, each marked simulated or real)."""

    async def new_episode(self, tools: list[dict[str, Any]], episode_id: str | None = None) -> Episode: ...

    async def close(self) -> None:
        """Release what the provider holds (backend connections, caches); the server calls it once, on exit."""
        ...
