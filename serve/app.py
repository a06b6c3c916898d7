"""The aiohttp application factory: routes, one error middleware, resources in cleanup_ctx."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import AsyncIterator, Callable, Mapping

from aiohttp import web
from prometheus_client import CollectorRegistry

from serve import admin, version_admin, version_hold
from serve.admission import ADMISSION, admission_of
from serve.auth import serve_scope_middleware
from serve.agent_api import agent_runs
from serve.chat import chat_completions
from serve.engines.base import Engine, create_engine
from serve.errors import ServeError
from serve.hosts import allowed_hosts, host_middleware
from serve.grammars import grammar_ctx, with_grammars
from serve.http_util import request_pool_ctx
from serve.keys import (
    BACKGROUND,
    CHARS_PER_TOKEN,
    COMMON,
    ENGINE,
    HOSTS,
    METRICS,
    RECORDER,
    REDIS,
    REPLICA,
    SETTINGS,
    STREAMS,
    SWAPPER,
    TOOLS,
    WEIGHTS,
)
from serve.metrics import ServeMetrics
from serve.openapi import openapi_json
from serve.origin import origin_middleware
from serve.recorder import TrajectoryRecorder
from serve.replica import ReplicaAnnouncer, ReplicaIdentity
from serve.settings import ServeSettings
from serve.redis_client import command_client, subscriber_client
from serve.requests import longest_token_chars
from serve.tools import known_tool_names, make_tool_provider
from serve.versions import version_middleware
from slca.config import CommonSettings
from slca.contracts import Streams
from slca.heap import trim as trim_heap
from slca.weights import ManifestPolicy, WeightsSettings, WeightSwapper, for_server

log = logging.getLogger(__name__)

EngineFactory = Callable[[], Engine]


def _endpoint(request: web.Request) -> str:
    """Bounded metric label: the route's path template, never the raw URL."""
    route = request.match_info.route
    return route.resource.canonical if route.resource is not None else "unmatched"


@web.middleware
async def error_middleware(request: web.Request, handler) -> web.StreamResponse:
    """Our exceptions → OpenAI-style error JSON; aiohttp's own HTTP errors too; anything else → 500, logged."""
    started, endpoint = time.perf_counter(), _endpoint(request)
    try:
        response = await handler(request)
    except ServeError as exc:
        response = web.json_response(exc.body(), status=exc.status, headers=exc.headers())
        if exc.close_connection:
            response.force_close()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        body = {"error": {"message": exc.reason, "type": "invalid_request_error", "param": None, "code": exc.status}}
        response = web.json_response(body, status=exc.status)
    except asyncio.CancelledError:
        if _client_gone(request):  # the client hung up: its handler (and engine requests) were cancelled
            _count_disconnect(request, endpoint, started, "cancelled")
        raise
    except ConnectionResetError:  # writing to a client that hung up (aiohttp's ClientConnectionResetError too)
        _count_disconnect(request, endpoint, started, "reset")
        return web.Response(status=CLIENT_CLOSED)  # never reaches the client; aiohttp expects a response
    except Exception:  # the last line of defence: a bug must not leak a traceback to the client
        log.exception("unhandled error on %s", request.path)
        body = {"error": {"message": "internal server error", "type": "server_error", "param": None, "code": 500}}
        response = web.json_response(body, status=500)
    _count(request, endpoint, started, response.status)
    return response


CLIENT_CLOSED = 499
BACKGROUND_STOP_S = 5.0
"""How long a stopping server waits for each round of its background tasks' ends (weight follower …)."""
"""Status counted (never sent) for a request whose client hung up first (nginx's convention)."""


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _count(request: web.Request, endpoint: str, started: float, status: int) -> None:
    metrics = request.config_dict[METRICS]  # config_dict: also right inside mounted sub-apps
    metrics.requests.labels(endpoint=endpoint, status=str(status)).inc()
    metrics.request_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - started)


