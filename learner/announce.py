"""The learner's announcements of its weight versions (docs/design.md#weights): tried until Redis takes them.

`slca.weights.publish` writes vN to disk; announcing it (`SET slca:weights:latest`, `PUBLISH slca:weights`) is this
module's. A Redis that refuses the write (out of memory under `maxmemory-policy noeviction`, a restart) must not end
the learner: the version is safe on disk, so the announcement is kept and tried again, with a back-off, before each
later read of groups, until Redis takes it or a newer version replaces it. Nothing else waits on it: the learner
goes on training, and the servers load the newest version once it is announced.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import redis

from slca.contracts import Streams, WeightManifest
from slca.weights import announce

log = logging.getLogger("slca.learner")


class Announcer:
    """The one announcement in flight: `announce` a manifest, `flush` before each read of groups."""

    def __init__(
        self,
        client,
        streams: Streams,
        retry_s: float = 1.0,
        retry_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client = client
        self.streams = streams
        self.retry_s = retry_s
        """Wait after a refused announcement before the next try; doubles after each further refusal."""
        self.retry_max_s = retry_max_s
        """Upper bound of that wait."""
        self.clock = clock
        self.pending: WeightManifest | None = None
        """The newest version not announced yet (None: Redis has the newest)."""
        self.failures = 0
        """Refusals of the pending announcement in a row."""
        self.next_try = 0.0
        self._warned_unsigned = False

    def announce(self, manifest: WeightManifest) -> bool:
        """Announce `manifest` now (it replaces any older one still pending); True when Redis took it."""
        if manifest.signature is None and not self._warned_unsigned:
            self._warned_unsigned = True
            log.warning(
                "learner: announcing unsigned weights (weights.key is unset): servers refuse them unless "
                "weights.allow_unsigned is set"
            )
        self.pending, self.failures, self.next_try = manifest, 0, 0.0
        return self.flush()

    def flush(self) -> bool:
        """Try the pending announcement when its back-off has passed; True when nothing is left pending."""
        if self.pending is None:
            return True
        if self.clock() < self.next_try:
            return False
        try:
            announce(self.client, self.streams, self.pending)
        except redis.RedisError as exc:
            self._refused(exc)
            return False
        if self.failures:
            log.info("learner: v%d announced after %d refusals", self.pending.version, self.failures)
        self.pending, self.failures = None, 0
        return True

    def _refused(self, exc: redis.RedisError) -> None:
        self.failures += 1
        delay = min(self.retry_max_s, self.retry_s * 2 ** (self.failures - 1))
        self.next_try = self.clock() + delay
        log.warning(
            "learner: Redis refused the announcement of v%d (%s: %s); the version is on disk, trying again in %.0fs",
            self.pending.version,
            type(exc).__name__,
            exc,
            delay,
        )
