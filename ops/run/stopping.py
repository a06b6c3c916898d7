"""What the long-running loops of `slca up` (feed, probe, gate) share: waiting that a stop cuts short, and a
poller's failures logged once until it succeeds again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Wait `seconds`, or less when `stop` is set meanwhile; True when stopped."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except asyncio.TimeoutError:
        return False
    return True


async def until_stopped(work: Awaitable, stop: asyncio.Event) -> None:
    """`work` until it ends or `stop` is set (then it is cancelled and waited for); its exception is raised."""
    task, stopped = asyncio.ensure_future(work), asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if not task.cancelled():
        task.result()


class FailureLog:
    """A poller's read failures: the first is a warning, the rest are quiet until a read succeeds again, which is
    logged once (a Redis outage is two lines, not one a second)."""

    def __init__(self, log: logging.Logger, failed: str, recovered: str) -> None:
        self.log, self.failed_message, self.recovered_message = log, failed, recovered
        """`failed` is formatted with the exception (one `%s`)."""
        self.failing = False
        """The last read failed."""

    def failed(self, exc: BaseException) -> None:
        if not self.failing:
            self.log.warning(self.failed_message, exc)
        self.failing = True

    def succeeded(self) -> None:
        if self.failing:
            self.log.info(self.recovered_message)
        self.failing = False
