"""Admission before parsing (issue 36): a bounded queue in front of the request pool, a deadline on the body, a cap
on open connections, the cheap context check by characters, and the Host check of the read-only endpoints."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from aiohttp import web

from ops.bench.hostile import AGENT, CHAT, USER, impossible_prompt, post_head
from tests.support.serve import run_in_app


def _settings(**overrides):
    from serve.settings import ServeSettings

    return ServeSettings(engine="hf", max_model_len=512, torch_threads=1, **overrides)


# --- a bounded queue in front of the request pool ------------------------------------------------
def test_past_the_queue_bound_a_request_is_refused_before_its_body_is_read(tiny_model_dir, serve_redis):
    from serve.keys import REQUEST_POOL

    async def scenario(client, app):
        assert (await client.post(CHAT, json={"messages": USER, "max_tokens": 2})).status == 200  # warm up
        release = threading.Event()
        app[REQUEST_POOL].submit(release.wait, 30)  # the one request thread is busy: requests queue for it
        first = asyncio.create_task(client.post(CHAT, json={"messages": USER, "max_tokens": 2}))
        await asyncio.sleep(0.3)  # the first one holds the one place in the queue
        started = time.monotonic()
        refused = await client.post(CHAT, json={"messages": USER, "max_tokens": 2})
        agent = await client.post(AGENT, json={"task_id": "t", "messages": USER, "max_tokens": 2, "record": False})
        elapsed = time.monotonic() - started
        answer = (refused.status, dict(refused.headers), await refused.json(), agent.status, elapsed)
        release.set()
        return answer, (await first).status

    (status, headers, body, agent_status, elapsed), first_status = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, _settings(request_threads=1, max_queued_requests=1))
    )
    assert status == 429 and int(headers["Retry-After"]) >= 1 and body["error"]["code"] == "server_busy"
    assert agent_status == 429 and elapsed < 1.0
    assert first_status == 200  # the queued one is served once the pool frees up


# --- a deadline on the body ----------------------------------------------------------------------
async def _half_a_body(client, path: str = CHAT) -> tuple[bytes, float]:
    """Headers and 10 bytes of a longer body, then nothing: (what the server answers, seconds until it did)."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    body = json.dumps({"messages": USER, "max_tokens": 2}).encode()
    writer.write(post_head(path, len(body)) + body[:10])
    await writer.drain()
    started = time.monotonic()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        answer = head + await reader.readexactly(length)
    except (TimeoutError, asyncio.IncompleteReadError, IndexError):
        answer = b""
    writer.close()
    return answer, time.monotonic() - started


@pytest.mark.parametrize("path", [CHAT, AGENT])
def test_a_body_that_does_not_arrive_in_time_is_a_408(tiny_model_dir, serve_redis, path):
    async def scenario(client, app):
        return await _half_a_body(client, path)

    answer, elapsed = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, _settings(body_read_timeout_s=0.5))
    )
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"request_timeout"' in answer and elapsed < 5.0
    assert b"Connection: close" in answer  # the rest of the body is never read as a next request


# --- the cheap context check ---------------------------------------------------------------------
def test_longest_token_bounds_the_characters_of_every_token(tiny_model_dir):
    from transformers import AutoTokenizer

    from serve.requests import longest_token_chars

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    longest = longest_token_chars(tok)
    assert longest == max(len(t) for t in tok.get_vocab())
    assert max(len(tok.decode([i])) for i in range(0, len(tok), 97)) <= longest
    assert longest_token_chars(object()) is None


def test_impossible_prompts_are_refused_before_templating_and_a_small_chat_goes_through(
    tiny_model_dir, serve_redis, monkeypatch
):
    """Six prompts that cannot fit (900,000 characters, 512 tokens of context) next to a small chat: the six never
    reach the chat template, each is a 400 naming its characters, the chat is answered."""
    import serve.chat

    rendered: list[int] = []
    real = serve.chat.request_chunks

    def counting(tokenizer, messages, tools):
        rendered.append(sum(len(m.get("content") or "") for m in messages))
        return real(tokenizer, messages, tools)

    monkeypatch.setattr(serve.chat, "request_chunks", counting)
    huge = impossible_prompt(900_000)  # also a case of the soak (ops/bench/soak/cases.py)

    async def scenario(client, app):
        async def post(body):
            response = await client.post(CHAT, json=body)
            return response.status, await response.json()

        small = {"messages": USER, "max_tokens": 2}
        return await asyncio.gather(*(post(huge) for _ in range(6)), post(small))

    answers = asyncio.run(run_in_app(tiny_model_dir, serve_redis.url, scenario, _settings()))
    *refused, (small_status, _) = answers
    assert small_status == 200
    for status, body in refused:
        assert status == 400 and body["error"]["code"] == "context_length_exceeded"
        assert "900000 characters" in body["error"]["message"]
    assert rendered == [2]  # only the small chat's "hi" was templated


