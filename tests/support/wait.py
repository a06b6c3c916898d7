"""`wait_for`: the one way tests wait for another process's (or thread's) progress (`wait_for_async` inside an
event loop)."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 20.0,
    what: str | None = None,
    *,
    interval: float = 0.05,
    alive: Callable[[], bool] | None = None,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll `predicate()` until it returns something truthy, and return that value.

    Fails with an `AssertionError` that names what it waited for (`what`, else the predicate's name or source)
    and its last value after `timeout` seconds, or at once when `alive()` turns false (the process under test
    died: waiting on is pointless). `detail()` (e.g. the tail of that process's log) is added to either
    message. Polling is for progress there is no event to wait on; `interval` is the pause between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None and not alive():
            raise AssertionError(
                _message(f"gave up waiting for {_name(predicate, what)}: the process under test exited", detail)
            )
        if time.monotonic() >= deadline:
            raise AssertionError(
                _message(
                    f"timed out after {timeout:g}s waiting for {_name(predicate, what)} (last value: {value!r})", detail
                )
            )
        time.sleep(interval)


async def wait_for_async(predicate, timeout: float = 20.0, what: str | None = None, *, interval: float = 0.05):
    """`wait_for` for a predicate returning an awaitable, polled without blocking the running event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {_name(predicate, what)} (last value: {value!r})"
            )
        await asyncio.sleep(interval)


def _name(predicate, what: str | None) -> str:
    if what:
        return what
    name = getattr(predicate, "__name__", "")
    if name and name != "<lambda>":
        return name
    try:
        return inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        return repr(predicate)


def _message(text: str, detail: Callable[[], str] | None) -> str:
    return f"{text}\n{detail()}" if detail is not None else text
