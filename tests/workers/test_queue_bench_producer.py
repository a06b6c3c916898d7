"""`slca bench queue`'s producer side: the recorder's encoder, group commit, and the report's ratio."""

from __future__ import annotations

import asyncio
import math

import msgpack
import pytest
import redis.asyncio as aioredis

from ops.bench.queue_producer import ProducerFigures, producer_lines, realistic_trajectory, recorder_rate
from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder, encode_trajectory_entry
from slca.contracts import Streams, Trajectory, decode_entry, encode_entry


@pytest.fixture(scope="module")
def episode(tiny_model_dir) -> Trajectory:
    from workers.scoring.extract import load_tokenizer

    return realistic_trajectory(load_tokenizer(str(tiny_model_dir)))


def test_realistic_episode_is_about_a_thousand_tokens_with_logprobs_on_generated_tokens(episode):
    assert 900 <= len(episode.tokens) <= 1200
    assert 100 <= episode.num_generated < len(episode.tokens) and episode.tools and episode.messages


def test_recorder_encoder_decodes_to_the_generic_encoders_payload(episode):
    fast, generic = encode_trajectory_entry(episode), encode_entry(episode, id=episode.id)
    assert fast[b"id"] == generic[b"id"]
    assert msgpack.unpackb(fast[b"data"]) == msgpack.unpackb(generic[b"data"])
    assert decode_entry(Trajectory, fast) == decode_entry(Trajectory, generic) == episode


def test_recorder_encoder_falls_back_for_values_msgpack_cannot_take(episode):
    odd = episode.model_copy(update={"meta": {"when": {1, 2}}})  # a set: pydantic writes a list, msgpack refuses
    assert encode_trajectory_entry(odd) == encode_entry(odd, id=odd.id)


def test_recorder_keeps_minus_infinity_logprobs(episode):
    lps = list(episode.logprobs)
    lps[-1] = -math.inf
    t = episode.model_copy(update={"logprobs": lps})
    assert decode_entry(Trajectory, encode_trajectory_entry(t)).logprobs[-1] == -math.inf


def test_concurrent_records_share_batches_and_keep_the_length_bound(redis_url, episode):
    async def main():
        client = aioredis.Redis.from_url(redis_url)
        metrics = ServeMetrics()
        recorder = TrajectoryRecorder(client, Streams("gc"), max_len=20, metrics=metrics, max_bytes=10**12)
        trajs = [episode.model_copy(update={"id": f"g{i}"}) for i in range(50)]
        added = await asyncio.gather(*(recorder.record(t) for t in trajs))
        ids = [f[b"id"].decode() for _, f in await client.xrange("gc:trajectories")]
        await client.delete("gc:trajectories")
        await client.aclose()
        return added, ids, metrics

    added, ids, metrics = asyncio.run(main())
    assert sum(added) == 20 and added[:20] == [True] * 20  # in order until full, then refused
    assert ids == [f"g{i}" for i in range(20)]
    assert metrics.backpressure._value.get() == 30 and metrics.trajectories_recorded._value.get() == 20


def test_recorder_rate_measures_the_real_recorder(redis_url, episode):
    trajs = [episode.model_copy(update={"id": f"r{i}"}) for i in range(64)]
    assert asyncio.run(recorder_rate(redis_url, trajs, concurrency=16)) > 0


def _figures(producer: float, raw: float) -> ProducerFigures:
    return ProducerFigures(payload_bytes=11000, tokens=1000, redis_benchmark_c1_per_s=raw,
                           redis_benchmark_c4_per_s=2 * raw, encode_entry_per_s=5000, recorder_encode_per_s=20000,
                           transport_per_s=raw * 0.9, recorder_serial_per_s=raw / 10, recorder_per_s=producer)  # fmt: skip


@pytest.mark.parametrize("producer, raw, verdict", [(12000, 20000, "met"), (9000, 20000, "NOT met"),
                                                    (10000, 20000, "met")])  # fmt: skip
def test_ratio_is_producer_over_raw_at_the_same_concurrency(producer, raw, verdict):
    f = _figures(producer, raw)
    assert f.ratio == pytest.approx(producer / raw)
    assert f.to_dict()["ratio_producer_over_raw"] == pytest.approx(producer / raw)
    lines = producer_lines(f)
    assert lines[-1].endswith(f"(target ≥ 0.50: {verdict})")
    assert f"= {producer / raw:.2f}" in lines[-1]
    assert any("PRODUCER" in line and f"{producer / raw:5.2f}×" in line for line in lines)
