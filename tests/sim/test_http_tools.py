"""Real HTTP tools: only allowlisted hosts, bounded response size and time; failures are error results."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.settings import SimSettings
from slca.redis_server import free_port

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def _app_site():
    async def weather(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"city": body["city"], "temperature": 21.5})

    async def huge(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/weather", weather)
    app.router.add_post("/huge", huge)
    app.router.add_post("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


def test_http_tools_allowlist_size_and_timeout():
    async def run():
        runner, base = await _app_site()
        tools = {
            name: {"url": f"{base}/{path}", "parameters": PARAMS}
            for name, path in [("weather_api", "weather"), ("huge_api", "huge"), ("slow_api", "slow")]
        }
        tools["elsewhere_api"] = {"url": "http://example.com/x", "parameters": PARAMS}
        settings = SimSettings(
            real_packs=[],
            http_tools=tools,
            http_allowlist=["127.0.0.1"],
            real_timeout_s=0.5,
            http_max_response_bytes=1000,
            cache=False,
        )
        provider = make_provider(settings, None, CollectorRegistry())
        offered = [{"type": "function", "function": {"name": n, "parameters": PARAMS, "x-mode": "real"}} for n in tools]
        episode = await provider.new_episode(offered)
        try:
            return {n: await episode.call(n, {"city": "Rome"}) for n in tools} | {
                "bad_args": await episode.call("weather_api", {"town": "Rome"})
            }
        finally:
            await runner.cleanup()

    out = asyncio.run(run())
    assert out["weather_api"].ok and out["weather_api"].content == {"city": "Rome", "temperature": 21.5}
    assert out["huge_api"].status == 502 and "larger than 1000 bytes" in out["huge_api"].error
    assert out["slow_api"].status == 504
    assert out["elsewhere_api"].status == 403 and "not an allowed real tool" in out["elsewhere_api"].error
    assert out["bad_args"].status == 400 and "'city'" in out["bad_args"].error
