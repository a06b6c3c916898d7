"""The tool provider serve's agent loop uses: episodes over offered tools, simulated (SGLS) or real.

`make_provider(settings, redis_url)` builds the shared parts once (backend, fault plan, cache, real
registry); `new_episode(tools)` binds the offered definitions to them with fresh per-episode state.
`Episode.call` never raises: unknown tools, refused real tools, bad arguments and tool crashes are all
error results with an HTTP-like status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from sim.backends import make_backend
from sim.bounds import limits_from
from sim.cache import ResponseCache
from sim.faults import FaultPlan
from sim.metrics import SimMetrics, default_metrics, metrics_for
from sim.real import RealRegistry, build_registry
from sim.schemas import tool_spec
from sim.settings import SimSettings
from sim.simulated import SimContext, SimulatedTool
from sim.state import EpisodeState
from sim.tasks.catalog import simulated_by_name
from sim.world import WorldSeed
from sim.world_seeds import load_world_seed
from slca.contracts import ToolResult

log = logging.getLogger(__name__)


class SimEpisode:
    """One agent run's tools and state (ids created, writes made, per-pack databases)."""

    def __init__(self, episode_id: str, tools: dict[str, Any], refused: dict[str, ToolResult], provider: "SimProvider"):
        self.episode_id = episode_id
        self.tools = tools
        self.refused = refused
        self.state = EpisodeState(world=provider.world)
        self._provider = provider
        self._pack_states: dict[str, Any] = {}

    async def pack_state(self, pack: str) -> Any:
        """The real pack's per-episode state (a fresh τ² database), created on first use."""
        if pack not in self._pack_states:
            real_pack = self._provider.registry.packs.get(pack)
            factory = real_pack.new_state if real_pack else None
            self._pack_states[pack] = await factory() if factory else None
        return self._pack_states[pack]

    async def call(self, name: str, arguments: Any) -> ToolResult:
        if name in self.refused:
            return self.refused[name]
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(ok=False, status=404, error=f"unknown tool '{name}'")
        if isinstance(arguments, str):  # models sometimes double-encode the arguments
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):  # JSONDecodeError, a >4,300-digit integer, deep nesting
                return ToolResult(ok=False, status=400, error="arguments are not valid JSON")
        try:
            result = await tool.call(arguments, self)
        except Exception as exc:  # the agent loop must never see an exception from a tool
            log.exception("tool %s crashed", name)
            return ToolResult(ok=False, status=500, error=f"internal error in tool '{name}': {type(exc).__name__}")
        if result.meta.get("mode") == "real":
            self._provider.metrics.calls.labels(name, "real").inc()
            self._provider.metrics.seconds.labels(name).observe(result.latency_s)
            if result.status == 400:
                self._provider.metrics.validation_failures.labels(name).inc()
        return result

    async def close(self) -> None:
        self._pack_states.clear()


class SimProvider:
    def __init__(
        self,
        settings: SimSettings,
        redis_url: str | None,
        metrics: SimMetrics | None = None,
        registry: RealRegistry | None = None,
        world: WorldSeed | None = None,
    ):
        self.settings = settings
        self.world = world
        """The objects that exist (`sim.world`), shared by every episode's state; None: no world (the default)."""
        self.metrics = metrics or default_metrics()
        self.registry = registry if registry is not None else build_registry(settings)
        self.metrics.tool.know(self.tool_names())  # labels for registered tools only (sim/metrics.py)
        cache = (
            ResponseCache(
                redis_url,
                settings.key_prefix,
                settings.cache_ttl_s,
                settings.cache_max_value_bytes,
                max_bytes=settings.cache_max_bytes,
            )
            if (redis_url and settings.cache)
            else None
        )
        self.limits = limits_from(settings)
        self.ctx = SimContext(
            make_backend(settings.backend, settings),
            FaultPlan.from_settings(settings),
            self.metrics,
            cache,
            settings.timeout_fault_delay_s,
            self.limits,
        )

    def tool_names(self) -> frozenset[str]:
        """The tools this provider knows without a caller: the catalog's simulated tools and the real packs'."""
        real = {name for pack in self.registry.packs.values() for name in pack.tools}
        return frozenset(simulated_by_name()) | real

    def _specs(self, tools: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
        """(definition, ToolSpec or the ValueError that makes it unusable) per offered tool."""
        out: list[tuple[Any, Any]] = []
        for definition in tools:
            try:
                out.append((definition, tool_spec(definition, self.limits)))
            except ValueError as exc:
                out.append((definition, exc))
        return out

    async def new_episode(self, tools: list[dict[str, Any]], episode_id: str | None = None) -> SimEpisode:
        bound: dict[str, Any] = {}
        refused: dict[str, ToolResult] = {}
        # checking a caller's schemas is bounded CPU work (cached per schema): off the event loop
        for definition, spec in await asyncio.to_thread(self._specs, list(tools or [])):
            if isinstance(spec, ValueError):
                name = _name_of(definition)
                if name:
                    refused[name] = ToolResult(ok=False, status=400, error=f"bad tool definition: {spec}")
                continue
            if spec.mode == "simulated":
                bound[spec.name] = SimulatedTool(spec, self.ctx)
                continue
            real, why = self.registry.find(spec.name, spec.pack)
            if real is None:
                refused[spec.name] = ToolResult(ok=False, status=403, error=f"refused: {why}")
            else:
                bound[spec.name] = real
        return SimEpisode(episode_id or str(uuid.uuid4()), bound, refused, self)

    async def close(self) -> None:
        await self.ctx.backend.close()
        if self.ctx.cache is not None:
            await self.ctx.cache.close()


def _name_of(definition: Any) -> str | None:
    if isinstance(definition, dict):
        fn = definition.get("function", definition)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return None


def make_provider(
    settings: SimSettings | None = None,
    redis_url: str | None = None,
    metrics_registry: CollectorRegistry | None = None,
    world: WorldSeed | None = None,
) -> SimProvider:
    """The public entry point: a ToolProvider over SGLS and the real packs (see module docstring). `world`: a world
    seed for the simulated tools (`sim.world`; None: the one `settings.world_seed` names, if any). A seeded simulator
    knows the database: ids the seed lacks are not found, seeded ids answer their records."""
    settings = settings or SimSettings()
    metrics = metrics_for(metrics_registry) if metrics_registry is not None else None
    world = world if world is not None else load_world_seed(settings.world_seed)
    return SimProvider(settings, redis_url, metrics, world=world)
