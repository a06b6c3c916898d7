"""The owned redis-server, supervised like the children: when it dies, `slca up` starts it again.

Same port, same password, same data dir, so the children's URLs stay right and Redis comes back with its append-only
file (`appendonly yes` in `<data_dir>/redis`): every write it acknowledged is there again (`ops.redis_appendfsync`
says what a crash of the whole machine may lose). The children ride out the gap: the workers' clients retry
(workers/redisconn.py), serve's weight follower re-subscribes and reads `slca:weights:latest` again, and a child that
gives up exits and is restarted by the supervisor. Restarts follow the children's back-off (`ops.restart_backoff_*`),
so a Redis that cannot start (its port taken, its disk full) is not restarted in a tight loop.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from ops.run.supervisor.process import Backoff
from slca.redis_server import RedisServer

log = logging.getLogger("slca.up")


class RedisWatch:
    """`check()` once per supervision tick: notice the death of the owned Redis, start it again when its delay is
    over. `restarts` counts the restarts that succeeded."""

    def __init__(self, server: RedisServer, backoff: Backoff, clock: Callable[[], float] = time.monotonic):
        self.server = server
        self.backoff = backoff
        self.clock = clock
        self.restarts = 0
        self.failures = 0
        """Deaths and failed starts since it last ran healthy for `backoff.reset_after_s`."""
        self.restart_at: float | None = None
        """When the next start is due (None: running)."""
        self.started_at = clock()

    @property
    def pid(self) -> int | None:
        """The running redis-server's pid (None while it is down)."""
        return self.server.proc.pid if self.server.alive() else None

    def check(self) -> None:
        if self.restart_at is None:
            if not self.server.alive():
                self._died(f"exited with status {self.server.proc.returncode if self.server.proc else None}")
            return
        if self.clock() >= self.restart_at:
            self._start()

    def _died(self, why: str) -> None:
        if self.clock() - self.started_at >= self.backoff.reset_after_s:
            self.failures = 0
        self.failures += 1
        delay = self.backoff.delay(self.failures)
        self.restart_at = self.clock() + delay
        log.warning(
            "the owned redis-server %s; starting it again in %.1fs on its append-only file (%s)",
            why,
            delay,
            self.server.data_dir,
        )

    def _start(self) -> None:
        try:
            self.server.start()
        except (RuntimeError, OSError) as exc:
            self.started_at = self.clock()
            self._died(f"did not start ({exc})")
            return
        self.restart_at, self.started_at = None, self.clock()
        self.restarts += 1
        log.info("owned redis-server started again (pid %s, restart #%d)", self.server.proc.pid, self.restarts)
