"""Running the app on its socket with a bound on open connections (`serve.max_connections`).

aiohttp keeps every connection it accepts until the client leaves or its keep-alive timeout passes, and nothing
bounds how many: enough idle (or slowly writing) clients use up the process's file descriptors, and then nothing
is served, /healthz included. `ConnectionGate` stands in front of aiohttp's protocol factory: past the bound a new
connection is answered at once with a 503 (`Retry-After`) and closed. `run_app` is `aiohttp.web.run_app` with the
gate: the same runner, signals and graceful stop (`shutdown_timeout`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress

from aiohttp import web
from aiohttp.web_runner import GracefulExit

log = logging.getLogger(__name__)

BUSY_BODY = json.dumps(
    {
        "error": {
            "message": "the server holds as many connections as it accepts (serve.max_connections); retry shortly",
            "type": "rate_limit_error",
            "param": None,
            "code": "too_many_connections",
        }
    }
).encode()
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(BUSY_BODY)).encode() + b"\r\n\r\n" + BUSY_BODY
)


class _Refusal(asyncio.Protocol):
    """A connection past the bound: one 503, then closed (nothing it sends is read)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(BUSY_RESPONSE)  # type: ignore[attr-defined]
        transport.close()


class ConnectionGate:
    """aiohttp's protocol factory (`runner.server`) behind a bound on the connections open at once.

    aiohttp registers a connection one loop turn after its protocol is made, so the ones made since are counted
    too (`pending`, settled two turns later): a burst accepted in one turn cannot pass the bound."""

    def __init__(self, server: web.Server, limit: int) -> None:
        self.server, self.limit = server, limit
        self.pending = 0
        self.refused = 0

    @property
    def open(self) -> int:
        return len(self.server.connections) + self.pending

    def __call__(self) -> asyncio.BaseProtocol:
        if self.open >= self.limit:
            self.refused += 1
            return _Refusal()
        self.pending += 1
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._settle)  # after connection_made (scheduled next turn) registers it
        return self.server()

    def _settle(self) -> None:
        self.pending -= 1


class GatedSite(web.BaseSite):
    """A TCP site whose connections go through a `ConnectionGate`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int, backlog: int = 128):
        super().__init__(runner, backlog=backlog)
        self.host, self.port, self.max_connections = host, port, max_connections
        self.gate: ConnectionGate | None = None

    @property
    def name(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None, "runner.setup() makes the server"
        self.gate = ConnectionGate(server, self.max_connections)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self.gate, self.host, self.port, backlog=self._backlog, reuse_address=True
        )
        if self._server.sockets:
            self.port = self._server.sockets[0].getsockname()[1]


async def serve_forever(app: web.Application, host: str, port: int, max_connections: int, **runner_kw) -> None:
    """Set the app up, serve it on `host:port` through the gate until cancelled, then stop it gracefully."""
    runner = web.AppRunner(app, handle_signals=True, **runner_kw)
    await runner.setup()
    try:
        site = GatedSite(runner, host, port, max_connections)
        await site.start()
        log.info("serving on %s (at most %d connections)", site.name, max_connections)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run_app(app: web.Application, host: str, port: int, max_connections: int, **runner_kw) -> None:
    """`aiohttp.web.run_app(app, host=host, port=port, **runner_kw)` with the connection gate: a new event loop,
    stopped by GracefulExit (SIGINT, SIGTERM) or KeyboardInterrupt, its tasks cancelled at the end."""
    runner_kw.setdefault("keepalive_timeout", 75.0)  # run_app's (a bare runner's handlers keep idle ones an hour)
    loop = asyncio.new_event_loop()
    main = loop.create_task(serve_forever(app, host, port, max_connections, **runner_kw))
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    except (GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            asyncio.set_event_loop(None)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