def _count_disconnect(request: web.Request, endpoint: str, started: float, how: str) -> None:
    """A hang-up is the client's choice, not a server error: one info line, no traceback, counted as 499."""
    log.info("client disconnected from %s after %.2fs (%s)", request.path, time.perf_counter() - started, how)
    _count(request, endpoint, started, CLIENT_CLOSED)


def create_app(
    settings: ServeSettings,
    common: CommonSettings,
    *,
    engine_factory: EngineFactory | None = None,
    registry: CollectorRegistry | None = None,
    weights: WeightsSettings | None = None,
    sim_settings=None,
    subapps: Mapping[str, web.Application] | None = None,
) -> web.Application:
    """The API app. `weights`: the `[weights]` section (None: its defaults, which follow the weight channel).
    `sim_settings`: the `[sim]` section for the tool simulator (None: its defaults).
    `subapps`: prefix → aiohttp app mounted beside the API (what the CLI plugs in, e.g. ops' dashboard at
    `/dashboard/`; see `serve.mounts`): serve itself imports no other component."""
    # errors wrap the origin, host and scope checks. handler_cancellation: a client that hangs up cancels its handler,
    # and with it the engine requests it awaits (aiohttp lets handlers run on by default).
    app = web.Application(
        client_max_size=settings.max_body_bytes + 1,
        middlewares=[error_middleware, origin_middleware, host_middleware, serve_scope_middleware, version_middleware],
        handler_args={"handler_cancellation": True},
    )
    app[SETTINGS], app[COMMON], app[WEIGHTS] = settings, common, weights or WeightsSettings()
    app[STREAMS] = Streams(common.stream_prefix)
    app[METRICS] = ServeMetrics(registry)
    app[REPLICA] = ReplicaIdentity.of(settings)
    app[BACKGROUND] = []
    app[ADMISSION] = admission_of(settings)
    app[HOSTS] = allowed_hosts(settings)
    factory = engine_factory or (lambda: create_engine(settings.engine, str(common.model_path()), settings))
    app.cleanup_ctx.append(request_pool_ctx)  # first in, last out: handlers may use it until the end
    app.cleanup_ctx.append(grammar_ctx)  # before the engines: they take their compiled grammars from it
    app.cleanup_ctx.append(_engine_ctx(with_grammars(app, factory), sim_settings))
    app.cleanup_ctx.append(_redis_ctx)
    app.cleanup_ctx.append(version_admin.promotion_ctx)  # the promoted version, before any swap
    app.cleanup_ctx.append(_weights_ctx)
    app.cleanup_ctx.append(_replica_ctx)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/agent/runs", agent_runs)
    app.router.add_get("/v1/models", admin.models)
    app.router.add_get("/healthz", admin.healthz)
    app.router.add_get("/readyz", admin.readyz)
    app.router.add_get("/metrics", admin.metrics)
    app.router.add_post("/admin/weights", admin.admin_weights)
    app.router.add_get("/openapi.json", openapi_json)
    version_admin.install(app)  # /admin/promote, /v1/versions, the version header
    version_hold.install(app)  # /admin/hold: the candidate kept at one version while it is judged
    for prefix, subapp in (subapps or {}).items():
        app.add_subapp(prefix, subapp)
    return app


def _engine_ctx(factory: EngineFactory, sim_settings):
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        engine = factory()
        await engine.start()
        # Loading a model leaves millions of objects for the cyclic collector; its full passes then stop every
        # thread for 0.3–0.6 s, long enough to miss /healthz deadlines. Those objects live as long as the
        # process: move them out of the collector's sight once.
        gc.collect()
        gc.freeze()
        app[ENGINE] = version_admin.route_versions(app, engine, factory)  # callers: promoted; feed: candidate
        _set_chars_per_token(app, engine)
        app[TOOLS] = make_tool_provider(app[COMMON].redis_or_default(), sim_settings, app[METRICS].registry)
        app[METRICS].tool_calls.tools.know(known_tool_names(app[TOOLS]))  # labels: registered tools only
        try:
            yield
        finally:
            try:
                await app[TOOLS].close()  # the simulator's backend connections and response cache
            finally:
                await engine.close()

    return ctx


