"""The gate's hold on the feed, across processes: while `slca gate` judges, its key `<prefix>:gate:feed-hold` is set
(ops/run/gate/runner.py `Gate.hold_feed`, with an expiry) and the feed sends nothing new (`ops.gate_holds_feed`).

One small task reads the key about once a second and drives an `asyncio.Event` (`open`: set while the key is absent)
that the feed's workers wait on beside the probe's hold, rather than a Redis round trip per request. A Redis error
never stops the feed: it is logged once (until Redis answers again) and the key is taken as absent.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ops.run.stopping import FailureLog, wait_or_stop
from slca.contracts import Streams
from slca.contracts.versions import gate_feed_hold_key

log = logging.getLogger("slca.feed")


class GateHold:
    """`open` is set while the gate does not hold the feed. Cleared until the first read has answered (a feed that
    starts while the gate judges sends nothing), so `run` must be running for the feed to go: `Feeder.run` runs it."""

    def __init__(self, client, key: str, poll_s: float = 1.0) -> None:
        self.client, self.key, self.poll_s = client, key, poll_s
        self.open = asyncio.Event()
        self.failures = FailureLog(
            log,
            f"feed: cannot read the gate's hold {key} (%s); feeding as if not held",
            f"feed: the gate's hold {key} is readable again",
        )

    @classmethod
    def from_url(cls, redis_url: str, prefix: str, poll_s: float = 1.0) -> "GateHold":
        client = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return cls(client, gate_feed_hold_key(Streams(prefix)), poll_s)

    async def held(self) -> bool:
        """Whether the key is set now; False when Redis cannot tell."""
        try:
            held = bool(await self.client.exists(self.key))
        except (RedisError, OSError) as exc:
            self.failures.failed(exc)
            return False
        self.failures.succeeded()
        return held

    async def run(self, stop: asyncio.Event) -> None:
        """Read the key every `poll_s` until `stop`; `open` follows it. At the end `open` is set (never left held)."""
        try:
            was: bool | None = None
            while not stop.is_set():
                held = await self.held()
                if held != was and was is not None:
                    log.info("feed: %s", "held while the gate judges" if held else "the gate's hold is released")
                was = held
                if held:
                    self.open.clear()
                else:
                    self.open.set()
                await wait_or_stop(stop, self.poll_s)
        finally:
            self.open.set()

    async def close(self) -> None:
        await self.client.aclose()
