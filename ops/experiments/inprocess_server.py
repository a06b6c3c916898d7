"""`slca serve` in this process, on a free port, in a background thread with its own event loop — for `slca train`
without `--api`. Uses serve's public app factory (with ops' dashboard mounted, as `slca serve` mounts it); never
serve's internals. It follows the weight announcements (`slca:weights`) under the stream prefix it is given, like any
replica."""

from __future__ import annotations

import asyncio
import secrets
import threading

from slca.config import Config
from slca.redis_server import free_port


class InProcessServer:
    def __init__(
        self, config: Config, stream_prefix: str | None = None, *, follow_weights: bool = True, sim_settings=None
    ):
        """`follow_weights`: False for a server that must keep the weights it started with (an evaluation).
        `sim_settings`: the tool simulator's settings (None: its defaults)."""
        from serve.settings import ServeSettings
        from slca.weights import WeightsSettings

        self.common = config.common
        if not self.common.admin_token:
            self.common = self.common.model_copy(update={"admin_token": secrets.token_hex(16)})
        self.weights = config.get(WeightsSettings).model_copy(update={"follow": follow_weights})
        if not self.weights.key:
            # whoever publishes for this server signs with `self.weights.key`
            # (ops/experiments/train/controlled.py)
            self.weights = self.weights.model_copy(update={"key": secrets.token_hex(32)})
        if stream_prefix:
            self.common = self.common.model_copy(update={"stream_prefix": stream_prefix})
        # its own replica identity (`<hostname>:<free port>`, its own URL), never a configured one: on a Redis shared
        # with a deployment it would overwrite that replica's status, and withdraw it when it stops
        self.settings = config.get(ServeSettings).model_copy(
            update={"port": free_port(), "replica_id": None, "advertise_url": None}
        )
        self.sim_settings = sim_settings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="slca-serve", daemon=True)
        self.runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port}"

    @property
    def admin_token(self) -> str:
        return self.common.admin_token

    def start(self) -> "InProcessServer":
        from aiohttp import web

        from serve.app import create_app
        from serve.mounts import plugged_subapps

        async def go():
            app = create_app(
                self.settings,
                self.common,
                weights=self.weights,
                sim_settings=self.sim_settings,
                subapps=plugged_subapps(self.common),
            )
            self.runner = web.AppRunner(app, access_log=None)
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.settings.port).start()

        self.thread.start()
        asyncio.run_coroutine_threadsafe(go(), self.loop).result(timeout=600)
        return self

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=120)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
