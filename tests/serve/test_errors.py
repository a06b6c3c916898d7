"""Every bad input gets a 4xx with an OpenAI-style error body; an engine failure gets 503 + Retry-After."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
from tests.support.serve import WEATHER_TOOL, raw_post, run_in_app

USER = [{"role": "user", "content": "hi"}]


BAD_TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 7}}}},
}

CASES = {
    "malformed_json": ("/v1/chat/completions", b'{"messages": [', 400, "invalid_json"),
    "body_not_object": ("/v1/chat/completions", b"[1, 2]", 400, "invalid_request"),
    "unknown_model": ("/v1/chat/completions", {"model": "gpt-9", "messages": USER}, 404, "model_not_found"),
    "invalid_tool_schema": (
        "/v1/chat/completions",
        {"messages": USER, "tools": [BAD_TOOL]},
        400,
        "invalid_tool_schema",
    ),
    "tool_without_name": (
        "/v1/chat/completions",
        {"messages": USER, "tools": [{"type": "function", "function": {}}]},
        400,
        "invalid_tool_schema",
    ),
    "oversized_body": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x" * 1_100_000}]},
        413,
        "payload_too_large",
    ),
    "too_many_tokens": ("/v1/chat/completions", {"messages": USER, "max_tokens": 5000}, 400, "context_length_exceeded"),
    "prompt_too_long": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "word " * 1500}]},
        400,
        "context_length_exceeded",
    ),
    "unknown_role": (
        "/v1/chat/completions",
        {"messages": [{"role": "wizard", "content": "hi"}]},
        400,
        "invalid_request",
    ),
    "missing_messages": ("/v1/chat/completions", {"model": "tiny-smollm2"}, 400, "invalid_request"),
    "bad_temperature": ("/v1/chat/completions", {"messages": USER, "temperature": -1}, 400, "invalid_request"),
    "tool_choice_unknown_function": (
        "/v1/chat/completions",
        {"messages": USER, "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        400,
        "invalid_request",
    ),
    "n_too_large": ("/v1/chat/completions", {"messages": USER, "n": 1000}, 400, "invalid_request"),
    "agent_missing_task_id": ("/v1/agent/runs", {"messages": USER}, 400, "invalid_request"),
    "agent_invalid_tool_schema": (
        "/v1/agent/runs",
        {"messages": USER, "task_id": "t", "tools": [BAD_TOOL]},
        400,
        "invalid_tool_schema",
    ),
    "agent_too_many_tokens": (
        "/v1/agent/runs",
        {"messages": USER, "task_id": "t", "max_tokens": 4096},
        400,
        "context_length_exceeded",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_an_openai_style_4xx(hf_server, case):
    path, body, status, code = CASES[case]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    got, payload, _ = raw_post(hf_server.url + path, data)
    assert got == status, payload
    err = payload["error"]
    assert err["code"] == code and isinstance(err["message"], str) and err["message"]
    assert set(err) == {"message", "type", "param", "code"}
    assert "Traceback" not in err["message"]


def test_unknown_route_is_json_404(hf_server):
    try:
        urllib.request.urlopen(hf_server.url + "/v1/nothing", timeout=30)
    except urllib.error.HTTPError as exc:
        assert exc.code == 404 and "error" in json.loads(exc.read())
    else:
        pytest.fail("expected 404")


def test_engine_failure_is_503_with_retry_after(tiny_model_dir, serve_redis):
    from serve.keys import ENGINE

    async def scenario(client, app):
        assert (await client.get("/readyz")).status == 200
        await app[ENGINE].close()  # the engine dies under the running server
        r = await client.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 4})
        ready = await client.get("/readyz")
        return r.status, r.headers.get("Retry-After"), await r.json(), ready.status

    status, retry_after, body, ready = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario))
    assert status == 503 and retry_after is not None and int(retry_after) > 0
    assert body["error"]["type"] == "server_error" and body["error"]["code"] == "engine_unavailable"
    assert ready == 503


def test_admin_without_configured_token_is_403_for_everyone(tiny_model_dir, serve_redis):
    async def scenario(client, app):
        out = []
        for headers in ({}, {"Authorization": "Bearer anything"}):
            r = await client.post("/admin/weights", json={"version": 1, "path": "/tmp"}, headers=headers)
            out.append((r.status, (await r.json())["error"]["code"]))
        return out

    assert asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario)) == [(403, "forbidden")] * 2


def test_readyz_fails_when_redis_is_unreachable(tiny_model_dir):
    from slca.redis_server import free_port

    async def scenario(client, app):
        r = await client.get("/readyz")
        return r.status, await r.json()

    status, body = asyncio.run(run_in_app(tiny_model_dir, f"redis://127.0.0.1:{free_port()}/0", scenario))
    assert status == 503 and "redis" in body["error"]["message"]


def test_readyz_waits_for_the_grammar_hosts_first_start_and_no_restart(tiny_model_dir, serve_redis, monkeypatch):
    """Ready means a forced call can be served: a caller that polled /readyz and then forced a tool got a 503
    while the grammar host still imported (CI, 2026-12-06). A later restart keeps the replica in rotation."""
    from serve.engines.grammar_builder import GrammarBuilder
    from serve.keys import GRAMMARS

    spawn = GrammarBuilder._spawn_host
    gate: list[asyncio.Event] = []

    async def slow_spawn(self):  # the host's imports, as slow as the test says
        gate.append(asyncio.Event())
        await gate[-1].wait()
        await spawn(self)

    monkeypatch.setattr(GrammarBuilder, "_spawn_host", slow_spawn)

    async def readyz(client):
        r = await client.get("/readyz")
        return r.status, (await r.json()).get("grammars")

    async def scenario(client, app):
        builder = app[GRAMMARS]
        while not gate:  # the app starts the host in the background
            await asyncio.sleep(0)
        seen = [await readyz(client)]
        gate[-1].set()
        await builder.first_start()
        seen.append(await readyz(client))
        await builder._stop_host()  # as after a stuck build: the next build restarts it
        builder.start()
        while len(gate) < 2:
            await asyncio.sleep(0)
        seen.append(await readyz(client))
        gate[-1].set()
        return seen

    seen = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario, wait_ready=False))
    assert seen == [(503, None), (200, True), (200, True)]
