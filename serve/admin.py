"""Operational endpoints: health, readiness, metrics, models, and the weight swap (an 'admin' key, serve/auth.py)."""

from __future__ import annotations

import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from serve.auth import require_scope
from slca.weights import WeightLoadError
from serve.errors import BadRequest, EngineUnavailable, WeightsRejected
from serve.http_util import read_json
from serve.keys import ENGINE, GRAMMARS, METRICS, REDIS, SWAPPER


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    try:
        redis_ok = bool(await request.app[REDIS].ping())
    except (RedisError, OSError):
        redis_ok = False
    # Ready means a forced call can be served too: the grammar host imports xgrammar beside the engine's load (it
    # is nearly always up first), and a forced call that came before it was up got a 503 after one build's time
    # (CI on a loaded 2-core machine: a caller polling /readyz, then forcing a tool). Only the first start is
    # waited for: a restart after a stuck build must not take the replica out of rotation.
    grammars = request.app[GRAMMARS].first_start_over
    body = {
        "engine": engine.loaded,
        "redis": redis_ok,
        "grammars": grammars,
        "policy_version": engine.version,
        "model": engine.model_name,
    }
    if not (engine.loaded and redis_ok and grammars):
        raise EngineUnavailable(f"not ready: {body}")
    return web.json_response({"status": "ready", **body})


async def metrics(request: web.Request) -> web.Response:
    stats, m = request.app[ENGINE].stats, request.app[METRICS]
    m.engine_max_batch.set(stats.max_batch)
    m.engine_steps.set(stats.steps)
    m.engine_prompt_tokens.labels("computed").set(stats.prompt_tokens_computed)
    m.engine_prompt_tokens.labels("reused").set(stats.prompt_tokens_reused)
    data = generate_latest(m.registry)
    return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def models(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    card = {
        "id": engine.model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "slca",
        "policy_version": engine.version,
        "engine": engine.name,
    }
    return web.json_response({"object": "list", "data": [card]})


async def admin_weights(request: web.Request) -> web.Response:
    """Swap to `{"version": N, "path": DIR}`; waits for the swap (requests keep being served meanwhile)."""
    require_scope(request, "admin")
    body = await read_json(request)
    version, path = (body.get("version"), body.get("path")) if isinstance(body, dict) else (None, None)
    if not isinstance(version, int) or version < 0 or not isinstance(path, str) or not path:
        raise BadRequest('body must be {"version": <int >= 0>, "path": <weight directory>}')
    try:
        seconds = await request.app[SWAPPER].swap(version, path)
    except WeightLoadError as exc:
        raise WeightsRejected(f"weights v{version} not loaded, still serving v{request.app[ENGINE].version}: {exc}")
    return web.json_response({"version": request.app[ENGINE].version, "swap_seconds": seconds})
