"""`slca serve` (the agent API); `slca bench serve` (agent API vs vLLM's own server) is ops' (ops/bench/serve)."""

from __future__ import annotations

import logging
import os
import signal

from slca.cli import CliError


def register(commands, bench) -> None:
    serve = commands.add_parser("serve", help="the OpenAI-compatible agent API (hot-swaps published weights)")
    from serve.engines.registry import engine_names

    serve.add_argument("--engine", choices=engine_names(), help="override serve.engine (a registered engine)")
    serve.add_argument("--host", help="override serve.host")
    serve.add_argument("--port", type=int, help="override serve.port")
    serve.set_defaults(func=run_serve, service=True)


def _settings(args, config):
    from serve.settings import ServeSettings

    settings = config.get(ServeSettings)
    updates = {
        k: v
        for k, v in (
            ("engine", getattr(args, "engine", None)),
            ("host", getattr(args, "host", None)),
            ("port", getattr(args, "port", None)),
        )
        if v is not None
    }
    return settings.model_copy(update=updates)


def run_serve(args, config) -> int:
    from serve.app import create_app
    from serve.app_server import run_app
    from serve.keys import ENGINE
    from serve.mounts import plugged_subapps

    settings, common = _settings(args, config), config.common
    if not common.model_path().is_dir():
        raise CliError(f"model directory not found: {common.model_path()} (run `slca model fetch` or set common.model)")
    from slca.logs import setup_logging

    setup_logging(common.log_level)
    from serve.replica import ReplicaIdentity
    from slca.heap import fix_mmap_threshold

    fix_mmap_threshold(settings.heap_mmap_threshold_kib)  # before the engine's threads allocate anything

    try:
        ReplicaIdentity.of(settings)  # a host name that makes no usable default id: say which setting to set
    except ValueError as exc:
        raise CliError(str(exc)) from None
    from slca.weights import WeightsSettings

    app = create_app(
        settings,
        common,
        weights=config.get(WeightsSettings),
        sim_settings=_sim_settings(config),
        subapps=plugged_subapps(common),
    )
    # first of all start-up work (the engine's load takes seconds): a stop during it is a graceful one too
    app.on_startup.insert(0, _one_stop_signal)
    app.on_startup.append(_exit_when_engine_is_fatal)
    run_app(  # aiohttp's run_app with a bound on open connections (serve/app_server.py)
        app,
        settings.host,
        settings.port,
        settings.max_connections,
        access_log=None,
        shutdown_timeout=settings.stop_drain_s,
    )
    if getattr(app.get(ENGINE), "fatal", False):  # no engine: stopped while it was starting
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


async def _one_stop_signal(app) -> None:
    """The first SIGINT or SIGTERM stops the server gracefully; later ones are ignored, for the rest of the
    process. aiohttp's own handlers raise GracefulExit (exit status 1) again for a second signal, in the middle
    of the first one's cleanup, and restore the default action (death by SIGTERM) once it is done — and a
    terminal's Ctrl-C (SIGINT to every process) followed by `slca up`'s SIGTERM is just that."""
    import asyncio

    from aiohttp.web_runner import GracefulExit

    loop = asyncio.get_running_loop()

    def graceful_exit() -> None:
        raise GracefulExit()

    def on_signal(signum, frame) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        loop.call_soon_threadsafe(graceful_exit)

    for sig in (signal.SIGINT, signal.SIGTERM):
        # run_app's handlers (installed before startup) go; a plain handler, which aiohttp's cleanup and the loop's
        # close leave in place, takes over
        loop.remove_signal_handler(sig)
        signal.signal(sig, on_signal)


def _sim_settings(config):
    """The `[sim]` section when the sim component is installed (the agent loop's tools), else None."""
    try:
        return config.section("sim").with_cache_of(config.common)
    except ModuleNotFoundError:
        return None
