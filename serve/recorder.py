"""Appends finished trajectories to the bounded `slca:trajectories` stream; never fails a request.

When the stream is at its bound the trajectory is not added (we never trim entries other components have
not consumed yet) and back-pressure is counted; a Redis error is logged and counted the same way.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from serve.metrics import ServeMetrics
from slca.contracts import Streams, Trajectory, encode_entry

log = logging.getLogger(__name__)


class TrajectoryRecorder:
    def __init__(self, client: aioredis.Redis, streams: Streams, max_len: int, metrics: ServeMetrics):
        self.client = client
        self.streams = streams
        self.max_len = max_len
        self.metrics = metrics

    async def record(self, trajectory: Trajectory) -> bool:
        """True when added; False when the stream is full or Redis failed (counted, not raised)."""
        try:
            if await self.client.xlen(self.streams.trajectories) >= self.max_len:
                self.metrics.backpressure.inc()
                return False
            await self.client.xadd(self.streams.trajectories, encode_entry(trajectory, id=trajectory.id))
        except RedisError as exc:
            log.warning("trajectory %s not recorded: %s", trajectory.id, exc)
            self.metrics.record_failures.inc()
            return False
        self.metrics.trajectories_recorded.inc()
        return True
