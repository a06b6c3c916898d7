"""Appends finished trajectories to the bounded `slca:trajectories` stream; never fails a request.

The stream is bounded in entries (`max_stream_len`) and in bytes (`max_stream_bytes`). When adding would pass
either bound the trajectory is not added (we never trim entries other components have not consumed yet) and
back-pressure is counted; a Redis error is logged and counted the same way. Either way the request is served.

Why `MEMORY USAGE … SAMPLES n` for the bytes: it is what Redis itself holds for the stream, whoever added or
deleted entries (the workers XDEL each trajectory once its group is written), so nothing has to be kept in
step; with a few samples it reads a few of the stream's nodes and extrapolates (O(samples), not O(entries)),
and it travels with XLEN in one round trip. A running INCRBY/DECRBY counter would be cheaper still, but every
deleter in every component would have to know each entry's size, and one that forgot would make it drift.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from serve.metrics import ServeMetrics
from serve.settings import ServeSettings
from slca.contracts import Streams, Trajectory, encode_entry

log = logging.getLogger(__name__)
MEMORY_SAMPLES = 5
"""Stream nodes `MEMORY USAGE` reads to estimate the stream's size."""
DEFAULT_MAX_BYTES: int = ServeSettings.model_fields["max_stream_bytes"].default


class TrajectoryRecorder:
    def __init__(self, client: aioredis.Redis, streams: Streams, max_len: int, metrics: ServeMetrics,
                 max_bytes: int = DEFAULT_MAX_BYTES):  # fmt: skip
        self.client = client
        self.streams = streams
        self.max_len = max_len
        self.max_bytes = max_bytes
        self.metrics = metrics

    async def record(self, trajectory: Trajectory) -> bool:
        """True when added; False when the stream is full or Redis failed (counted, not raised)."""
        entry = encode_entry(trajectory, id=trajectory.id)
        size = sum(len(k) + len(v) for k, v in entry.items())
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.xlen(self.streams.trajectories)
            pipe.memory_usage(self.streams.trajectories, samples=MEMORY_SAMPLES)
            length, used = await pipe.execute()
            if length >= self.max_len or (used or 0) + size > self.max_bytes:
                self.metrics.backpressure.inc()
                return False
            await self.client.xadd(self.streams.trajectories, entry)
        except RedisError as exc:
            log.warning("trajectory %s not recorded: %s", trajectory.id, exc)
            self.metrics.record_failures.inc()
            return False
        self.metrics.trajectories_recorded.inc()
        return True
