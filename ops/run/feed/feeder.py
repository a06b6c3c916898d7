"""The feed loop: tasks → `POST /v1/agent/runs` (n = group size), bounded concurrency, retry with back-off.

A 503 (the API is loading, swapping or shedding load) and a refused connection (the API is not up yet, or is
being restarted by `slca up`) are transient: the same request is retried after a doubling delay. Any other
error is counted and the feed moves on to the next task, so one bad task cannot stall training. So is a run
the API served without recording it (`record_refused`: the feed's key lacks the 'record' scope, serve/auth.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import aiohttp

from ops.run.feed.metrics import FeedMetrics
from ops.run.feed.pacing import wait_for_room, wait_while_held
from ops.run.stopping import wait_or_stop
from slca.contracts import Task

log = logging.getLogger("slca.feed")


@dataclass(frozen=True)
class FeedPlan:
    url: str
    group_size: int
    concurrency: int = 2
    max_tokens: int = 192
    max_turns: int = 3
    temperature: float = 1.0
    top_p: float = 1.0
    retry_initial_s: float = 0.5
    retry_max_s: float = 30.0
    requests: int = 0
    """Stop after this many requests; 0 runs until stopped."""
    seed: int = 0
    request_timeout_s: float = 900.0
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer`; needs the 'record' scope, else the API serves but records nothing."""
    max_group_backlog: int = 0
    """Wait before a request while the learner has more groups than this waiting (0: never; ops/run/feed/pacing.py)."""
    pace_poll_s: float = 1.0
    """How often a waiting feed reads the backlog again."""
    stop_grace_s: float = 5.0
    """After a stop, how long requests in flight may finish before they are abandoned (kept below `slca up`'s
    `ops.shutdown_grace_s`, after which the feed would be SIGKILLed)."""


@dataclass
class FeedReport:
    sent: int = 0
    ok: int = 0
    failed: int = 0
    retries: int = 0
    skipped: int = 0
    """Tasks passed over because their latest group was uniform (`ops.feed_skip_uniform_p`)."""
    abandoned: int = 0
    """Requests still waiting to retry when the feed was stopped (never answered: nothing to lose)."""
    trajectory_ids: list[str] = field(default_factory=list)


ABANDONED: list[str] = []  # identity marker, see `FeedReport.abandoned`


class TransientError(Exception):
    """Worth retrying the same request: 503, connection refused/reset."""


def task_cycle(tasks: list[Task], seed: int) -> Iterator[Task]:
    """Every task once per epoch, in a fresh seeded order each epoch."""
    rng = random.Random(seed)
    while True:
        order = list(tasks)
        rng.shuffle(order)
        yield from order


def request_body(task: Task, plan: FeedPlan) -> dict:
    return {
        "messages": task.messages,
        "tools": task.tools,
        "task_id": task.task_id,
        "ground_truth": task.ground_truth.model_dump(mode="json"),
        "n": plan.group_size,
        "temperature": plan.temperature,
        "top_p": plan.top_p,
        "max_tokens": plan.max_tokens,
        "max_turns": plan.max_turns,
        "record": True,
        "return_trajectories": False,
        "stream": False,
    }


