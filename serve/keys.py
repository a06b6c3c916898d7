"""Typed application keys: every resource the handlers share, in one place."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import redis.asyncio as aioredis
from aiohttp import web

from serve.engines.base import Engine
from serve.engines.grammar_builder import GrammarBuilder
from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder
from serve.replica import ReplicaIdentity
from serve.settings import ServeSettings
from slca.config import CommonSettings
from slca.contracts import Streams, ToolProvider
from slca.weights import WeightsSettings, WeightSwapper

SETTINGS = web.AppKey("settings", ServeSettings)
COMMON = web.AppKey("common", CommonSettings)
WEIGHTS = web.AppKey("weights", WeightsSettings)
STREAMS = web.AppKey("streams", Streams)
METRICS = web.AppKey("metrics", ServeMetrics)
ENGINE = web.AppKey("engine", Engine)
REDIS = web.AppKey("redis", aioredis.Redis)
RECORDER = web.AppKey("recorder", TrajectoryRecorder)
SWAPPER = web.AppKey("swapper", WeightSwapper)
TOOLS = web.AppKey("tools", ToolProvider)
"""The ToolProvider of agent runs (SGLS, or the minimal fallback); closed with the engine, on exit."""
REQUEST_POOL = web.AppKey("request_pool", ThreadPoolExecutor)
"""The threads of the CPU work of requests (`serve.http_util.off_loop`); shut down on exit."""
REPLICA = web.AppKey("replica", ReplicaIdentity)
"""Who this replica is (`serve.replica_id`, `serve.advertise_url`): on every recorded trajectory, and its status."""
BACKGROUND = web.AppKey("background", list[asyncio.Task])
CHARS_PER_TOKEN = web.AppKey("chars_per_token", int)
"""The most characters one token stands for (`serve.max_chars_per_token`, else the model's longest vocabulary
entry): the cheap context check of a request's messages (`serve.requests.check_prompt_chars`). Absent: no check."""
HOSTS = web.AppKey("hosts", object)
"""Host names /metrics, /v1/models, /openapi.json, /readyz and /dashboard/ answer under (`serve.hosts`); None: any."""
GRAMMARS = web.AppKey("grammars", GrammarBuilder)
"""The builders of forced-call grammars (serve/engines/grammar_builder.py): bounded per caller, in time and bytes."""
