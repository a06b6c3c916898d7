"""The hold's state, apart from its endpoints (serve/version_hold.py) so that the version router can import it
without the HTTP helpers, which import the router (docs/design.md#versions)."""

from __future__ import annotations

import asyncio
import time

from serve.errors import ServeError


class CandidateMoved(ServeError):
    """A hold named a version the candidate's engine no longer serves."""

    status = 409
    type = "invalid_request_error"
    code = "candidate_moved"


class CandidateHold:
    """Until when the candidate's swaps wait. Set and released by the endpoints, awaited by the router's swap."""

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s
        self.version: int | None = None
        self.until = 0.0  # time.monotonic()
        self._released = asyncio.Event()

    @property
    def active(self) -> bool:
        return self.version is not None and time.monotonic() < self.until

    def hold(self, version: int, seconds: float) -> float:
        """Hold at `version` for `seconds` (capped at `max_s`) from now; the seconds granted."""
        granted = min(seconds, self.max_s)
        self.version, self.until = version, time.monotonic() + granted
        self._released.clear()
        return granted

    def release(self) -> None:
        self.version, self.until = None, 0.0
        self._released.set()

    async def wait(self) -> None:
        """Return once no hold is active (released, or its time is up)."""
        while self.active:
            self._released.clear()
            try:
                await asyncio.wait_for(self._released.wait(), max(0.0, self.until - time.monotonic()))
            except TimeoutError:
                pass
