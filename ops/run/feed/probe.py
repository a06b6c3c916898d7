"""The held-out probe: the evaluation (`ops.experiments.eval.suite`) run against the served policy at its first
readiness (v0) and again every `ops.probe_every_versions` published versions — the task pack's held-out splits (test,
novel) and a fixed seeded BFCL sample, greedy by default, never recorded (the learner must not train on test items).

Each round leaves its per-item records in `<data_dir>/probe/v<version>.jsonl` and one summary on the
`<prefix>:stats:probe` stream (`ops.observe.probe_rounds.ProbeRound`): success per suite with its Wilson 95%
interval, exec, pref, tool turns, and the paired difference from v0 (bootstrap 95% interval, McNemar p).

Why the whole evaluation and greedy: the earlier probe sampled 16 test tasks at temperature 1 and most of its
rise came from sampled members that skipped the call; a greedy run over every held-out item asks what the policy
does, on enough items for an interval narrow enough to read, and the same items every round make the rounds
paired. Why a probe beside `slca eval`: it measures the weights the running server actually serves, as they are
swapped in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from ops.experiments.eval.suite import EvalItem, EvalPlan, ItemRecord
from ops.observe.probe_rounds import ProbeRound, RoundFiles, summarise_round
from slca.contracts.stats import PROBE_MAXLEN, probe_fields

log = logging.getLogger("slca.feed.probe")


RunItems = Callable[[list[EvalItem]], Awaitable[list[ItemRecord]]]
"""async items → records, in item order; a failed request is a record with `error`
(`ops.experiments.eval.suite.run_items`)."""


@dataclass(frozen=True)
class ProbePlan:
    url: str
    eval: EvalPlan
    """What a round asks and how (splits, BFCL sample, greedy or sampled, requests in flight)."""
    data_dir: Path
    """Rounds' per-item files go to `<data_dir>/probe/`."""
    every_versions: int = 40
    poll_s: float = 5.0
    max_failed_share: float = 0.25
    """A round with more failed requests than this share is dropped (a server restart mid-round): its rates would
    be over a different item set than the other rounds'."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer`; the probe needs only the 'serve' scope (it records nothing)."""
    holds_feed: bool = True
    """The feed sends nothing new while a round runs (`Prober.feed_open`). Beside full training traffic one
    round of ≈ 290 items took 2,376 s on a 2-core machine and was answered by 29 different versions
    (bench/online/run4-fresh-clone); held, the learner drains its short backlog and the round runs on an
    engine that serves it alone, over the few versions that backlog still publishes."""


def suite_runner(plan: ProbePlan) -> RunItems:
    """The one call into the evaluation: `ops.experiments.eval.suite.run_items` against the served API."""
    from ops.experiments.eval.suite import run_items

    async def run(items: list[EvalItem]) -> list[ItemRecord]:
        return await run_items(plan.url.rstrip("/"), plan.api_key, items, plan.eval)

    return run


class Prober:
    """Runs a round at the first served version it sees and whenever the served version has advanced
    `every_versions` since the last round; the first round is the baseline every later one is paired with."""

    def __init__(
        self,
        plan: ProbePlan,
        items: list[EvalItem],
        publish: Callable[[dict], Awaitable[None]],
        run_items: RunItems | None = None,
    ):
        self.plan = plan
        self.items = items
        """Planned once: every round asks the same items (the rounds are paired)."""
        self.publish = publish
        self.run_items = run_items or suite_runner(plan)
        self.files = RoundFiles(plan.data_dir)
        self.baseline: list[ItemRecord] | None = None
        self.baseline_version: int | None = None
        self.last_version: int | None = None
        self.resumed = False
        self.rounds = 0
        self.feed_open = asyncio.Event()
        """Set while the feed may send; cleared for the length of a round when `plan.holds_feed`."""
        self.feed_open.set()

    async def run(self, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.plan.api_key}"} if self.plan.api_key else {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers) as session:
            while not stop.is_set():
                version = await self.served_version(session)
                if version is not None:
                    await self.step(version)
                try:
                    await asyncio.wait_for(stop.wait(), timeout=self.plan.poll_s)
                except asyncio.TimeoutError:
                    pass

    async def step(self, version: int) -> ProbeRound | None:
        """One poll: a round if one is due at the served `version` (its summary, published), else None."""
        if not self.resumed:
            self.resume(version)
        if not self.due(version):
            return None
        started = time.time()
        if self.plan.holds_feed:
            self.feed_open.clear()
        try:
            records = await self.run_items(self.items)
        finally:
            self.feed_open.set()
        failed = sum(r.error is not None for r in records)
        if failed > len(records) * self.plan.max_failed_share:
            log.warning("probe round at v%d dropped: %d of %d requests failed", version, failed, len(records))
            return None  # not due-marked: the next poll tries again
        result = summarise_round(records, self.baseline, self.baseline_version, started, self.plan.eval.mode, version)
        self.files.write(result, records)
        if self.baseline is None:
            self.baseline, self.baseline_version = records, result.version
        self.last_version = version
        self.rounds += 1
        await self.publish(result.to_json())
        head, diff = result.headline, result.vs_v0.get("held_out", {})
        log.info(
            "probe v%d: held-out success %.3f [%.3f, %.3f] (n=%d), vs v%d %+.3f [%+.3f, %+.3f]; %.0fs",
            result.version,
            head.get("success", 0.0),
            head.get("ci_low", 0.0),
            head.get("ci_high", 0.0),
            head.get("n", 0),
            result.baseline_version,
            diff.get("diff", 0.0),
            diff.get("ci_low", 0.0),
            diff.get("ci_high", 0.0),
            result.seconds,
        )
        return result

    def due(self, version: int) -> bool:
        return self.last_version is None or version >= self.last_version + self.plan.every_versions

    def resume(self, served: int) -> None:
        """At the first readiness: a feed restarted mid-run (the served version is at or past its last round's)
        picks up its baseline and schedule from the round files; files of an earlier run are moved aside."""
        self.resumed = True
        versions = self.files.versions()
        if not versions:
            return
        if versions[-1] <= served:
            try:
                self.baseline = self.files.read(versions[0])
            except (OSError, ValueError, TypeError) as exc:
                log.warning("probe: round file v%d unreadable (%s): starting over", versions[0], exc)
            else:
                self.baseline_version, self.last_version = versions[0], versions[-1]
                log.info("probe: resumed (baseline v%d, last round v%d)", versions[0], versions[-1])
                return
        moved = self.files.archive()
        log.info("probe: an earlier run's round files moved to %s", moved)

    async def served_version(self, session: aiohttp.ClientSession) -> int | None:
        try:
            async with session.get(self.plan.url.rstrip("/") + "/readyz") as resp:
                if resp.status != 200:
                    return None
                return (await resp.json(content_type=None)).get("policy_version")
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, ConnectionError):
            return None


def redis_publisher(redis_url: str, stream: str):
    """async (round json) → XADD on `stream` (capped); the client is opened lazily on the running loop."""
    import redis.asyncio as aioredis

    client: list = []

    async def publish(entry: dict) -> None:
        if not client:
            client.append(aioredis.Redis.from_url(redis_url, socket_timeout=5.0))
        try:
            await client[0].xadd(stream, probe_fields(entry), maxlen=PROBE_MAXLEN, approximate=True)
        except (aioredis.RedisError, OSError) as exc:
            log.warning("probe round not published: %s", exc)

    return publish
