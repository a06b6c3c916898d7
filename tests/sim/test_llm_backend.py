"""The llm backend against a real served model (the tiny model behind an OpenAI-compatible endpoint):
guided decoding, validate-and-retry after an endpoint failure, and the schema fallback."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.schemas import is_valid
from sim.settings import SimSettings
from slca.redis_server import free_port
from tests.sim.llm_server import STATE, make_llm_app

HEALTH = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "state": {"type": "string", "enum": ["up", "down"]}},
    "required": ["ok", "state"],
    "additionalProperties": False,
}
TOOL = {
    "type": "function",
    "function": {
        "name": "check_service",
        "description": "Health of a service.",
        "parameters": {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
        "x-response-schema": HEALTH,
    },
}


async def _serve_and_call(model_dir, mode: str, calls: int = 1, **overrides):
    app = make_llm_app(str(model_dir), mode)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    settings = SimSettings(
        backend="llm",
        llm_base_url=f"http://127.0.0.1:{port}/v1",
        cache=False,
        real_packs=[],
        max_new_tokens=24,
        max_retries=2,
        **overrides,
    )
    provider = make_provider(settings, None, CollectorRegistry())
    try:
        episode = await provider.new_episode([TOOL])
        results = [await episode.call("check_service", {"service": f"db{i}"}) for i in range(calls)]
        return results, app[STATE]["requests"], provider.ctx.backend
    finally:
        await provider.close()
        await runner.cleanup()


@pytest.mark.slow
def test_guided_decoding_gives_a_model_made_valid_answer(tiny_model_dir):
    results, requests, backend = asyncio.run(_serve_and_call(tiny_model_dir, "guided", calls=2))
    for result in results:
        assert result.ok and is_valid(HEALTH, result.content)
        assert result.meta["source"] == "model" and result.meta["attempts"] == 1
    assert len(requests) == 2 and all(r["response_format"]["json_schema"]["schema"] == HEALTH for r in requests)
    assert "check_service" in requests[0]["messages"][1]["content"]
    assert '"service": "db0"' in requests[1]["messages"][1]["content"]  # the earlier call is in the prompt


@pytest.mark.slow
def test_retry_after_a_failed_attempt(tiny_model_dir):
    results, requests, _ = asyncio.run(_serve_and_call(tiny_model_dir, "fail_first"))
    assert results[0].ok and results[0].meta == {"source": "model", "attempts": 2, "mode": "simulated"}
    assert len(requests) == 2


@pytest.mark.slow
def test_unguided_endpoint_retries_then_falls_back_to_the_schema(tiny_model_dir):
    results, requests, backend = asyncio.run(_serve_and_call(tiny_model_dir, "unguided"))
    result = results[0]
    # The random tiny model never writes valid JSON unconstrained: 1 + max_retries attempts, then the fallback.
    assert result.ok and is_valid(HEALTH, result.content)
    assert result.meta["source"] == "fallback" and result.meta["attempts"] == 3
    assert "response_format" in requests[0] and all("response_format" not in r for r in requests[1:])
    assert len(requests) == 4 and backend.guided is False
