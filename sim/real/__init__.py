"""Real tools: the registry and the shipped packs (everyday, τ² airline and retail, configured HTTP tools)."""

from __future__ import annotations

from collections.abc import Callable

from sim.real.everyday import everyday_pack
from sim.real.http import http_pack
from sim.real.registry import RealPack, RealRegistry, RealTool, ToolError
from sim.real.tau2 import tau2_pack

PACKS: dict[str, Callable[[float], RealPack]] = {
    "everyday": lambda timeout_s: everyday_pack(),
    "airline": lambda timeout_s: tau2_pack("airline", timeout_s),
    "retail": lambda timeout_s: tau2_pack("retail", timeout_s),
}


def build_registry(settings) -> RealRegistry:
    registry = RealRegistry()
    for name in settings.real_packs:
        if name not in PACKS:
            raise ValueError(f"unknown real pack {name!r}; known: {', '.join(PACKS)}")
        registry.add_pack(PACKS[name](settings.real_timeout_s))
    if settings.http_tools:
        registry.add_pack(
            http_pack(
                settings.http_tools, settings.http_allowlist, settings.real_timeout_s, settings.http_max_response_bytes
            )
        )
    return registry


__all__ = ["PACKS", "RealPack", "RealRegistry", "RealTool", "ToolError", "build_registry"]
