"""The warm start's gate records, kept across runs, so that a later run's first decision judges only its candidate.

The gate caches each version's records per run (`<data_dir>/gate/items/v<N>.jsonl`), so after the first decision
every later one evaluates the candidate alone. The first decision of every run also judged the promoted version —
the warm start, the same weights run after run — and cost twice a later one: under `ops.gate_budget_share` it
could not go before about minute 50 of a run (bench/online/run8: 304 s for 2 × 96 items on 2 cores).

The warm start's answer on the gate set depends only on its weights, the items, how they are asked and how they are
scored, so it is kept where the probe keeps its baseline (`ops.run.feed.baseline_cache`, in the folder
`gate-baselines`): keyed by the model directory's content, the item ids, the plan and the scorer's version, so a
stale entry is never read. At the gate's first look a hit becomes this run's `v<N>.jsonl` for the warm start's
version N (`ops.probe_baseline_version`, which `slca up` sets for the gate as for the feed); after an evaluation of
version N with no failed request the records are stored.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ops.experiments.eval.suite import EvalItem, ItemRecord, write_jsonl
from ops.run.feed.baseline_cache import BaselineCache

log = logging.getLogger(__name__)

CACHE_FOLDER = "gate-baselines"
"""Under `common.cache_dir`, beside the probe's `probe-baselines`."""


class WarmStartRecords:
    """The cache entry of the warm start (served as `version` in this run) on the gate items. `entry` hashes the
    model (a thread's work): None when the model is not a directory here."""

    def __init__(self, version: int, entry: Callable[[], BaselineCache | None]) -> None:
        self.version = version
        self.entry = entry
        self._cache: BaselineCache | None = None
        self._resolved = False

    async def cache(self) -> BaselineCache | None:
        if not self._resolved:
            try:
                self._cache = await asyncio.to_thread(self.entry)
            except (OSError, ImportError, ValueError) as exc:
                log.warning("gate: the warm start's cache cannot be read: %s", exc)
            self._resolved = True
        return self._cache

    async def seed(self, items: list[EvalItem], path: Path) -> float | None:
        """Write the warm start's cached records to `path` (this run's file for its version) when the run has none
        and the cache holds every item; the seconds per item they took when they ran (None: nothing seeded)."""
        if path.is_file():
            return None
        cache = await self.cache()
        hit = cache.load() if cache is not None else None
        if hit is None or not {i.item_id for i in items} <= {r.item_id for r in hit.records}:
            return None
        records = [replace(r, policy_version=self.version) for r in hit.records]  # this run's number for it
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(write_jsonl, records, path)
        log.info("gate: v%d (the warm start) read from the cache %s (it took %.0f s when it ran)", self.version,
                 cache.path, hit.seconds)  # fmt: skip
        return hit.seconds / max(1, len(hit.records))

    async def keep(self, version: int, records: list[ItemRecord], seconds: float) -> None:
        """Store the records of an evaluation of the warm start's version (none failed: the caller checks)."""
        if version != self.version:
            return
        cache = await self.cache()
        if cache is None:
            return
        try:
            path = await asyncio.to_thread(cache.store, records, seconds)
            log.info("gate: the warm start's records cached at %s", path)
        except OSError as exc:
            log.warning("gate: the warm start's records not cached: %s", exc)


__all__ = ["CACHE_FOLDER", "WarmStartRecords"]
