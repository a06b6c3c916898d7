"""Recorder back-pressure on a real Redis, the fallback tool provider, and the hf engine's swap between steps."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from serve.engines.base import SamplingParams, create_engine, generate
from slca.weights import WeightLoadError, WeightVersion
from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder
from serve.settings import ServeSettings
from serve.tools import UnavailableToolProvider, make_tool_provider
from slca.contracts import Streams
from tests.support.serve import WEATHER_TOOL
from tests.support.trajectories import trajectory
from tests.support.weights import publish_version


def test_recorder_stops_at_the_bound_and_counts_backpressure(redis_url):
    async def main():
        client = aioredis.Redis.from_url(redis_url)
        metrics = ServeMetrics()
        recorder = TrajectoryRecorder(client, Streams("bp"), max_len=2, metrics=metrics)
        added = [await recorder.record(trajectory(task_id=f"t{i}")) for i in range(4)]
        length = await client.xlen("bp:trajectories")
        await client.aclose()
        return added, length, metrics

    added, length, metrics = asyncio.run(main())
    assert added == [True, True, False, False] and length == 2
    assert metrics.backpressure._value.get() == 2 and metrics.trajectories_recorded._value.get() == 2


def test_recorder_never_raises_when_redis_is_down():
    from slca.redis_server import free_port

    async def main():
        client = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
        metrics = ServeMetrics()
        ok = await TrajectoryRecorder(client, Streams(), 10, metrics).record(trajectory(task_id="t0"))
        await client.aclose()
        return ok, metrics.record_failures._value.get()

    assert asyncio.run(main()) == (False, 1)


@pytest.mark.parametrize(
    "args, ok, status",
    [
        ({"city": "Rome", "unit": "c"}, True, 200),
        ({"city": "Berlin", "unit": "c"}, False, 400),
        ({"city": "Rome"}, False, 400),
    ],
)
def test_agent_tools_validate_and_answer_by_schema_through_the_sim(args, ok, status):
    import jsonschema

    pytest.importorskip("sim")

    async def main():
        episode = await make_tool_provider(None).new_episode([WEATHER_TOOL])
        first, second = await episode.call("get_weather", args), await episode.call("get_weather", args)
        unknown = await episode.call("nope", {})
        await episode.close()
        return first, second, unknown

    first, second, unknown = asyncio.run(main())
    assert first.ok is ok and first.status == status and unknown.status == 404
    if ok:
        jsonschema.validate(first.content, WEATHER_TOOL["function"]["x-response-schema"])
        assert first.content == second.content  # same call, same answer


def test_without_the_sim_every_tool_call_is_a_structured_501():
    async def main():
        episode = await UnavailableToolProvider().new_episode([WEATHER_TOOL])
        result = await episode.call("get_weather", {"city": "Rome", "unit": "c"})
        await episode.close()
        return result

    result = asyncio.run(main())
    assert not result.ok and result.status == 501 and "sim" in result.error
    assert result.for_model()["error"]["status"] == 501  # what the model reads back in its tool turn


def test_hf_swap_lands_between_steps_and_flags_mixed(tiny_model_dir, tmp_path):
    manifest = publish_version(tiny_model_dir, tmp_path, 1, 1.05)

    async def main():
        engine = create_engine("hf", str(tiny_model_dir), ServeSettings(engine="hf", torch_threads=1))
        await engine.start()
        try:
            prompt = engine.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
            stream = engine.stream(prompt, SamplingParams(max_tokens=40, seed=0))
            first = await stream.__anext__()  # the request is running on v0
            swap = asyncio.create_task(engine.swap_weights(WeightVersion(manifest.path, 1)))
            versions = [first.version] + [s.version async for s in stream]
            seconds = await swap
            with pytest.raises(WeightLoadError):
                await engine.swap_weights(WeightVersion(str(tmp_path / "missing"), 2))
            after = await generate(engine, prompt, SamplingParams(max_tokens=2, seed=0))
            return versions, seconds, engine.version, after
        finally:
            await engine.close()

    versions, seconds, version, after = asyncio.run(main())
    assert versions[0] == 0 and versions[-1] == 1 and versions == sorted(versions)  # swapped mid-request
    assert seconds > 0 and version == 1 and after.versions == [1, 1] and not after.mixed_version
