"""Serve's own bounded resources: the trajectory stream is bounded in bytes as well as entries. (Tool schemas are
the sim's to bound — `$ref` never fetched, regexes bounded, output bounded: tests/sim/test_hostile_schemas.py.)"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder
from serve.settings import ServeSettings
from slca.contracts import SegmentKind, Streams
from tests.support.trajectories import trajectory

BIG = [(SegmentKind.USER, 1), (SegmentKind.SUMMARY, 2999)]  # 3000 tokens


def test_recorder_stops_at_the_byte_bound_and_counts_backpressure(redis_url):
    max_bytes = 200_000

    async def main():
        client = aioredis.Redis.from_url(redis_url)
        metrics = ServeMetrics()
        recorder = TrajectoryRecorder(client, Streams("bytes"), max_len=10_000, metrics=metrics, max_bytes=max_bytes)
        # ~15 kB each: ~600 kB offered
        added = [await recorder.record(trajectory(BIG, task_id=f"t{i}")) for i in range(40)]
        used = await client.memory_usage("bytes:trajectories", samples=0)
        length = await client.xlen("bytes:trajectories")
        await client.aclose()
        return added, used, length, metrics

    added, used, length, metrics = asyncio.run(main())
    assert added[0] and not added[-1] and added == sorted(added, reverse=True)  # adds until full, then refuses
    assert used <= max_bytes and length == sum(added) < 40
    assert metrics.backpressure._value.get() == 40 - length
    assert metrics.trajectories_recorded._value.get() == length
    assert ServeSettings().max_stream_bytes > 0
