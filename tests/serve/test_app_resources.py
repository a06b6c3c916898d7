"""Resources the app owns are released on exit (issue 21): the tool provider is closed and the request pool is
shut down by the app's cleanup contexts."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

import serve.app as serve_app
from serve.http_util import off_loop
from serve.keys import REQUEST_POOL, TOOLS
from serve.settings import ServeSettings
from serve.tools import UnavailableToolProvider
from slca.config import CommonSettings
from slca.contracts import ToolProvider
from tests.support.weights import NO_FOLLOW


class _Engine:
    """Just enough of an engine for the app's cleanup contexts (nothing is generated)."""

    version = 0
    loaded = True

    def __init__(self):
        self.closed = False

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


class _Provider(UnavailableToolProvider):
    def __init__(self):
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


def test_the_tool_provider_is_closed_and_the_request_pool_shut_down_on_app_cleanup(monkeypatch, tmp_path):
    provider, engine = _Provider(), _Engine()
    monkeypatch.setattr(serve_app, "make_tool_provider", lambda *args, **kwargs: provider)
    settings = ServeSettings(engine="hf", request_threads=2)
    common = CommonSettings(model=str(tmp_path), redis_url="redis://127.0.0.1:1/0", data_dir=str(tmp_path))

    async def main():
        app = serve_app.create_app(settings, common, weights=NO_FOLLOW, engine_factory=lambda: engine)
        runner = web.AppRunner(app)
        await runner.setup()
        pool = app[REQUEST_POOL]
        worker = await off_loop(app, lambda: threading.current_thread().name)
        during = (app[TOOLS] is provider, provider.closed, pool._shutdown)
        await runner.cleanup()
        return worker, during, pool._shutdown

    worker, during, shut_down = asyncio.run(main())
    assert worker.startswith("request-cpu") and during == (True, 0, False)
    assert provider.closed == 1 and shut_down and engine.closed


def test_every_tool_provider_closes():
    """`close` is part of the protocol, and both providers serve has (SGLS, the no-sim fallback) implement it."""
    from prometheus_client import CollectorRegistry

    from sim import make_provider

    assert "close" in ToolProvider.__dict__

    async def main():
        for provider in (UnavailableToolProvider(), make_provider(None, None, metrics_registry=CollectorRegistry())):
            await provider.close()

    asyncio.run(main())
