"""Dashboard sub-app: one page drawn with the vendored uPlot (no CDN), its static files, one JSON endpoint.

Mount it with `app.add_subapp("/dashboard/", make_app(redis_url))`; the page loads `static/...` and fetches
`api/stats` relative to its own URL, so it works under any mount point.

`api/stats` shows the deployment's rewards, versions, queues, serve replicas (each one's served version and
heartbeat, `slca.replicas`), the two version roles (`versions`: promoted and candidate, the promotion record, the
gate's decisions and the scored-success rollbacks, ops/observe/version_view.py; charted as `charts.gate` and
`charts.scored_success`) and the progress of a warm start `slca up` trains beside serving (`warm_start`, or null:
ops/experiments/warmstart/progress.py): when keys are configured (`common.admin_token`,
`common.api_keys`) it needs one of them as `Authorization: Bearer <key>`, or the session cookie that
`POST api/login` sets for such a header (the page's sign-in form: ops/observe/dashboard/sessions.py; a key never
travels in a URL). The page and its static files hold no data and stay open. Building the charts from up to
`MAX_ROWS` rows per stream runs in a thread, not on serve's event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Collection

import redis.asyncio as aioredis
from aiohttp import web

from ops.experiments.warmstart.progress import parse_record, record_key
from ops.observe.dashboard.assets import Asset, load_assets
from ops.observe.dashboard.series import build_charts
from ops.observe.dashboard.sessions import COOKIE, SESSION_S, Sessions
from ops.observe.redis_view import read_snapshot_async
from ops.observe.version_view import read_versions_async
from slca.contracts.stats import STATS_READ_DEFAULT, STATS_READ_MAX
from slca.replicas import read_replicas_async

REDIS = web.AppKey("dashboard_redis", aioredis.Redis)
PREFIX = web.AppKey("dashboard_prefix", str)
ASSETS = web.AppKey("dashboard_assets", dict)
KEYS = web.AppKey("dashboard_keys", tuple)
SESSIONS = web.AppKey("dashboard_sessions", Sessions)
MAX_ROWS = STATS_READ_MAX
"""Most rows per stats stream one `api/stats` call reads (`?limit=`, default `STATS_READ_DEFAULT`): all the writers
keep (`slca.contracts.stats`)."""


def make_app(redis_url: str, prefix: str = "slca", keys: Collection[str] = ()) -> web.Application:
    """`keys`: bearer keys that may read `api/stats` (empty: open, for a deployment without keys)."""
    app = web.Application()
    app[PREFIX] = prefix
    app[ASSETS] = load_assets()
    app[KEYS] = tuple(k.encode() for k in keys if k)
    app[SESSIONS] = Sessions()

    async def redis_client(app: web.Application):
        app[REDIS] = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        yield
        await app[REDIS].aclose()

    app.cleanup_ctx.append(redis_client)
    app.router.add_get("/", page)
    app.router.add_get("/static/{name:.+}", static)
    app.router.add_get("/api/stats", stats)
    app.router.add_post("/api/login", login)
    app.router.add_post("/api/logout", logout)
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


def _authorised(request: web.Request) -> bool:
    """A configured key in the Authorization header, or a session cookie bought with one (`login`)."""
    keys = request.app[KEYS]
    if not keys or request.app[SESSIONS].valid(request.cookies.get(COOKIE)):
        return True
    return _bearer_ok(request, keys)


def _bearer_ok(request: web.Request, keys: tuple) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    given_b = given.strip().encode()
    # every key compared, in constant time each: the answer's timing says nothing about which one nearly matched
    return scheme.lower() == "bearer" and sum(hmac.compare_digest(given_b, k) for k in keys) > 0


def _body(snapshot, replicas, warm_start=None, view=None) -> bytes:
    import json

    body = {
        **snapshot.to_json(),
        "charts": build_charts(snapshot, view).to_json(),
        "replicas": [v.to_json() for v in replicas],
        "versions": view.to_json() if view is not None else None,
        "warm_start": parse_record(warm_start),
        "now": time.time(),
    }
    return json.dumps(body).encode()


async def login(request: web.Request) -> web.Response:
    """A configured key in `Authorization: Bearer` (never in the URL or the body) → a session cookie, HttpOnly,
    SameSite=Strict, for this dashboard's path only."""
    keys = request.app[KEYS]
    if keys and not _bearer_ok(request, keys):
        return web.json_response({"error": "unknown key"}, status=401, headers={"WWW-Authenticate": "Bearer"})
    response = web.Response(status=204, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE,
        request.app[SESSIONS].open(),
        path=_mount(request, "api/login"),
        max_age=SESSION_S,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    return response


async def logout(request: web.Request) -> web.Response:
    request.app[SESSIONS].close(request.cookies.get(COOKIE))
    response = web.Response(status=204, headers={"Cache-Control": "no-store"})
    response.del_cookie(COOKIE, path=_mount(request, "api/logout"))
    return response


def _mount(request: web.Request, route: str) -> str:
    """The dashboard's own path (where it is mounted): the cookie goes nowhere else on the server."""
    path = request.path
    return path[: -len(route)] if path.endswith(route) else "/"


async def stats(request: web.Request) -> web.Response:
    if not _authorised(request):
        return web.json_response(
            {"error": "stats need a key: sign in on the page, or send Authorization: Bearer <admin token or API key>"},
            status=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    try:
        limit = min(MAX_ROWS, max(1, int(request.query.get("limit", STATS_READ_DEFAULT))))
    except ValueError:
        return web.json_response({"error": "limit must be an integer"}, status=400)
    try:
        snapshot = await read_snapshot_async(request.app[REDIS], request.app[PREFIX], limit, limit)
        replicas = await read_replicas_async(request.app[REDIS], request.app[PREFIX])
        warm_start = await request.app[REDIS].get(record_key(request.app[PREFIX]))  # slca up's warm start, if any
        view = await read_versions_async(request.app[REDIS], request.app[PREFIX], snapshot.published_version)
    except (aioredis.RedisError, OSError) as exc:
        return web.json_response({"error": f"redis unavailable: {exc}"}, status=503)
    # thousands of rows: not on serve's event loop
    body = await asyncio.to_thread(_body, snapshot, replicas, warm_start, view)
    return web.Response(body=body, content_type="application/json", headers={"Cache-Control": "no-store"})
