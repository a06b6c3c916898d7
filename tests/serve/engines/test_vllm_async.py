"""The vLLM engine with its engine core in its own process (`serve.vllm_engine_core_process`), behind the same app:
exact tokens and behaviour logprobs in trajectories, per-request seeds, concurrent seeded long prompts, a hot-swap
through the worker extension that changes what is sampled, and survival of a killed engine core (503 +
Retry-After, rebuilt with the swapped weights, fatal past the budget), all on one engine core process and its one
rebuild (each start ≈ 15–25 s on 2 cores)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient, TestServer

from serve.app import create_app
from serve.settings import ServeSettings
from serve.versions import router_of
from slca.config import CommonSettings
from slca.contracts import Trajectory
from tests.support.long_prompts import check_long_prompt_rounds, long_prompt_rounds
from tests.support.weights import NO_FOLLOW, publish_version

pytestmark = pytest.mark.slow

RUN = {
    "messages": [{"role": "user", "content": "Say something."}],
    "task_id": "async-1",
    "n": 2,
    "max_tokens": 12,
    "max_turns": 1,
    "seed": 7,
    "temperature": 1.0,
    "record": False,
    "return_trajectories": True,
}


def _app(tiny_model_dir, redis_url: str, **overrides):
    settings = ServeSettings(
        engine="vllm",
        follow_candidate=True,  # the engine under test swaps for every caller (no promotion gate here)
        vllm_engine_core_process=True,
        max_model_len=2048,  # the long-prompt rounds (tests/support/long_prompts.py: ≥ 1,500 prompt tokens)
        kv_cache_gib=1,
        **overrides,
    )
    common = CommonSettings(model=str(tiny_model_dir), redis_url=redis_url, admin_token="t")
    return create_app(settings, common, weights=NO_FOLLOW)


def _sampled(body: dict) -> list[tuple[list[int], list[float], int]]:
    """(generated ids, their logprobs, policy version) of every run of an agent response."""
    out = []
    for run in body["runs"]:
        traj = Trajectory.model_validate(run["trajectory"])
        gen = [i for i, lp in enumerate(traj.logprobs) if lp is not None]
        assert gen and gen == list(range(gen[0], len(traj.tokens)))  # prompt, then the sampled tokens
        out.append(([traj.tokens[i] for i in gen], [traj.logprobs[i] for i in gen], traj.policy_version))
    return out


async def _wait_ready(client, seconds: float = 240.0) -> int:
    status = 0
    for _ in range(int(seconds / 0.25)):
        status = (await client.get("/readyz")).status
        if status == 200:
            break
        await asyncio.sleep(0.25)
    return status


def test_async_engine_records_exact_tokens_reproduces_seeds_swaps_survives_a_killed_core_and_is_fatal_past_budget(
    tiny_model_dir, serve_redis, tmp_path
):
    # one engine core process for the whole story (each start is 15-25 s on 2 cores): a budget of one rebuild, so
    # the first killed core is rebuilt and the second is fatal
    app = _app(tiny_model_dir, serve_redis.url, engine_max_rebuilds=1)
    chat = {"messages": RUN["messages"], "max_tokens": 6, "seed": 1, "logprobs": True, "top_logprobs": 3}
    fatal = threading.Event()

    async def main():
        async with TestClient(TestServer(app)) as client:
            engine = router_of(app).primary.engine  # the engine itself, under the version router
            long_rounds = await long_prompt_rounds(client)  # seeded long prompts, concurrent: all succeed, reproduce
            first = await (await client.post("/v1/agent/runs", json=RUN)).json()
            again = await (await client.post("/v1/agent/runs", json=RUN)).json()
            top = await (await client.post("/v1/chat/completions", json=chat)).json()
            manifest = publish_version(tiny_model_dir, tmp_path, 1, 1.5)
            swap = await client.post(
                "/admin/weights", json={"version": 1, "path": manifest.path}, headers={"Authorization": "Bearer t"}
            )
            swapped = await (await client.post("/v1/agent/runs", json=RUN)).json()
            pid = engine.core_pid
            in_flight = asyncio.create_task(client.post("/v1/chat/completions", json={**chat, "max_tokens": 400}))
            await asyncio.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            failed = await in_flight
            failed_body, retry_after = await failed.json(), failed.headers.get("Retry-After")
            ready = await _wait_ready(client)
            rebuilt = await (await client.post("/v1/agent/runs", json=RUN)).json()
            rebuilt_pid, failures = engine.core_pid, len(engine.failures)
            # past the budget: the second killed core (nothing in flight: the watchdog notices) is fatal
            engine.on_fatal = fatal.set
            os.kill(rebuilt_pid, signal.SIGKILL)
            await asyncio.get_running_loop().run_in_executor(None, fatal.wait, 60)
            after_fatal = await client.post("/v1/chat/completions", json={"messages": RUN["messages"], "max_tokens": 4})
            ready_after_fatal = (await client.get("/readyz")).status
            return SimpleNamespace(
                long_rounds=long_rounds,
                first=first,
                again=again,
                top=top,
                swap=swap.status,
                swapped=swapped,
                status=failed.status,
                failed_body=failed_body,
                retry_after=retry_after,
                ready=ready,
                rebuilt=rebuilt,
                engine=engine,
                pid=pid,
                rebuilt_pid=rebuilt_pid,
                failures=failures,
                fatal_answers=(after_fatal.status, after_fatal.headers.get("Retry-After"), ready_after_fatal),
            )

    seen = asyncio.run(main())
    long_rounds, first, again, top, engine, pid = (
        seen.long_rounds,
        seen.first,
        seen.again,
        seen.top,
        seen.engine,
        seen.pid,
    )
    assert type(engine).__name__ == "VLLMAsyncEngine" and pid != os.getpid()
    check_long_prompt_rounds(*long_rounds)
    # exact tokens + behaviour logprobs recorded; the same seed samples the same tokens with the same logprobs
    assert _sampled(first) == _sampled(again) and all(v == 0 for _, _, v in _sampled(first))
    logprobs = top["choices"][0]["logprobs"]["content"]
    assert len(logprobs) == top["usage"]["completion_tokens"] and all(len(t["top_logprobs"]) == 3 for t in logprobs)
    # the swap reached the worker: the same seeded request now comes from other weights, labelled v1
    assert seen.swap == 200
    after = _sampled(seen.swapped)
    assert all(v == 1 for _, _, v in after)
    assert [lps for _, lps, _ in after] != [lps for _, lps, _ in _sampled(first)]
    # a killed engine core: the request in flight gets 503 + Retry-After; the rebuilt engine serves v1 again
    assert seen.status == 503 and seen.retry_after is not None, seen.failed_body
    assert seen.ready == 200 and seen.failures == 1
    assert _sampled(seen.rebuilt) == after and seen.rebuilt_pid != pid
    # the second failure is beyond the budget of one rebuild: fatal, 503 + Retry-After, not ready
    after_status, after_retry, after_ready = seen.fatal_answers
    assert fatal.is_set() and engine.fatal
    assert after_status == 503 and after_retry is not None and after_ready == 503
