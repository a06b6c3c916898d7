"""Serve's own bounded resources: the trajectory stream is bounded in bytes as well as entries, and the fallback
tool provider (used without sim/) never fetches a `$ref`, never runs a caller's regex and bounds its output."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
import redis.asyncio as aioredis

from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder
from serve.settings import ServeSettings
from serve.tools_fallback import MAX_OUTPUT_BYTES, SchemaToolProvider
from slca.contracts import Segment, SegmentKind, Streams, Trajectory


def _big_traj(i: int, tokens: int = 3000) -> Trajectory:
    return Trajectory(task_id=f"t{i}", policy_version=0, tokens=list(range(tokens)), logprobs=[None] + [-0.5] * (tokens - 1),
                      segments=[Segment(start=0, end=1, kind=SegmentKind.USER),
                                Segment(start=1, end=tokens, kind=SegmentKind.SUMMARY)])  # fmt: skip


def test_recorder_stops_at_the_byte_bound_and_counts_backpressure(redis_url):
    max_bytes = 200_000

    async def main():
        client = aioredis.Redis.from_url(redis_url)
        metrics = ServeMetrics()
        recorder = TrajectoryRecorder(client, Streams("bytes"), max_len=10_000, metrics=metrics, max_bytes=max_bytes)
        added = [await recorder.record(_big_traj(i)) for i in range(40)]  # ~15 kB each: ~600 kB offered
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


def _call(tool: dict, arguments):
    async def main():
        episode = await SchemaToolProvider().new_episode([tool])
        return await episode.call(tool["function"]["name"], arguments)

    start = time.monotonic()
    result = asyncio.run(main())
    return result, time.monotonic() - start


def _tool(parameters: dict | None = None, response: dict | None = None) -> dict:
    fn = {"name": "probe", "parameters": parameters or {"type": "object"}}
    if response is not None:
        fn["x-response-schema"] = response
    return {"type": "function", "function": fn}


@pytest.mark.timeout(60)
def test_fallback_never_fetches_a_ref(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    target = tmp_path / "s.json"
    target.write_text(json.dumps({"type": "integer"}))
    try:
        for ref in (f"http://127.0.0.1:{port}/s.json", target.as_uri(), "file:///etc/passwd"):
            result, _ = _call(_tool({"type": "object", "properties": {"a": {"$ref": ref}}}), {"a": "text"})
            assert result.status == 400 and "never fetched" in result.error
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


@pytest.mark.timeout(60)
def test_fallback_does_not_run_a_catastrophic_pattern_and_bounds_its_output():
    evil = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    result, elapsed = _call(_tool(evil), {"code": "a" * 5000 + "!"})
    assert elapsed < 5 and result.ok  # the fallback does not check patterns at all

    deep: dict = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}
    result, _ = _call(_tool(deep), {})
    assert result.status == 400 and "deeper" in result.error

    wide = {"type": "object", "properties": {f"k{i}": {"type": "object", "properties": {
        f"j{j}": {"enum": ["v" * 2000]} for j in range(60)}} for i in range(60)}}  # fmt: skip
    result, elapsed = _call(_tool(response=wide), {})
    assert elapsed < 5
    assert result.status == 422 or len(json.dumps(result.content)) <= MAX_OUTPUT_BYTES