def _set_chars_per_token(app: web.Application, engine: Engine) -> None:
    """The cheap context check's ratio (`serve.max_chars_per_token`, else the model's longest vocabulary entry)."""
    settings = app[SETTINGS]
    ratio = settings.max_chars_per_token or longest_token_chars(getattr(engine, "tokenizer", None))
    if ratio:
        app[CHARS_PER_TOKEN] = ratio
        log.info("messages over %d characters are refused before templating", ratio * settings.max_model_len)


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    client = command_client(app[COMMON].redis_or_default(), app[SETTINGS])  # with timeouts (serve/redis_client.py)
    app[REDIS] = client
    app[RECORDER] = TrajectoryRecorder(
        client, app[STREAMS], app[SETTINGS].max_stream_len, app[METRICS], max_bytes=app[SETTINGS].max_stream_bytes
    )
    yield
    await client.aclose()


async def _weights_ctx(app: web.Application) -> AsyncIterator[None]:
    weights = app[WEIGHTS]
    policy = ManifestPolicy.from_settings(weights)  # signed announcements only (slca/weights/verify.py)
    transport = for_server(
        weights.transport,
        version_admin.mirror_dir_of(app),
        weights.key,
        weights.fetch_timeout_s,
        weights.fetch_max_bytes,
        observer=app[METRICS].observe_fetch,  # slca_weights_fetch_*
    )
    app[SWAPPER] = WeightSwapper(
        app[ENGINE],
        app[METRICS],
        policy=policy,
        transport=transport,
        after_swap=trim_heap if app[SETTINGS].heap_trim_after_swap else None,
    )
    follow = weights.follow and app[SETTINGS].role != "promoted"  # a promoted replica moves on promotions only
    if weights.follow and not follow:
        log.info("serve.role=promoted: weight announcements are not followed (this replica moves on promotions)")
    if follow:
        # A separate connection: a subscribed connection cannot run other commands.
        client = subscriber_client(app[COMMON].redis_or_default(), app[SETTINGS])
        app[BACKGROUND].append(asyncio.create_task(app[SWAPPER].follow(client, app[STREAMS]), name="weights"))
    yield
    for task in app[BACKGROUND]:
        task.cancel()
    # bounded: a cancel redis-py absorbed while the follower waited in listen() is only seen on its next message,
    # so if the tasks have not ended, the subscriber's connection is closed under them (they then see the cancel)
    _, pending = await asyncio.wait(app[BACKGROUND], timeout=BACKGROUND_STOP_S) if app[BACKGROUND] else ((), ())
    if follow:
        await client.aclose()
    if pending:
        _, pending = await asyncio.wait(pending, timeout=BACKGROUND_STOP_S)
        for task in pending:
            log.warning("background task %s did not end within %ss of the stop", task.get_name(), BACKGROUND_STOP_S)


async def _replica_ctx(app: web.Application) -> AsyncIterator[None]:
    """This replica's status in Redis (serve/replica.py): at start, after every swap outcome, every heartbeat."""
    settings = app[SETTINGS]
    if not settings.replica_heartbeat_s:
        yield
        return
    announcer = ReplicaAnnouncer(
        app[REDIS],
        app[STREAMS],
        app[REPLICA],
        app[ENGINE],
        app[SWAPPER],
        settings.replica_heartbeat_s,
        settings.replica_ttl_s,
    )
    app[SWAPPER].on_outcome = announcer.poke
    task = asyncio.create_task(announcer.run(), name="replica-status")
    yield
    app[SWAPPER].on_outcome = None
    await announcer.stop(task)
