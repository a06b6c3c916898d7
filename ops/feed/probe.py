"""The held-out probe: the same test-split tasks, with the same seeds, run against the served policy every
`ops.probe_every_versions` published versions, scored with the workers' HierR, one JSON entry per round on the
`<prefix>:probe` stream.

Why a probe beside the feed's own trajectories: a version's feed trajectories come from whichever tasks the feed
drew while it was served, and the task draw alone moves a version's mean execution reward by ±0.05 on the
everyday pack. The probe asks the same questions with the same sampling seeds every round, so two rounds differ
by the weights (and the sampling paths those weights take), not by the questions. Probe runs are never recorded:
the learner must not train on test tasks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import aiohttp

from slca.contracts import SegmentKind, Task, Trajectory
from slca.contracts.wire import validate

log = logging.getLogger("slca.feed.probe")

PROBE_STREAM_MAXLEN = 10_000
PROBE_SUFFIX = "stats:probe"
"""Capped stream (suffix after the prefix) of probe rounds: one field `json` per round (`ProbeRound.to_json`)."""


@dataclass(frozen=True)
class ProbePlan:
    url: str
    tasks: list[Task]
    every_versions: int = 10
    n: int = 2
    temperature: float = 1.0
    max_tokens: int = 192
    max_turns: int = 3
    seed: int = 0
    poll_s: float = 5.0
    concurrency: int = 4
    """Probe requests in flight at once."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer`; the probe needs only the 'serve' scope (it records nothing)."""


@dataclass
class ProbeRound:
    """One probe round: every probe task once (n samples each), on whatever versions were served meanwhile."""

    started_at: float
    seconds: float
    versions: list[int]
    """Policy version of each scored trajectory (a swap can land mid-round)."""
    exec_mean: float
    pref_mean: float
    success: float
    """Share of trajectories with execution reward 1 (every gold call made, with the right arguments)."""
    tool_turns_mean: float
    trajectories: int
    failed_requests: int

    @property
    def version(self) -> int:
        """The round's version label: the median served version over its trajectories."""
        return int(statistics.median_low(self.versions))

    def to_json(self) -> dict:
        return {**asdict(self), "version": self.version, "version_min": min(self.versions),
                "version_max": max(self.versions)}  # fmt: skip


def probe_body(task: Task, plan: ProbePlan, index: int) -> dict:
    # seed fixed per task index: every round samples task i with the same seeds (common random numbers)
    return {
        "messages": task.messages, "tools": task.tools, "task_id": task.task_id,
        "ground_truth": task.ground_truth.model_dump(mode="json"), "n": plan.n, "seed": plan.seed + 7919 * index,
        "temperature": plan.temperature, "top_p": 1.0, "max_tokens": plan.max_tokens, "max_turns": plan.max_turns,
        "record": False, "return_trajectories": True, "stream": False,
    }  # fmt: skip


def tool_turns(traj: Trajectory) -> int:
    """Model turns that wrote at least one tool call (what serve's slca_tool_turns observes)."""
    return len({seg.turn for seg in traj.segments if seg.kind == SegmentKind.TOOL_CALL})


def summarise(started_at: float, trajs: list[Trajectory], rewards: list, failed: int) -> ProbeRound | None:
    if not trajs:
        return None
    n = len(trajs)
    return ProbeRound(
        started_at=started_at, seconds=time.time() - started_at, versions=[t.policy_version for t in trajs],
        exec_mean=sum(r.exec for r in rewards) / n, pref_mean=sum(r.pref for r in rewards) / n,
        success=sum(r.exec >= 1.0 - 1e-9 for r in rewards) / n,
        tool_turns_mean=sum(tool_turns(t) for t in trajs) / n, trajectories=n, failed_requests=failed,
    )  # fmt: skip


class Prober:
    """Runs a probe round whenever the served version has advanced `every_versions` since the last one."""

    def __init__(self, plan: ProbePlan, score: Callable[[Trajectory], object], publish: Callable[[dict], object]):
        self.plan = plan
        self.score = score
        """Trajectory → Reward (HierR with the online workers' settings; blocking: run in a thread)."""
        self.publish = publish
        """async (round json) → None."""
        self.last_version: int | None = None
        self.rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.plan.api_key}"} if self.plan.api_key else {}
        timeout = aiohttp.ClientTimeout(total=900)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
            while not stop.is_set():
                version = await self.served_version(session)
                if version is not None and self.due(version):
                    result = await self.round(session)
                    if result is not None:
                        self.last_version = version
                        self.rounds += 1
                        await self.publish(result.to_json())
                        log.info("probe v%d: exec %.3f, success %.2f, tool turns %.2f (%d trajectories, %.0fs)",
                                 result.version, result.exec_mean, result.success, result.tool_turns_mean,
                                 result.trajectories, result.seconds)  # fmt: skip
                try:
                    await asyncio.wait_for(stop.wait(), timeout=self.plan.poll_s)
                except asyncio.TimeoutError:
                    pass

    def due(self, version: int) -> bool:
        return self.last_version is None or version >= self.last_version + self.plan.every_versions

    async def served_version(self, session: aiohttp.ClientSession) -> int | None:
        try:
            async with session.get(self.plan.url.rstrip("/") + "/readyz") as resp:
                if resp.status != 200:
                    return None
                return (await resp.json(content_type=None)).get("policy_version")
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, ConnectionError):
            return None

    async def round(self, session: aiohttp.ClientSession) -> ProbeRound | None:
        started = time.time()
        endpoint = self.plan.url.rstrip("/") + "/v1/agent/runs"
        # a few requests in flight: the engine batches them, so a round costs about as long as its slowest
        # episodes instead of the sum of all; few enough not to crowd out the feed
        gate = asyncio.Semaphore(self.plan.concurrency)

        async def one(index: int, task: Task) -> list[Trajectory] | None:
            async with gate:
                try:
                    async with session.post(endpoint, json=probe_body(task, self.plan, index)) as resp:
                        if resp.status != 200:
                            return None
                        body = await resp.json(content_type=None)
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, ConnectionError):
                    return None
            return [validate(Trajectory, run["trajectory"]) for run in body.get("runs", []) if run.get("trajectory")]

        results = await asyncio.gather(*(one(i, t) for i, t in enumerate(self.plan.tasks)))
        failed = sum(r is None for r in results)
        if failed > len(self.plan.tasks) // 4:  # a server restart mid-round: the round would not be comparable
            log.warning("probe round dropped: %d of %d requests failed", failed, len(self.plan.tasks))
            return None
        trajs = [t for r in results if r for t in r]
        rewards = await asyncio.to_thread(lambda: [self.score(t) for t in trajs])
        return summarise(started, trajs, rewards, failed)


def redis_publisher(redis_url: str, stream: str):
    """async (round json) → XADD on `stream` (capped); the client is opened lazily on the running loop."""
    import redis.asyncio as aioredis

    client: list = []

    async def publish(entry: dict) -> None:
        if not client:
            client.append(aioredis.Redis.from_url(redis_url, socket_timeout=5.0))
        try:
            await client[0].xadd(stream, {"json": json.dumps(entry)}, maxlen=PROBE_STREAM_MAXLEN, approximate=True)
        except (aioredis.RedisError, OSError) as exc:
            log.warning("probe round not published: %s", exc)

    return publish


def read_rounds(redis_client, stream: str, count: int = 1000) -> list[dict]:
    """The latest `count` probe rounds, oldest first (sync client: `slca status`, `slca bench online`)."""
    from ops.redis_view import parse_rounds

    return parse_rounds(redis_client.xrevrange(stream, count=count))
