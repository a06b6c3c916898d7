"""The agent loop's tools: SGLS and the real tools, through the sim's public `make_provider` (the `ToolProvider`
protocol of `slca.contracts`). This is the one module of serve that reaches the sim (tests/test_layering.py).

Serve synthesises no tool answer of its own: when the sim is not installed, every call is answered with a
structured 501 error (never an exception into the agent loop), so the API still serves plain chat and an agent
run still finishes, with the reason in its trajectory.
"""

from __future__ import annotations

import uuid
from typing import Any

from slca.contracts import ToolProvider, ToolResult

NO_SIM = "no tool simulator installed: the sim component (SGLS) answers agent tool calls"


class UnavailableEpisode:
    """An episode whose every call is the structured error `NO_SIM`."""

    def __init__(self, episode_id: str):
        self.episode_id = episode_id

    async def call(self, name: str, arguments: Any) -> ToolResult:
        return ToolResult(ok=False, status=501, error=f"tool {name!r}: {NO_SIM}")

    async def close(self) -> None:
        return None


class UnavailableToolProvider:
    async def new_episode(self, tools: list[dict[str, Any]], episode_id: str | None = None) -> UnavailableEpisode:
        return UnavailableEpisode(episode_id or str(uuid.uuid4()))

    async def close(self) -> None:
        return None


def make_tool_provider(redis_url: str | None, sim_settings=None, metrics_registry=None) -> ToolProvider:
    """SGLS (`sim.make_provider`) when the sim is installed, else `UnavailableToolProvider`."""
    try:
        from sim import make_provider
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "sim":
            return UnavailableToolProvider()
        raise
    # the simulator runs inside this process: its metrics belong on the API's /metrics registry
    return make_provider(sim_settings, redis_url, metrics_registry=metrics_registry)


def known_tool_names(provider: ToolProvider) -> frozenset[str]:
    """The tools a provider knows without a caller (the sim's catalog and real packs), for metric labels; none for
    a provider that does not say."""
    names = getattr(provider, "tool_names", None)
    return frozenset(names()) if callable(names) else frozenset()
