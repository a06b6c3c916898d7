"""sim: SGLS (the schema-guided tool simulator), real tools and task packs (docs/design.md#tools).

Public API: `make_provider(settings, redis_url) -> ToolProvider`; task packs in `sim.tasks`.
"""

from sim.provider import SimEpisode, SimProvider, make_provider

__all__ = ["SimEpisode", "SimProvider", "make_provider"]