def test_the_character_bound_is_a_setting(tiny_model_dir, serve_redis):
    body = {"messages": [{"role": "user", "content": "y" * 2000}], "max_tokens": 2}

    async def scenario(client, app):
        response = await client.post(CHAT, json=body)
        return response.status, await response.json()

    status, payload = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, _settings(max_chars_per_token=2))
    )
    assert status == 400 and "more than 1024 (at most 2 characters a token)" in payload["error"]["message"]


# --- a cap on open connections -------------------------------------------------------------------
async def _gated(max_connections: int):
    from serve.app_server import GatedSite

    async def healthz(request):
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = GatedSite(runner, "127.0.0.1", 0, max_connections)
    await site.start()
    return runner, site


async def _get(port: int, writer_reader=None) -> bytes:
    reader, writer = writer_reader or await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


def test_connections_past_the_cap_are_answered_503_and_closed():
    async def main():
        runner, site = await _gated(2)
        try:
            idle = [await asyncio.open_connection("127.0.0.1", site.port) for _ in range(2)]
            await asyncio.sleep(0.1)
            refused = await _get(site.port)
            burst = await asyncio.gather(*(_get(site.port) for _ in range(5)))
            idle[0][1].close()
            await asyncio.sleep(0.2)
            served = await _get(site.port)  # one place free again
            kept = await _get(site.port, idle[1])  # an idle connection held under the cap is served
            return refused, burst, served, kept, site.gate.refused
        finally:
            await runner.cleanup()

    refused, burst, served, kept, counted = asyncio.run(main())
    assert refused.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in refused and b"too_many_connections" in refused
    assert all(b.startswith(b"HTTP/1.1 503") for b in burst) and counted == 6
    assert served.startswith(b"HTTP/1.1 200") and kept.startswith(b"HTTP/1.1 200")


def test_a_burst_of_connections_never_passes_the_cap():
    async def main():
        runner, site = await _gated(3)
        try:
            opened = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", site.port) for _ in range(20)))
            await asyncio.sleep(0.2)
            held = len(runner.server.connections)
            for _, writer in opened:
                writer.close()
            return held, site.gate.refused
        finally:
            await runner.cleanup()

    held, refused = asyncio.run(main())
    assert held == 3 and refused == 17


# --- the Host check ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host, refused",
    [
        ("127.0.0.1:8000", False),
        ("[::1]:8000", False),
        ("10.1.2.3", False),
        ("localhost", False),
        ("LOCALHOST.:8000", False),
        ("api.example:8000", False),
        ("attacker.example", True),
        ("attacker.example:8000", True),
        ("localhost.attacker.example", True),
        ("attacker.example@127.0.0.1", True),
        ("[::1", True),
        ("", True),
    ],
)
def test_host_names(host, refused):
    from serve.hosts import allowed_hosts, host_refusal

    allowed = allowed_hosts(_settings(allowed_hosts=["api.example"]))
    assert (host_refusal(host, allowed) is not None) == refused
    assert host_refusal(host, allowed_hosts(_settings(allowed_hosts=["*"]))) is None


def test_the_machines_name_and_the_advertised_one_are_allowed():
    import socket

    from serve.hosts import allowed_hosts, host_refusal

    allowed = allowed_hosts(_settings(host="0.0.0.0", advertise_url="http://serve-1.internal:8000"))
    assert host_refusal(socket.gethostname(), allowed) is None
    assert host_refusal("serve-1.internal:8000", allowed) is None


def test_read_only_endpoints_refuse_a_foreign_host_with_421(tiny_model_dir, serve_redis):
    paths = ["/metrics", "/v1/models", "/openapi.json", "/readyz", "/dashboard/api/stats"]

    async def api_stats(request):
        return web.json_response({})

    stats = web.Application()
    stats.router.add_get("/api/stats", api_stats)

    async def scenario(client, app):
        out = {}
        for path in paths + ["/healthz"]:
            foreign = await client.get(path, headers={"Host": "attacker.example:8000"})
            local = await client.get(path, headers={"Host": "localhost:8000"})
            out[path] = (foreign.status, (await foreign.json())["error"]["code"] if foreign.status == 421 else None)
            out[path + " local"] = local.status
        chat = await client.post(CHAT, json={"messages": USER, "max_tokens": 2}, headers={"Host": "serve.example"})
        out["chat"] = chat.status
        return out

    out = asyncio.run(
        run_in_app(tiny_model_dir, serve_redis.url, scenario, _settings(), subapps={"/dashboard/": stats})
    )
    for path in paths:
        assert out[path] == (421, "host_not_allowed"), (path, out[path])
        assert out[path + " local"] in (200, 503), (path, out)  # /readyz: 503 when Redis is down, never 421
    assert out["/healthz"] == (200, None) and out["chat"] == 200  # liveness and the API answer under any name
