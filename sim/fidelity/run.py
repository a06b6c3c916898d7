"""Measure one backend on one domain: replay its episodes (with the failure set), score, write records and summary."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sim.fidelity.episodes import expected_episodes, sample
from sim.fidelity.measures import EpisodeScorer
from sim.fidelity.replay import replay
from sim.fidelity.summary import summarise
from sim.fidelity.variants import with_failure_set


async def measure(
    domain: str,
    sim_settings,
    limit: int | None,
    progress: Callable[[int, int, str], None] | None = None,
    sim_provider=None,
) -> tuple[list[dict[str, Any]], int]:
    """(per-call records, episodes replayed) of `sim_settings.backend` on `domain` (or of `sim_provider`, anything
    with `new_episode(tools, id)` and `close()`, e.g. a deliberately wrong simulator in the tests)."""
    from sim.provider import make_provider

    real = make_provider(
        sim_settings.model_copy(update={"backend": "schema", "real_packs": [domain]}), None, CollectorRegistry()
    )
    sim = sim_provider or make_provider(sim_settings.model_copy(update={"real_packs": []}), None, CollectorRegistry())
    tools = {t.name: t for t in real.registry.tools(domain)}
    schemas = {name: t.response_schema for name, t in tools.items()}
    episodes = sample(expected_episodes(domain, tools), limit)
    records: list[dict[str, Any]] = []
    try:
        for i, episode in enumerate(episodes):
            if progress is not None:
                progress(i, len(episodes), episode.episode_id)
            scorer = EpisodeScorer(schemas)
            for call in await replay(with_failure_set(episode, tools), tools, real, sim):
                records.append({"domain": domain, "episode": episode.episode_id, **scorer.score(call).record()})
    finally:
        await sim.close()
        await real.close()
    return records, len(episodes)


def write_run(
    folder: Path, backend: str, domain: str, records: list[dict[str, Any]], episodes: int, limit, command: str
) -> Path:
    """records-<backend>-<domain>.jsonl and summary-<backend>-<domain>.json in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"records-{backend}-{domain}.jsonl", "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    summary = {
        "backend": backend,
        "domain": domain,
        "episodes": episodes,
        "limit": limit,
        "command": command,
        "when": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {_cores()} cores",
        "figures": summarise(records),
    }
    path = folder / f"summary-{backend}-{domain}.json"
    path.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def _cores() -> int:
    import os

    return os.cpu_count() or 0
