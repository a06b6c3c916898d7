"""Replay one episode on the real tools and on SGLS, call by call, keeping what the measures need.

Both sides get the same calls in the same order: the real side runs the pack's tools on a fresh copy of its
database, the simulated side is offered the same definitions as `x-mode: simulated` (same parameter and response
schemas). Around each real state-changing call the real database is read as JSON (`snapshot`), so that the change
the simulator implies can be replayed on a copy of it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sim.fidelity.episodes import Episode
from slca.contracts import ToolResult


@dataclass
class Call:
    index: int
    tool: str
    kind: str
    """The real tool's kind: 'read', 'write' or 'generic'."""
    label: str
    arguments: dict[str, Any]
    real: ToolResult
    sim: ToolResult
    before: dict[str, Any] | None = None
    """The real database before this call (state-changing calls of packs with a database), else None."""
    after: dict[str, Any] | None = None


def simulated(definition: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(definition)
    out["function"]["x-mode"] = "simulated"
    out["function"].pop("x-pack", None)
    return out


async def replay(episode: Episode, tools: dict[str, Any], real_provider, sim_provider) -> list[Call]:
    definitions = [t.definition("real") for t in tools.values()]
    real_ep = await real_provider.new_episode(definitions, f"real-{episode.episode_id}")
    sim_ep = await sim_provider.new_episode([simulated(d) for d in definitions], f"sim-{episode.episode_id}")
    calls: list[Call] = []
    last: dict[str, Any] | None = None  # the database after the last write (reads change nothing)
    try:
        for index, step in enumerate(episode.steps):
            tool = tools[step.tool]
            database = await real_ep.pack_state(tool.pack)
            snapshot = getattr(database, "snapshot", None) if tool.kind == "write" else None
            before = (last if last is not None else snapshot()) if snapshot else None
            real = await real_ep.call(step.tool, copy.deepcopy(step.arguments))
            after = (snapshot() if real.ok else before) if snapshot else None
            last = after if snapshot else last
            sim = await sim_ep.call(step.tool, copy.deepcopy(step.arguments))
            calls.append(Call(index, step.tool, tool.kind, step.label, step.arguments, real, sim, before, after))
    finally:
        await real_ep.close()
        await sim_ep.close()
    return calls
