"""Selective rollouts: the feed skips, with a probability, a training task whose latest group was uniform.

Why: difficulty screening (`learner.screen_success_variance`) leaves out a group whose members all solved or all
failed (no success variance: no execution advantage), so the generation it cost trained nothing — and generation
is most of a small machine's CPU (serve ran ≈ 1.7 of 2 cores in `bench/rl/as-shipped-avx2`, where the warm start
solves ≈ 5% and screening dropped nearly every group). A prompt with zero variance at one epoch tends to have it at
the next (GRESO, Zheng et al. 2025, "Act Only When It Pays"), so skipping such a task with probability
`ops.feed_skip_uniform_p` spends the generation on tasks that can still teach. The probability stays below 1 and a
task's outcome is replaced by its next group's, so a task the policy starts to solve (or unlearns) comes back.

Outcomes come from the scorer's `stats:rewards` stream (`RewardStats`: the task and the success of every scored
trajectory), read incrementally by one small task beside the feed's workers, as the gate's hold is. A Redis error
never stops the feed: it is logged once (until Redis answers again) and the feed skips on what it knew.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ops.run.stopping import FailureLog, wait_or_stop
from slca.contracts import Streams
from slca.contracts.queues import STATS_REWARDS
from slca.contracts.stats import RewardStats
from slca.contracts.wire import ContractError

log = logging.getLogger("slca.feed")

READ_COUNT = 500
"""Stream entries fetched per XREAD (the stream keeps about `STATS_MAXLEN`)."""


class TaskOutcomes:
    """The successes of each training task's latest `group_size` scored trajectories, read from `stats:rewards`.

    Only the feed's own tasks count (held-out evaluations use other ids); a trajectory without a success (no
    ground truth) tells nothing and is left out. The stream is read from its start, so a restarted feed knows
    what the stream still holds."""

    def __init__(self, client, stream: str, group_size: int, task_ids: set[str], poll_s: float = 1.0) -> None:
        self.client, self.stream, self.poll_s = client, stream, poll_s
        self.group_size = group_size
        self.task_ids = task_ids
        self.recent: dict[str, deque[float]] = {}
        self.last_id = "0-0"
        self.failures = FailureLog(
            log,
            f"feed: cannot read task outcomes from {stream} (%s); skipping on what is known",
            f"feed: task outcomes are readable again from {stream}",
        )

    @classmethod
    def from_url(cls, redis_url: str, prefix: str, group_size: int, task_ids: set[str]) -> "TaskOutcomes":
        client = aioredis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return cls(client, Streams(prefix).stats(STATS_REWARDS), group_size, task_ids)

    def observe(self, task_id: str | None, success: float | None) -> None:
        if task_id in self.task_ids and success is not None:
            self.recent.setdefault(task_id, deque(maxlen=self.group_size)).append(success)

    def uniform(self, task_id: str) -> bool:
        """Whether the task's latest `group_size` trajectories all had one success (all solved or all failed)."""
        seen = self.recent.get(task_id)
        return seen is not None and len(seen) == self.group_size and min(seen) == max(seen)

    async def read_new(self) -> int:
        """Read what the stream gained since the last read; returns the entries read (0 when Redis cannot tell)."""
        read = 0
        try:
            while True:
                reply = await self.client.xread({self.stream: self.last_id}, count=READ_COUNT)
                entries = reply[0][1] if reply else []
                for entry_id, fields in entries:
                    self.last_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    try:
                        row = RewardStats.from_fields(fields)
                    except ContractError:  # another writer's layout: nothing this reader can use
                        continue
                    self.observe(row.task_id, row.success)
                read += len(entries)
                if len(entries) < READ_COUNT:
                    break
        except (RedisError, OSError) as exc:
            self.failures.failed(exc)
            return read
        self.failures.succeeded()
        return read

    async def run(self, stop: asyncio.Event) -> None:
        """Read every `poll_s` until `stop`."""
        while not stop.is_set():
            await self.read_new()
            await wait_or_stop(stop, self.poll_s)

    async def close(self) -> None:
        await self.client.aclose()


class TaskSkipper:
    """Whether to skip a task now: its latest group was uniform, and a seeded draw falls under `p`."""

    def __init__(self, outcomes: TaskOutcomes, p: float, seed: int = 0) -> None:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"a skip probability must be in [0, 1) (a task is never skipped for good), got {p}")
        self.outcomes, self.p = outcomes, p
        self.rng = random.Random(seed)

    def skip(self, task_id: str) -> bool:
        return self.outcomes.uniform(task_id) and self.rng.random() < self.p
