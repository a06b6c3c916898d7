"""Dashboard sub-app: one page drawn with the vendored uPlot (no CDN), its static files, one JSON endpoint.

Mount it with `app.add_subapp("/dashboard/", make_app(redis_url))`; the page loads `static/...` and fetches
`api/stats` relative to its own URL, so it works under any mount point.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis
from aiohttp import web

from ops.dashboard.assets import Asset, load_assets
from ops.dashboard.series import build_charts
from ops.redis_view import read_snapshot_async

REDIS = web.AppKey("dashboard_redis", aioredis.Redis)
PREFIX = web.AppKey("dashboard_prefix", str)
ASSETS = web.AppKey("dashboard_assets", dict)


def make_app(redis_url: str, prefix: str = "slca") -> web.Application:
    app = web.Application()
    app[PREFIX] = prefix
    app[ASSETS] = load_assets()

    async def redis_client(app: web.Application):
        app[REDIS] = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        yield
        await app[REDIS].aclose()

    app.cleanup_ctx.append(redis_client)
    app.router.add_get("/", page)
    app.router.add_get("/static/{name:.+}", static)
    app.router.add_get("/api/stats", stats)
    return app


def _respond(request: web.Request, asset: Asset) -> web.Response:
    headers = {"Cache-Control": asset.cache_control, "ETag": asset.etag}
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=asset.body, content_type=asset.content_type, charset=asset.charset, headers=headers)


async def page(request: web.Request) -> web.Response:
    return _respond(request, request.app[ASSETS]["index.html"])


async def static(request: web.Request) -> web.Response:
    asset = request.app[ASSETS].get(request.match_info["name"])
    if asset is None or asset.name == "index.html":
        raise web.HTTPNotFound(text=f"no dashboard file {request.match_info['name']!r}")
    return _respond(request, asset)


async def stats(request: web.Request) -> web.Response:
    try:
        limit = min(2000, max(1, int(request.query.get("limit", "500"))))
    except ValueError:
        return web.json_response({"error": "limit must be an integer"}, status=400)
    try:
        snapshot = await read_snapshot_async(request.app[REDIS], request.app[PREFIX], limit, limit)
    except (aioredis.RedisError, OSError) as exc:
        return web.json_response({"error": f"redis unavailable: {exc}"}, status=503)
    body = {**snapshot.to_json(), "charts": build_charts(snapshot).to_json(), "now": time.time()}
    return web.json_response(body, headers={"Cache-Control": "no-store"})
