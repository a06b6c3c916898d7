"""Weight hot-swap: one swap at a time, old version kept on failure, latency and outcome in metrics.

Sources: `POST /admin/weights` and the `slca:weights` channel (plus `slca:weights:latest` read at start).
The engine loads in the background and swaps between two engine steps; requests keep being served. A swap that
fails midway is rolled back by the engine (serve/engines/weights_io.py `WeightRollback`) and counted twice:
`slca_swaps_total{outcome="failed"}` and `slca_swap_rollbacks_total`. The channel subscriber outlives any
error: it logs, waits, and subscribes again, so one bad notification never stops the next swaps.
"""

from __future__ import annotations

import asyncio
import json
import logging

from redis.exceptions import RedisError

from serve.engines.base import Engine, WeightLoadError
from serve.engines.weights_io import WeightRollback
from serve.metrics import ServeMetrics
from slca.contracts import ContractError, Streams, WeightManifest
from slca.contracts.wire import validate

log = logging.getLogger(__name__)


class WeightSwapper:
    def __init__(self, engine: Engine, metrics: ServeMetrics, retry_s: float = 2.0):
        self.engine = engine
        self.metrics = metrics
        self.retry_s = retry_s
        """Wait before re-subscribing after an error of the channel loop."""
        self.last_error: str | None = None
        self.last_seconds: float | None = None
        # Swaps are serialised: two versions loading at once would race on which ends up serving.
        self._lock = asyncio.Lock()
        metrics.policy_version.set(engine.version)

    async def swap(self, version: int, path: str) -> float:
        """Seconds the swap took; raises WeightLoadError (old version still serving) with the reason."""
        async with self._lock:
            if version == self.engine.version:
                return 0.0
            try:
                seconds = await self.engine.swap_weights(path, version)
            except Exception as exc:  # any failure is a failed swap; the engine keeps (or restored) the old one
                error = exc if isinstance(exc, WeightLoadError) else WeightLoadError(f"{path}: {exc!r}")
                self.last_error = str(error)
                self.metrics.swaps.labels(outcome="failed").inc()
                if isinstance(exc, WeightRollback):
                    self.metrics.swap_rollbacks.inc()
                log.warning("weight swap to v%s failed, still serving v%s: %s", version, self.engine.version, error)
                if error is exc:
                    raise
                raise error from exc
            self.last_error, self.last_seconds = None, seconds
            self.metrics.swaps.labels(outcome="ok").inc()
            self.metrics.swap_seconds.observe(seconds)
            self.metrics.policy_version.set(version)
            log.info("now serving weights v%s (swap %.2fs)", version, seconds)
            return seconds

    async def swap_manifest(self, raw: bytes | str) -> None:
        """Apply a published manifest; a bad one is logged, never raised into the subscriber loop."""
        try:
            manifest = validate(WeightManifest, json.loads(raw))
        except (ContractError, ValueError) as exc:
            log.warning("ignoring weight notification: %s", exc)
            return
        if manifest.version < self.engine.version:
            return  # an older version published late: never go back
        try:
            await self.swap(manifest.version, manifest.path)
        except WeightLoadError:
            return  # counted and logged by swap(); keep following the channel

    async def follow(self, client, streams: Streams) -> None:
        """Background task: the newest published version at start, then every notification; never dies of an
        error (only of cancellation): whatever went wrong is logged, and it subscribes again."""
        while True:
            pubsub = None
            try:
                latest = await client.get(streams.weights_latest)
                if latest:
                    await self.swap_manifest(latest)
                pubsub = client.pubsub()
                await pubsub.subscribe(streams.weights_channel)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        await self.swap_manifest(message["data"])
            except RedisError as exc:  # Redis went away: retry, keep serving the current version
                log.warning("weight channel: %s; retrying in %.1fs", exc, self.retry_s)
            except Exception:  # a bug or a surprise must not end weight swaps for the life of the server
                log.exception("weight channel failed; retrying in %.1fs", self.retry_s)
            finally:
                if pubsub is not None:
                    await _close_quietly(pubsub)
            await asyncio.sleep(self.retry_s)


async def _close_quietly(pubsub) -> None:
    try:
        await pubsub.aclose()
    except Exception as exc:  # the connection may be the thing that failed
        log.debug("closing the weight subscription: %s", exc)
