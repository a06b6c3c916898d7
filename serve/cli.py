"""`slca serve` (the agent API) and `slca bench serve` (agent API vs raw engine vs vLLM's own server)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from slca.cli import CliError


def register(commands, bench) -> None:
    serve = commands.add_parser("serve", help="the OpenAI-compatible agent API (hot-swaps published weights)")
    serve.add_argument("--engine", choices=["vllm", "hf"], help="override serve.engine")
    serve.add_argument("--host", help="override serve.host")
    serve.add_argument("--port", type=int, help="override serve.port")
    serve.set_defaults(func=run_serve)
    b = bench.add_parser("serve", help="tokens/s, TTFT, req/s: slca's chat and agent APIs ÷ vLLM's own OpenAI server")
    b.add_argument("--targets", type=_csv, default=["vllm-server", "slca-vllm-core", "slca-vllm-inproc", "slca-hf"],
                   help="comma-separated, in order (vllm-server: the baseline)")
    b.add_argument("--clients", type=_ints, default=[1, 16, 64], help="concurrent clients per level")
    b.add_argument("--hf-clients", type=_ints, default=[1, 16], help="levels for the (slow) hf reference engine")
    b.add_argument("--min-requests", type=int, default=4, help="requests per level: max(clients, this)")
    b.add_argument("--max-tokens", type=int, default=64, help="max tokens per request")
    b.add_argument("--out", type=Path, help="write table.md and results.json here (e.g. bench/serve/latest)")
    b.set_defaults(func=run_bench)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    return [int(t) for t in _csv(text)]


def _settings(args, config):
    from serve.settings import ServeSettings

    settings = config.get(ServeSettings)
    updates = {k: v for k, v in (("engine", getattr(args, "engine", None)), ("host", getattr(args, "host", None)),
                                 ("port", getattr(args, "port", None))) if v is not None}  # fmt: skip
    return settings.model_copy(update=updates)


def run_serve(args, config) -> int:
    from aiohttp import web

    from serve.app import create_app
    from serve.keys import ENGINE
    from serve.mounts import plugged_subapps

    settings, common = _settings(args, config), config.common
    if not common.model_path().is_dir():
        raise CliError(f"model directory not found: {common.model_path()} (run `slca model fetch` or set common.model)")
    logging.basicConfig(level=common.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings, common, sim_settings=_sim_settings(config), subapps=plugged_subapps(common))
    app.on_startup.append(_exit_when_engine_is_fatal)
    web.run_app(app, host=settings.host, port=settings.port, access_log=None)
    if getattr(app[ENGINE], "fatal", False):
        logging.getLogger("slca.serve").critical("exiting: the engine failed beyond its rebuild budget")
        return 3  # non-zero: `slca up` (or systemd, k8s) starts a fresh process
    return 0


async def _exit_when_engine_is_fatal(app) -> None:
    """An engine that cannot be rebuilt stops this process (graceful SIGTERM: in-flight requests get their
    503s) instead of leaving a server that is alive but can never be ready."""
    from serve.keys import ENGINE

    engine = app[ENGINE]
    if hasattr(engine, "on_fatal"):
        engine.on_fatal = lambda: os.kill(os.getpid(), signal.SIGTERM)


def _sim_settings(config):
    """The `[sim]` section when the sim component is installed (the agent loop's tools), else None."""
    try:
        return config.section("sim").with_cache_of(config.common)
    except ModuleNotFoundError:
        return None


def run_bench(args, config) -> int:
    from serve.bench import run_serve_bench

    settings, common = _settings(args, config), config.common
    if not common.model_path().is_dir():
        raise CliError(f"model directory not found: {common.model_path()}")
    return run_serve_bench(settings, common, args)
