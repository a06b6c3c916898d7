"""This serve replica's identity and its status in Redis (README "More than one machine").

Several replicas can serve behind one address, each following the weight channel and swapping on its own; so that
`slca status` and the dashboard can say which version each one serves, every replica keeps a `ReplicaStatus` in
Redis (`slca.replicas.announce`): written at start, at once after every swap outcome (the swapper's `on_outcome`),
and every `serve.replica_heartbeat_s` seconds, under a key that expires `serve.replica_ttl_s` after each write; a
clean stop removes it. Its id is also written on every trajectory the replica records (`Trajectory.replica`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass

from redis.exceptions import RedisError

from slca.cancel import raise_if_cancelling
from slca.contracts import Streams
from slca.contracts.replicas import ReplicaStatus, check_replica_id
from slca.replicas import announce, withdraw

log = logging.getLogger(__name__)

_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}
STOP_TIMEOUT_S = 1.0
"""A clean stop waits at most this long for a write in flight, then as long again to remove the status: a Redis that
does not answer must not hold the exit (the key then expires by itself)."""


@dataclass(frozen=True)
class ReplicaIdentity:
    replica: str
    """`serve.replica_id`, or `<hostname>:<port>`."""
    url: str
    """`serve.advertise_url`, or `http://<host>:<port>`."""
    role: str = "both"
    """`serve.role`: which version roles it serves (in its status, so `slca status` shows each replica's)."""

    @classmethod
    def of(cls, settings, hostname: str | None = None) -> "ReplicaIdentity":
        """The identity `settings` (`ServeSettings`) give this process; ValueError naming the setting to fix when the
        default id computed from the host name is not a usable id."""
        hostname = hostname or socket.gethostname()
        replica = settings.replica_id or f"{hostname}:{settings.port}"
        try:
            check_replica_id(replica)
        except ValueError as exc:
            raise ValueError(f"{exc}; set serve.replica_id") from None
        host = hostname if settings.host in _WILDCARDS else settings.host
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host  # an IPv6 literal
        url = settings.advertise_url or f"http://{host}:{settings.port}"
        return cls(replica, url, getattr(settings, "role", "both"))


class ReplicaAnnouncer:
    """The one writer of this replica's status: one task, woken by the heartbeat or by a swap outcome."""

    def __init__(
        self, client, streams: Streams, identity: ReplicaIdentity, engine, swapper, heartbeat_s: float, ttl_s: float
    ) -> None:
        self.client, self.streams, self.identity = client, streams, identity
        self.engine, self.swapper = engine, swapper
        self.heartbeat_s, self.ttl_s = heartbeat_s, ttl_s
        self.started_at = time.time()
        self.writes = 0
        self._wake = asyncio.Event()
        self._failing = False
        self._stopping = False

    def status(self) -> ReplicaStatus:
        s = self.swapper
        return ReplicaStatus(
            replica=self.identity.replica,
            url=self.identity.url,
            policy_version=self.engine.version,
            role=self.identity.role,
            last_swap=s.last_outcome,
            last_swap_version=s.last_outcome_version,
            last_swap_at=s.last_outcome_at,
            last_error=None if s.last_outcome == "ok" else s.last_error,
            started_at=self.started_at,
            heartbeat_s=self.heartbeat_s,
            ttl_s=self.ttl_s,
        )

    def poke(self) -> None:
        """Write the status now (a swap just ended), not at the next heartbeat."""
        self._wake.set()

    async def write(self) -> None:
        """One write; a Redis error is logged once per outage, never raised: serving does not depend on it."""
        try:
            await announce(self.client, self.streams, self.status())
        except (RedisError, OSError) as exc:
            if not self._failing:
                log.warning(
                    "replica status of %s not written (will retry every %.0fs): %s",
                    self.identity.replica,
                    self.heartbeat_s,
                    exc,
                )
            self._failing = True
            return
        if self._failing:
            log.info("replica status of %s written again", self.identity.replica)
        self._failing = False
        self.writes += 1

    async def run(self) -> None:
        """Background task: write, then wait for a swap outcome or the next heartbeat, until `stop` (or a cancel)."""
        while not self._stopping:
            self._wake.clear()
            await self.write()
            # a cancel redis-py absorbed inside the write: honour it, or a stopping server would heartbeat forever
            raise_if_cancelling()
            if self._stopping:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), self.heartbeat_s)
            except asyncio.TimeoutError:
                pass

    async def stop(self, task: asyncio.Task) -> None:
        """End `task` (this announcer's `run`) and remove the status: asked to stop, not cancelled mid-command, unless
        a write in flight takes longer than `STOP_TIMEOUT_S`."""
        self._stopping = True
        self._wake.set()
        done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        try:
            await asyncio.wait_for(withdraw(self.client, self.streams, self.identity.replica), STOP_TIMEOUT_S)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            log.info("replica status of %s left to expire: %s", self.identity.replica, exc)
