"""A cancel that a library absorbed: redis-py (8.1) can swallow a `CancelledError` that lands inside a command —
the command completes and returns normally, and the cancel request stays pending on the task (`cancelling()`).
A background loop that carries on from there never ends: it waits in its next command (a pub/sub `listen()` waits
forever). Loops around such commands call `raise_if_cancelling()` after each of them."""

from __future__ import annotations

import asyncio


def raise_if_cancelling() -> None:
    """Raise `CancelledError` if the current task has a cancel request pending (one a callee absorbed)."""
    me = asyncio.current_task()
    if me is not None and me.cancelling():
        raise asyncio.CancelledError
