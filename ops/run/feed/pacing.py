"""Pacing the feed to the learner: no more rollouts than the learner can use.

On one machine the API, the workers and the learner share the CPU. A feed that runs ahead of the learner fills
`slca:groups` with groups that are more than `learner.max_staleness` versions old by the time the learner reaches
them: they are dropped (`slca_stale_groups_dropped_total`), and the CPU that sampled them was taken from the
learner. So before each request the feed looks at the learner's backlog (lag + pending of the groups stream's
consumer groups) and waits while it is above `ops.feed_max_group_backlog`.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ops.observe.redis_view import backlog_of
from ops.run.stopping import wait_or_stop

log = logging.getLogger("slca.feed")


class GroupBacklog:
    """Reads the backlog of `stream` (the groups stream) from Redis; None when Redis cannot tell."""

    def __init__(self, redis_url: str, stream: str):
        self.client = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.stream = stream

    async def __call__(self) -> int | None:
        try:
            length = await self.client.xlen(self.stream)
            groups = await self.client.xinfo_groups(self.stream) if length else []
        except RedisError:
            return None  # never stall the feed on a monitoring read
        return backlog_of(int(length), groups)

    async def close(self) -> None:
        await self.client.aclose()


async def wait_while_held(open_: asyncio.Event | None, stop: asyncio.Event, *more: asyncio.Event | None) -> float:
    """Wait until `open_` and every one of `more` are set (None: never wait on it) or `stop` is; returns the seconds
    waited. The probe clears its event while a round runs (ops/run/feed/probe.py), the gate's hold while the gate
    judges (ops/run/feed/gate_hold.py): the feed sends only when neither holds it."""
    loop = asyncio.get_running_loop()
    started: float | None = None
    while not stop.is_set():
        closed = next((e for e in (open_, *more) if e is not None and not e.is_set()), None)
        if closed is None:
            break
        if started is None:
            started = loop.time()
        waiters = [asyncio.ensure_future(closed.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
    return 0.0 if started is None else loop.time() - started


async def wait_for_room(backlog, limit: int, stop: asyncio.Event, poll_s: float = 1.0) -> float:
    """Wait while `await backlog()` exceeds `limit` (0: never wait); returns the seconds waited."""
    if limit <= 0:
        return 0.0
    waited = 0.0
    while not stop.is_set():
        current = await backlog()
        if current is None or current <= limit:
            break
        if await wait_or_stop(stop, poll_s):
            break
        waited += poll_s
    return waited
