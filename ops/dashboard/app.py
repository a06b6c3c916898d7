"""Dashboard sub-app: one self-contained page (inline JS, <canvas> charts, no CDN) and one JSON endpoint.

Mount it with `app.add_subapp("/dashboard/", make_app(redis_url))`; the page fetches `api/stats` relative to
its own URL, so it works under any mount point.
"""

from __future__ import annotations

import time
from importlib import resources

import redis.asyncio as aioredis
from aiohttp import web

from ops.redis_view import read_snapshot_async

REDIS = web.AppKey("dashboard_redis", aioredis.Redis)
PREFIX = web.AppKey("dashboard_prefix", str)
PAGE = web.AppKey("dashboard_page", bytes)


def make_app(redis_url: str, prefix: str = "slca") -> web.Application:
    app = web.Application()
    app[PREFIX] = prefix
    app[PAGE] = resources.files("ops.dashboard").joinpath("static/index.html").read_bytes()

    async def redis_client(app: web.Application):
        app[REDIS] = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        yield
        await app[REDIS].aclose()

    app.cleanup_ctx.append(redis_client)
    app.router.add_get("/", page)
    app.router.add_get("/api/stats", stats)
    return app


async def page(request: web.Request) -> web.Response:
    return web.Response(body=request.app[PAGE], content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store"})  # fmt: skip


async def stats(request: web.Request) -> web.Response:
    try:
        limit = min(2000, max(1, int(request.query.get("limit", "500"))))
    except ValueError:
        return web.json_response({"error": "limit must be an integer"}, status=400)
    try:
        snapshot = await read_snapshot_async(request.app[REDIS], request.app[PREFIX], limit, limit)
    except (aioredis.RedisError, OSError) as exc:
        return web.json_response({"error": f"redis unavailable: {exc}"}, status=503)
    return web.json_response({**snapshot.to_json(), "now": time.time()}, headers={"Cache-Control": "no-store"})