class Feeder:
    def __init__(
        self,
        plan: FeedPlan,
        tasks: list[Task],
        metrics: FeedMetrics,
        on_ids: Callable[[list[str]], None] = lambda ids: None,
        on_done: Callable[[], None] = lambda: None,
        backlog=None,
        hold: asyncio.Event | None = None,
        start: asyncio.Event | None = None,
        gate_hold=None,
        skipper=None,
    ):
        self.plan = plan
        self.tasks = task_cycle(tasks, plan.seed)
        self.n_tasks = len(tasks)
        self.metrics = metrics
        self.on_ids = on_ids
        self.on_done = on_done
        self.report = FeedReport()
        self.endpoint = plan.url.rstrip("/") + "/v1/agent/runs"
        self.headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
        self.backlog = backlog
        """async () -> int | None: the learner's group backlog (None: no pacing)."""
        self.hold = hold
        """Set: the feed may send; cleared by the probe while a round runs (None: never held)."""
        self.start = start
        """Set: the feed may send its first request (the probe has decided whether its baseline holds `hold`, or
        has stopped: `Prober.feed_may_start`; None: at once)."""
        self.gate_hold = gate_hold
        """A `GateHold` (ops/run/feed/gate_hold.py), run beside the workers: the feed sends nothing while the gate
        judges (None: the gate never holds it)."""
        self.skipper = skipper
        """A `TaskSkipper` (ops/run/feed/selective.py): a task whose latest group was uniform may be passed over;
        its `outcomes` are read while the workers run (None: every task every epoch)."""

    async def run(self, stop: asyncio.Event) -> FeedReport:
        timeout = aiohttp.ClientTimeout(total=self.plan.request_timeout_s)
        # the gate's hold and the task outcomes are read while the workers run, and no longer, whatever ends them
        readers = [r.run(stop) for r in (self.gate_hold, self.skipper and self.skipper.outcomes) if r is not None]
        watching = [asyncio.create_task(r) for r in readers]
        try:
            return await self._run(stop, timeout)
        finally:
            for w in watching:
                w.cancel()
            await asyncio.gather(*watching, return_exceptions=True)

    async def _run(self, stop: asyncio.Event, timeout: aiohttp.ClientTimeout) -> FeedReport:
        async with aiohttp.ClientSession(timeout=timeout, headers=self.headers) as session:
            workers = {asyncio.create_task(self._worker(session, stop)) for _ in range(self.plan.concurrency)}
            stopped = asyncio.create_task(stop.wait())
            running, failed = set(workers), None
            while running and not stopped.done() and failed is None:
                done, _ = await asyncio.wait(running | {stopped}, return_when=asyncio.FIRST_COMPLETED)
                running -= done
                failed = next((w.exception() for w in done & workers if w.exception() is not None), None)
            if running and failed is None:
                # stopped: a request in flight gets `stop_grace_s` to finish (its rollouts recorded), then it is
                # abandoned — an agent run can take longer than `slca up`'s whole shutdown grace on a busy server
                _, running = await asyncio.wait(running, timeout=self.plan.stop_grace_s)
                self.report.abandoned += len(running)
            for worker in running:
                worker.cancel()
            stopped.cancel()
            await asyncio.gather(*workers, stopped, return_exceptions=True)
        if failed is not None:
            raise failed
        return self.report

    def _next_task(self) -> Task | None:
        if self.plan.requests and self.report.sent >= self.plan.requests:
            return None
        self.report.sent += 1
        task = next(self.tasks)
        # at most an epoch of skips in a row: with every task uniform the feed still sends (a skip saves
        # generation; it must never stop the feed)
        for _ in range(self.n_tasks - 1 if self.skipper is not None else 0):
            if not self.skipper.skip(task.task_id):
                break
            self.report.skipped += 1
            self.metrics.skipped.inc()
            task = next(self.tasks)
        return task

    async def _worker(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        # stop is checked between requests only: a request in flight finishes, so its rollouts are recorded
        if (held := await wait_while_held(self.start, stop)) > 0:
            self._count_held(held)
        while not stop.is_set():
            gate_open = self.gate_hold.open if self.gate_hold is not None else None
            if (held := await wait_while_held(self.hold, stop, gate_open)) > 0:
                self._count_held(held)
            if stop.is_set():
                break
            if self.backlog is not None:
                waited = await wait_for_room(self.backlog, self.plan.max_group_backlog, stop, self.plan.pace_poll_s)
                self.metrics.paced_seconds.inc(waited)
                if stop.is_set():
                    break
            if (task := self._next_task()) is None:
                break
            ids = await self._post_with_retry(session, task, stop)
            if ids is ABANDONED:
                self.report.abandoned += 1
            elif ids is None:
                self.report.failed += 1
            else:
                self.report.ok += 1
                self.report.trajectory_ids.extend(ids)
                self.metrics.trajectories.inc(len(ids))
                self.on_ids(ids)
            self.on_done()

    def _count_held(self, seconds: float) -> None:
        """A worker's wait, counted as its share of the feed's: every worker waits through one hold, so the counter
        reads the hold's wall-clock seconds, not `concurrency` times them."""
        self.metrics.held_seconds.inc(seconds / max(1, self.plan.concurrency))

    async def _post_with_retry(self, session, task: Task, stop: asyncio.Event) -> list[str] | None:
        delay = self.plan.retry_initial_s
        while True:
            try:
                return await self._post(session, task)
            except TransientError as exc:
                if stop.is_set():
                    return ABANDONED
                self.report.retries += 1
                self.metrics.retries.labels(reason=str(exc)).inc()
                log.info("%s: %s; retrying in %.1fs", task.task_id, exc, delay)
                await wait_or_stop(stop, delay)
                delay = min(self.plan.retry_max_s, delay * 2)

    async def _post(self, session, task: Task) -> list[str] | None:
        started = time.monotonic()
        self.metrics.inflight.inc()
        try:
            async with session.post(self.endpoint, json=request_body(task, self.plan)) as resp:
                if resp.status == 503:
                    self.metrics.requests.labels(status="503").inc()
                    raise TransientError("unavailable")
                text = await resp.text()
                self.metrics.requests.labels(status=str(resp.status)).inc()
                if resp.status != 200:
                    log.warning("%s: HTTP %d: %s", task.task_id, resp.status, text[:300])
                    return None
                body = await resp.json(content_type=None)
                if body.get("record_refused"):  # served but not recorded: a retry cannot help, the key is wrong
                    log.warning("%s: %s", task.task_id, body["record_refused"])
                    return None
                return [r["trajectory_id"] for r in body.get("runs", []) if r.get("trajectory_id")]
        except (aiohttp.ClientConnectionError, ConnectionError) as exc:
            raise TransientError("connection") from exc
        except (asyncio.TimeoutError, ValueError) as exc:
            self.metrics.requests.labels(status="error").inc()
            log.warning("%s: %s", task.task_id, exc or type(exc).__name__)
            return None
        finally:
            self.metrics.inflight.dec()
            self.metrics.request_seconds.observe(time.monotonic() - started)
