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
from sim.fidelity.variants import with_failure_set, with_reads_again
from sim.world import WorldSeed


async def measure(
    domain: str,
    sim_settings,
    limit: int | None,
    progress: Callable[[int, int, str], None] | None = None,
    sim_provider=None,
    world: WorldSeed | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """(per-call records, episodes replayed) of `sim_settings.backend` on `domain` (or of `sim_provider`, anything
    with `new_episode(tools, id)` and `close()`, e.g. a deliberately wrong simulator in the tests), seeded with
    `world` when given (`world_of`), else knowing no world."""
    from sim.provider import make_provider

    real = make_provider(
        sim_settings.model_copy(update={"backend": "schema", "real_packs": [domain]}),
        None,
        CollectorRegistry(),
    )
    sim_only = sim_settings.model_copy(update={"real_packs": []})
    sim = sim_provider or make_provider(sim_only, None, CollectorRegistry(), world=world)
    tools = {t.name: t for t in real.registry.tools(domain)}
    schemas = {name: t.response_schema for name, t in tools.items()}
    episodes = sample(expected_episodes(domain, tools), limit)
    records: list[dict[str, Any]] = []
    try:
        for i, episode in enumerate(episodes):
            if progress is not None:
                progress(i, len(episodes), episode.episode_id)
            scorer = EpisodeScorer(schemas)
            for call in await replay(with_reads_again(with_failure_set(episode, tools), tools), tools, real, sim):
                records.append({"domain": domain, "episode": episode.episode_id, **scorer.score(call).record()})
    finally:
        await sim.close()
        await real.close()
    return records, len(episodes)


def world_of(domain: str) -> WorldSeed | None:
    """The world seed of a domain: a τ² domain's own database (from its installed package); None for a domain whose
    tools keep no objects (the everyday pack)."""
    from sim.real.tau2 import DOMAINS, world_seed

    return world_seed(domain) if domain in DOMAINS else None


def run_name(backend: str, world: str | None) -> str:
    """How a run's files are named: the backend, and `-seeded` for a run with a world seed."""
    return f"{backend}-seeded" if world else backend


def write_run(
    folder: Path,
    backend: str,
    domain: str,
    records: list[dict[str, Any]],
    episodes: int,
    limit,
    command: str,
    world: str | None = None,
) -> Path:
    """records-<run>-<domain>.jsonl and summary-<run>-<domain>.json in `folder` (`run_name`; `world`: the seed's
    source, None for a run without one)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = run_name(backend, world)
    with open(folder / f"records-{name}-{domain}.jsonl", "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    summary = {
        "backend": backend,
        "world_seed": world,
        "domain": domain,
        "episodes": episodes,
        "limit": limit,
        "command": command,
        "when": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {_cores()} cores",
        "figures": summarise(records),
    }
    path = folder / f"summary-{name}-{domain}.json"
    path.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def _cores() -> int:
    import os

    return os.cpu_count() or 0
