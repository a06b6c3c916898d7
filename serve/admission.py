"""Admission: bounds on the requests the server takes on. Before a body is read, a bounded queue in front of the
request pool (`planning`: reading, parsing, checking, templating, tokenising); after it, a bound on the model work
in flight (`admit`: requests, and sequences — a request counts its n). Beyond either a request is refused at once
with 429 + Retry-After instead of queueing without end in front of the request pool or the engine.

Work shared between callers beyond these bounds (the grammar builders) is shared per caller (`caller_of`)."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Iterator

from aiohttp import web

from serve.auth import bearer, granted
from serve.errors import TooManyRequests
from serve.keys import COMMON


class Admission:
    def __init__(self, max_requests: int, max_sequences: int, max_queued: int | None = None):
        self.max_requests, self.max_sequences = max_requests, max_sequences
        self.max_queued = max_queued if max_queued is not None else max_requests
        self.requests = 0
        self.sequences = 0
        self.queued = 0
        """Requests being read and prepared (`planning`), in the request pool or waiting for it."""

    @contextmanager
    def planning(self) -> Iterator[None]:
        """Hold a place among the requests being read and prepared while the block runs; TooManyRequests when
        `max_queued` are already, or when the work in flight is at `max_requests` (`admit` would refuse it once
        it is prepared: refused before its body is read instead)."""
        if self.queued >= self.max_queued or self.requests >= self.max_requests:
            raise TooManyRequests(
                f"the server is at its bound of requests waiting to be prepared ({self.queued}) or in flight "
                f"({self.requests}); retry shortly"
            )
        self.queued += 1
        try:
            yield
        finally:
            self.queued -= 1

    @contextmanager
    def admit(self, sequences: int) -> Iterator[None]:
        """Hold a place for one request of `sequences` sequences while the block runs; TooManyRequests when the
        bound would be passed (one request is always let in, however large its n)."""
        busy = self.requests >= self.max_requests or (
            self.requests > 0 and self.sequences + sequences > self.max_sequences
        )
        if busy:
            raise TooManyRequests(
                f"the server is at its bound of work in flight ({self.requests} requests, "
                f"{self.sequences} sequences); retry shortly"
            )
        self.requests += 1
        self.sequences += sequences
        try:
            yield
        finally:
            self.requests -= 1
            self.sequences -= sequences


ADMISSION = web.AppKey("admission", Admission)


def admission_of(settings) -> Admission:
    return Admission(settings.max_inflight_requests, settings.max_inflight_sequences, settings.max_queued_requests)


def caller_of(request: web.Request) -> str:
    """Who sent `request`, for a per-caller share: its API key when that is a configured one (a digest: the key
    itself is kept nowhere), else its client address. An unknown key counts as none, or any client could make
    itself as many callers as it likes by sending a fresh key each time."""
    key = bearer(request)
    if key is not None and granted(request.app[COMMON], key) is not None:
        return "key:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"addr:{request.remote or 'unknown'}"
