"""`slca bench queue`'s producer side: the recorder's encoder, group commit, and the report's ratio."""

from __future__ import annotations

import asyncio
import math

import msgpack
import pytest
import redis.asyncio as aioredis

from ops.bench.queue.producer import ProducerFigures, producer_lines, realistic_trajectory, recorder_rate
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
    assert sum(added) == 20  # up to the bound, then refused (batches in flight may reach the server in any order)
    assert sorted(ids) == sorted(f"g{i}" for i, ok in enumerate(added) if ok)
    # batches of MAX_BATCH go whole or stop at the bound: at most one batch is split between added and refused
    batches = [added[i : i + 8] for i in range(0, 48, 8)]
    assert sum(1 for b in batches if any(b) and not all(b)) <= 1
    assert metrics.backpressure._value.get() == 30 and metrics.trajectories_recorded._value.get() == 20


def test_recorder_rate_measures_the_real_recorder(redis_url, episode):
    trajs = [episode.model_copy(update={"id": f"r{i}"}) for i in range(64)]
    assert asyncio.run(recorder_rate(redis_url, trajs, concurrency=16)) > 0


def _figures(producer: float, raw: float) -> ProducerFigures:
    return ProducerFigures(
        payload_bytes=11000,
        tokens=1000,
        rounds=3,
        redis_benchmark_c1_per_s=raw,
        redis_benchmark_c4_per_s=2 * raw,
        encode_entry_per_s=5000,
        recorder_encode_per_s=20000,
        transport_per_s=raw * 0.9,
        recorder_serial_per_s=raw / 10,
        recorder_per_s=producer,
        producer_cpu_us=80,
        rounds_detail={"ratio": [0.4, producer / raw, 0.7]},
    )


@pytest.mark.parametrize(
    "producer, raw, verdict", [(12000, 20000, "met"), (9000, 20000, "NOT met"), (10000, 20000, "met")]
)
def test_ratio_is_producer_over_raw_at_the_same_concurrency(producer, raw, verdict):
    f = _figures(producer, raw)  # rounds' ratios 0.4, producer / raw, 0.7: the median is producer / raw
    assert f.ratio == pytest.approx(producer / raw)
    assert f.to_dict()["ratio_producer_over_raw"] == pytest.approx(producer / raw)
    lines = producer_lines(f)
    assert lines[-1].endswith(f"target ≥ 0.50: {verdict})")
    assert f"= {producer / raw:.3f}, median of the rounds' ratios (0.40, {producer / raw:.2f}, 0.70;" in lines[-1]
    assert any("PRODUCER" in line and f"{producer / raw:5.2f}×" in line for line in lines)
    assert "producer process 80 µs (encoding ≈ 50, client and event loop ≈ 30)" in lines[-2]


def test_ratio_without_rounds_is_the_ratio_of_the_rates():
    f = _figures(6000, 20000)
    f.rounds_detail = {}
    assert f.ratio == pytest.approx(0.3)
    assert _figures(6000, 20000).ratio == pytest.approx(0.4)  # median of 0.4, 0.3, 0.7


def test_a_cancelled_caller_does_not_stop_the_others_entries(redis_url, episode):
    async def main():
        client = aioredis.Redis.from_url(redis_url)
        recorder = TrajectoryRecorder(client, Streams("cancel"), max_len=100, metrics=ServeMetrics(), max_bytes=10**12)
        tasks = [asyncio.create_task(recorder.record(episode.model_copy(update={"id": f"c{i}"}))) for i in range(6)]
        await asyncio.sleep(0)  # every call has queued its entry
        tasks[0].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        length = await client.xlen("cancel:trajectories")
        await client.delete("cancel:trajectories")
        await client.aclose()
        return results, length

    results, length = asyncio.run(main())
    assert isinstance(results[0], asyncio.CancelledError) and results[1:] == [True] * 5
    assert length in (5, 6)  # the cancelled caller's entry may already be on its way: never a half-write


def test_a_record_right_after_a_finished_flush_is_not_left_waiting(redis_url, episode):
    """With one flusher allowed, the caller woken by a flush records again before the finished flusher's
    done-callback would have run: the flusher must already have left the set, or the second record hangs."""

    async def main():
        client = aioredis.Redis.from_url(redis_url)
        recorder = TrajectoryRecorder(
            client, Streams("once"), max_len=100, metrics=ServeMetrics(), max_bytes=10**12, max_in_flight=1
        )
        try:
            first = await recorder.record(episode.model_copy(update={"id": "a"}))
            second = await asyncio.wait_for(recorder.record(episode.model_copy(update={"id": "b"})), timeout=10)
        finally:
            await client.delete("once:trajectories")
            await client.aclose()
        return first, second

    assert asyncio.run(main()) == (True, True)


def test_an_integer_msgpack_cannot_hold_in_a_tool_call_is_recorded_as_its_digits(episode):
    messages = [
        *episode.messages,
        {"role": "assistant", "content": "", "tool_calls": [{"weeks": 10**30, "n": -(2**70)}]},
    ]
    t = episode.model_copy(update={"messages": messages})
    back = decode_entry(Trajectory, encode_trajectory_entry(t))  # raised OverflowError: a 500 for the agent run
    assert back.messages[-1]["tool_calls"][0] == {"weeks": str(10**30), "n": str(-(2**70))}
    assert back.messages[:-1] == episode.messages and back.tokens == episode.tokens
