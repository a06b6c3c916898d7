"""Admission: a bound on the model work in flight (requests, and sequences: a request counts its n). Beyond it a
request is refused at once with 429 + Retry-After instead of queueing without end in front of the engine."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from aiohttp import web

from serve.errors import TooManyRequests


class Admission:
    def __init__(self, max_requests: int, max_sequences: int):
        self.max_requests, self.max_sequences = max_requests, max_sequences
        self.requests = 0
        self.sequences = 0

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
    return Admission(settings.max_inflight_requests, settings.max_inflight_sequences)
