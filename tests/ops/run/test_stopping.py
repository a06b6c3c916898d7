"""The loops' shared waiting and failure logging (ops/run/stopping.py)."""

from __future__ import annotations

import asyncio
import logging

from ops.run.stopping import FailureLog, until_stopped, wait_or_stop


def test_wait_or_stop_says_whether_a_stop_cut_the_wait_short():
    async def main():
        stop = asyncio.Event()
        timed_out = await wait_or_stop(stop, 0.01)
        asyncio.get_running_loop().call_later(0.01, stop.set)
        started = asyncio.get_running_loop().time()
        stopped = await wait_or_stop(stop, 60)
        return timed_out, stopped, asyncio.get_running_loop().time() - started

    timed_out, stopped, waited = asyncio.run(main())
    assert timed_out is False and stopped is True and waited < 30


def test_until_stopped_cancels_the_work_at_a_stop_and_raises_its_error():
    async def main():
        stop, cancelled = asyncio.Event(), asyncio.Event()

        async def forever():
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.set()

        asyncio.get_running_loop().call_later(0.01, stop.set)
        await until_stopped(forever(), stop)

        async def fails():
            raise ValueError("boom")

        try:
            await until_stopped(fails(), asyncio.Event())
        except ValueError as exc:
            return cancelled.is_set(), str(exc)
        return cancelled.is_set(), None

    assert asyncio.run(main()) == (True, "boom")


def test_failures_are_one_warning_until_a_success_which_is_one_line(caplog):
    log = logging.getLogger("slca.test-stopping")
    failures = FailureLog(log, "cannot read the key (%s)", "the key is readable again")
    with caplog.at_level(logging.INFO, logger=log.name):
        failures.succeeded()  # nothing failed: nothing to say
        for _ in range(3):
            failures.failed(ConnectionError("refused"))
        assert failures.failing
        failures.succeeded()
        failures.succeeded()
        failures.failed(ConnectionError("again"))
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("WARNING", "cannot read the key (refused)"),
        ("INFO", "the key is readable again"),
        ("WARNING", "cannot read the key (again)"),
    ]
