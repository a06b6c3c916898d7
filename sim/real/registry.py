"""Real tools: async Python callables (and allowlisted HTTP endpoints) grouped in packs, looked up by name.

A real tool answers for real (exact results, a real database); it shares the `Tool` interface with SGLS.
Only registered tools run: a name not in the registry is refused with an error result. Model output is
never executed as code: arguments are data passed to a fixed function.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sim.schemas import validation_error
from slca.contracts import ToolResult


class ToolError(Exception):
    """A real tool's domain error, returned to the model as an API error with this status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


RealFn = Callable[[dict[str, Any], Any], Awaitable[Any]]
"""`await fn(arguments, pack_state)` → JSON-serialisable content, or raises ToolError."""


@dataclass
class RealTool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: RealFn
    response_schema: dict[str, Any] | None = None
    pack: str = "custom"
    kind: str = "read"
    """'read' or 'write' (the task generator builds tasks from read tools only)."""
    timeout_s: float = 10.0

    def definition(self, mode: str = "real") -> dict[str, Any]:
        """The OpenAI tool definition offering this tool (`x-mode` real by default)."""
        fn: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.response_schema is not None:
            fn["x-response-schema"] = self.response_schema
        fn["x-mode"] = mode
        fn["x-pack"] = self.pack
        return {"type": "function", "function": fn}

    async def call(self, arguments: Any, episode) -> ToolResult:
        # The pack's per-episode state (a fresh database copy) is set-up, not call latency: made first.
        state = await episode.pack_state(self.pack)
        start = time.perf_counter()
        result = await self._call(arguments, state)
        result.latency_s = time.perf_counter() - start
        result.meta.setdefault("mode", "real")
        return result

    async def _call(self, arguments: Any, state: Any) -> ToolResult:
        problem = "arguments must be a JSON object" if not isinstance(arguments, dict) else None
        problem = problem or validation_error(self.parameters, arguments)
        if problem:
            return ToolResult(ok=False, status=400, error=problem)
        try:
            content = await asyncio.wait_for(self.fn(arguments, state), self.timeout_s)
        except ToolError as exc:
            return ToolResult(ok=False, status=exc.status, error=str(exc))
        except asyncio.TimeoutError:
            return ToolResult(ok=False, status=504, error=f"{self.name} timed out after {self.timeout_s}s")
        return ToolResult(ok=True, content=content)


@dataclass
class RealPack:
    name: str
    tools: dict[str, RealTool] = field(default_factory=dict)
    new_state: Callable[[], Awaitable[Any]] | None = None
    """Fresh per-episode state (e.g. a copy of the pack's database); None for stateless packs."""

    def add(self, tool: RealTool) -> RealTool:
        tool.pack = self.name
        self.tools[tool.name] = tool
        return tool


class RealRegistry:
    """Packs of real tools. Lookup by name, disambiguated by pack where two packs share a name."""

    def __init__(self) -> None:
        self.packs: dict[str, RealPack] = {}

    def add_pack(self, pack: RealPack) -> None:
        self.packs[pack.name] = pack

    def find(self, name: str, pack: str | None = None) -> tuple[RealTool | None, str | None]:
        """(tool, None) or (None, why not)."""
        if pack is not None:
            found = self.packs.get(pack, RealPack(pack)).tools.get(name)
            return (found, None) if found else (None, f"'{name}' is not an allowed real tool of pack '{pack}'")
        matches = [p.tools[name] for p in self.packs.values() if name in p.tools]
        if len(matches) == 1:
            return matches[0], None
        if not matches:
            return None, f"'{name}' is not an allowed real tool"
        packs = ", ".join(t.pack for t in matches)
        return None, f"real tool '{name}' is ambiguous (packs {packs}); set x-pack on its definition"

    def tools(self, pack: str) -> list[RealTool]:
        if pack not in self.packs:
            raise KeyError(f"unknown real pack {pack!r}; known: {', '.join(self.packs)}")
        return list(self.packs[pack].tools.values())
