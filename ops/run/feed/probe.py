"""The probe: the evaluation (`ops.experiments.eval.suite`) run against the served policy — the task pack's held-out
splits (test, novel), the training-task probe (`train_probe`: a fixed sample of the train tasks the feed serves) and
a fixed seeded BFCL sample, greedy by default, never recorded (the learner must not train on test items).

Three kinds of round:
- the baseline, at the first readiness: v0, the frozen warm start alone. Every item is pinned to that version
  (`X-SLCA-Pin-Version`: serve answers it from whichever engine holds it — the callers' engine once the learner's
  versions move the candidate on), so the feed need not wait for it: on a fresh 2-core machine the round of ≈ 350
  greedy items takes minutes, and holding the feed for it kept the learner's first step that much later. A serve
  with one engine per process (vLLM; `/v1/versions` says `one_engine`) cannot answer a pin of a version its engine
  has moved past (409): there the feed is held until the baseline is had (at most `MAX_HELD_BASELINES` tries, each
  at most `ops.probe_baseline_hold_s`, after which the items answered so far are the baseline), so that no version
  moves under it — on a fresh clone every unheld try was dropped, each at the next version. The
  feed's first request waits for the probe's decision at the first readiness (`Prober.feed_may_start`; set too
  when the probe stops or fails), so the hold is in place before the feed sends anything. A warm
  start evaluated before is read from its cache instead (`ops.run.feed.baseline_cache`: keyed by the model's
  content, the items and the scorer).
- periodic rounds while training runs: every `ops.probe_every_minutes` (and/or `ops.probe_every_versions`), on
  the suites of `ops.probe_round_suites` (the training-task probe by default), and only while the probe's seconds
  stay within `ops.probe_budget_share` of the run's serving seconds (a round that would pass it waits).
- the final round when the feed stops: every item, on the last served version, bounded by
  `ops.probe_final_timeout_s` (`slca up` stops the feed and the learner first and gives it that long).

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
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp

from ops.experiments.eval.suite import EvalItem, EvalPlan, ItemRecord
from ops.observe.probe_rounds import ProbeRound, RoundFiles, summarise_round
from ops.run.feed.baseline_cache import BaselineCache
from ops.run.stopping import wait_or_stop
from slca.contracts.stats import PROBE_MAXLEN, probe_fields
from slca.contracts.versions import PIN_HEADER

log = logging.getLogger("slca.feed.probe")

MAX_HELD_BASELINES = 3
"""Baseline tries that hold the feed on a one-engine serve; after that many dropped ones the feed goes on (a serve
that keeps failing must not stop training), and the baseline is asked again unheld."""

BASELINE_CHUNK_ROUNDS = 4
"""A held baseline goes in chunks of this many times the probe's concurrency, its hold bound checked between them:
the bound is passed by at most one chunk (32 items at concurrency 8: 172 s under the soak's load on an avx2-only
2-core machine, bench/soak/learning-30-bounded-hold), and the engine's batch stays full within a chunk."""


RunItems = Callable[[list[EvalItem], int | None], Awaitable[list[ItemRecord]]]
"""async (items, the version every item is pinned to or None: the served one) → records, in item order; a failed
request is a record with `error` (`ops.experiments.eval.suite.run_items`)."""


@dataclass(frozen=True)
class ProbePlan:
    url: str
    eval: EvalPlan
    """What a round asks and how (splits, BFCL sample, greedy or sampled, requests in flight)."""
    data_dir: Path
    """Rounds' per-item files go to `<data_dir>/probe/`."""
    every_versions: int = 0
    """A periodic round is due once the served version has advanced this many versions since the last round
    (0: not by versions)."""
    every_s: float = 0.0
    """A periodic round is due this many seconds after the last round ended (0: not by time)."""
    budget_share: float = 0.0
    """A periodic round runs only if the probe's seconds, this round's estimate included, stay within this share of
    the run's serving seconds (0: no budget)."""
    item_seconds: float = 2.0
    """Seconds an item is estimated to take before a round on this machine has been measured."""
    final_timeout_s: float = 0.0
    """The final round at the feed's stop may take this long (0: no final round)."""
    poll_s: float = 5.0
    start_poll_s: float = 1.0
    """How often readiness is polled until the probe's first decision (`Prober.feed_may_start`): the feed waits
    for it, so the API's first readiness is seen this soon (at most `poll_s`)."""
    max_failed_share: float = 0.25
    """A round with more failed requests than this share is dropped (a server restart mid-round): its rates would
    be over a different item set than the other rounds'."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer`; the probe needs only the 'serve' scope (it records nothing)."""
    baseline_version: int = 0
    """The version whose round is the warm start's own evaluation (read from and kept in its cache): 0, the model
    serve started with, or the version the warm start was published as in this run (`ops.probe_baseline_version`)."""
    baseline_hold_s: float = 0.0
    """A baseline that holds the feed (one-engine serve) holds it at most this long (0: no bound): its items go in
    chunks, `round_items` first, and at the bound the records answered so far are the baseline."""
    holds_feed: bool = True
    """The feed sends nothing new while a periodic round runs (`Prober.feed_open`; the baseline, pinned, holds it
    only on a one-engine serve).
    Beside full training traffic one round of ≈ 290 items took 2,376 s on a 2-core machine and was answered by 29
    different versions (bench/online/run4-fresh-clone); held, the learner drains its short backlog and the round
    runs on an engine that serves it alone, over the few versions that backlog still publishes."""


def suite_runner(plan: ProbePlan) -> RunItems:
    """The one call into the evaluation: `ops.experiments.eval.suite.run_items` against the served API."""
    from ops.experiments.eval.suite import run_items

    async def run(items: list[EvalItem], pin: int | None) -> list[ItemRecord]:
        headers = {PIN_HEADER: str(pin)} if pin is not None else None
        return await run_items(plan.url.rstrip("/"), plan.api_key, items, plan.eval, headers=headers)

    return run


class Prober:
    """The baseline round at the first served version (pinned to it; the feed goes meanwhile), periodic rounds on
    `round_items` while their cadence and budget allow, and `final_round` at the stop; the baseline is what every
    later round is paired with."""

    def __init__(
        self,
        plan: ProbePlan,
        items: list[EvalItem],
        publish: Callable[[dict], Awaitable[None]],
        run_items: RunItems | None = None,
        round_items: list[EvalItem] | None = None,
        cache: Callable[[], BaselineCache | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.plan = plan
        self.items = items
        """Planned once: the baseline and the final round ask every one (the rounds are paired)."""
        self.round_items = items if round_items is None else round_items
        """What a periodic round asks: a subset of `items` (paired with the baseline on those)."""
        self.publish = publish
        self.run_items = run_items or suite_runner(plan)
        self.cache_of = cache
        """() → the warm start's cache entry (hashes the model; run off the loop), None: no cache."""
        self.clock = clock
        self.files = RoundFiles(plan.data_dir)
        self.baseline: list[ItemRecord] | None = None
        self.baseline_version: int | None = None
        self.last_version: int | None = None
        self.last_round: ProbeRound | None = None
        self.resumed = False
        self.rounds = 0
        self.run_started = 0.0
        self.last_round_at = 0.0
        self.probe_s = 0.0
        """Seconds the baseline and periodic rounds took in this run (the budget's numerator)."""
        self.item_s: float | None = None
        """Measured seconds per item on this machine (the last round's, or the cached baseline's)."""
        self.deferred = 0
        """Periodic rounds put off by the budget (counted once per due round)."""
        self._deferring = False
        self.feed_open = asyncio.Event()
        """Set while the feed may send: cleared for the length of a periodic round when `plan.holds_feed`, and
        until the baseline is had on a serve with one engine (`one_engine`)."""
        self.feed_open.set()
        self.one_engine: bool | None = None
        """The served API holds one engine per process: pins of a version it moved past are refused (read from
        `/v1/versions` at the first readiness; None: not known, pins assumed to hold)."""
        self.held_baselines = 0
        """Baseline tries that held the feed (`MAX_HELD_BASELINES`)."""
        self.gate_open: asyncio.Event | None = None
        """The gate's hold on the feed (ops/run/feed/gate_hold.py `GateHold.open`: set while the gate does not judge),
        or None. A periodic round waits while it is cleared: the gate's pinned runs have the cores to themselves, and
        the round comes at a later poll (the final round at the stop does not wait: the gate is stopping too)."""
        self.gate_waits = 0
        """Polls at which a due periodic round waited for the gate."""
        self._gate_waiting = False
        self.feed_may_start = asyncio.Event()
        """Set once the probe has decided, at the API's first readiness, whether the baseline holds the feed
        (`feed_open` is cleared before it is set when it does), and whenever the probe stops or fails: the feed
        sends its first request only then (`Feeder(start=...)`). Without it the feed's first requests went out in
        the seconds before the probe's first readiness poll had cleared `feed_open`, and a one-engine serve moved
        past the version its held baseline was pinned to."""

    async def run(self, stop: asyncio.Event) -> None:
        try:
            async with self.session() as session:
                while not stop.is_set():
                    version = await self.served_version(session)
                    if version is not None:
                        if self.one_engine is None:
                            self.one_engine = await self.reads_one_engine(session)
                        await self.step(version)
                    # until the first readiness the feed waits for this poll: it comes sooner
                    poll_s = self.plan.poll_s
                    if not self.feed_may_start.is_set():
                        poll_s = min(poll_s, self.plan.start_poll_s)
                    await wait_or_stop(stop, poll_s)
        finally:
            self.feed_open.set()  # a probe that stops (or fails) never leaves the feed held
            self.feed_may_start.set()  # nor waiting for its first decision

    def session(self) -> aiohttp.ClientSession:
        headers = {"Authorization": f"Bearer {self.plan.api_key}"} if self.plan.api_key else {}
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers)

    async def step(self, version: int) -> ProbeRound | None:
        """One poll: a round if one is due at the served `version` (its summary, published), else None."""
        if not self.one_engine:
            self.feed_may_start.set()  # no baseline holds the feed here: it need not wait for the cache's read
        if not self.resumed:
            await self.start(version)
        if self.baseline is None:
            return await self.baseline_round(version)
        self.feed_may_start.set()  # the baseline is had (an earlier run's files, the cache): nothing holds the feed
        if not self.due(version) or not self.affordable(len(self.round_items)):
            return None
        if self.gate_open is not None and not self.gate_open.is_set():
            if not self._gate_waiting:  # logged once per wait
                log.info("probe: a periodic round at v%d waits while the gate judges", version)
            self.gate_waits += 1
            self._gate_waiting = True
            return None
        self._gate_waiting = False
        return await self.round(version, "periodic")

    async def start(self, version: int) -> None:
        """At the first readiness: the run's clock starts; the baseline comes from an earlier run's files (a
        restarted feed), else from the warm start's cache (the warm start served: `plan.baseline_version`), else the
        first round makes it."""
        self.resumed = True
        self.run_started = self.last_round_at = self.clock()
        self.resume(version)
        if self.baseline is None and version == self.plan.baseline_version:
            await self.load_cached()

    async def baseline_round(self, version: int) -> ProbeRound | None:
        """The baseline, holding the feed on a one-engine serve until it is had or `MAX_HELD_BASELINES` tries were
        dropped: with no new groups the learner publishes nothing, and the one engine stays on the version pinned."""
        hold = bool(self.one_engine) and self.held_baselines < MAX_HELD_BASELINES
        if hold:
            self.held_baselines += 1
            self.feed_open.clear()
            log.info("probe: baseline at v%d holds the feed (one engine per process: a pin cannot outlive it)", version)
        self.feed_may_start.set()  # decided: held (cleared above) or the feed goes beside the pinned round
        result = None
        try:
            result = await self.round(version, "baseline", held=hold)
            return result
        finally:
            if result is not None or not hold or self.held_baselines >= MAX_HELD_BASELINES:
                self.feed_open.set()  # had, or given up on holding: the feed goes (a dropped held try keeps it)

    async def round(self, version: int, kind: str, held: bool = False) -> ProbeRound | None:
        """Ask this kind's items of the served `version` (the baseline's pinned to it), summarise, write, publish;
        None when dropped. `held`: a baseline holding the feed, bounded by `plan.baseline_hold_s`."""
        items = self.round_items if kind == "periodic" else self.items
        started, t0 = time.time(), self.clock()
        holds = kind == "periodic" and self.plan.holds_feed
        if holds:
            self.feed_open.clear()
        try:
            if held and self.plan.baseline_hold_s > 0:
                records = await self.ask_within(self.baseline_order(), version, t0 + self.plan.baseline_hold_s)
            else:
                records = await self.run_items(items, version if kind == "baseline" else None)
        finally:
            if holds:  # a held baseline is released by `baseline_round`
                self.feed_open.set()
        seconds = self.clock() - t0
        if kind != "final":
            self.probe_s += seconds
            self.last_round_at = self.clock()
        self.item_s = seconds / max(len(items), 1)
        failed = sum(r.error is not None for r in records)
        if failed > len(records) * self.plan.max_failed_share:
            log.warning("probe %s round at v%d dropped: %d of %d requests failed", kind, version, failed, len(records))
            return None  # not due-marked: the next poll tries again
        result = self.summarise(records, version, kind, started)
        if kind == "baseline":
            await self.keep_baseline(result, records, seconds)
        await self.record(result, records)
        return result

    def baseline_order(self) -> list[EvalItem]:
        """Every item, those periodic rounds ask again first: a baseline cut at its bound still pairs with them."""
        again = {(i.suite, i.item_id) for i in self.round_items}
        return [i for i in self.items if (i.suite, i.item_id) in again] + [
            i for i in self.items if (i.suite, i.item_id) not in again
        ]

    async def ask_within(self, items: list[EvalItem], pin: int, deadline: float) -> list[ItemRecord]:
        """`items` pinned to `pin`, chunk by chunk until `deadline` (by `clock`): the records of the chunks asked."""
        step = max(1, BASELINE_CHUNK_ROUNDS * self.plan.eval.concurrency)
        records: list[ItemRecord] = []
        for start in range(0, len(items), step):
            if records and self.clock() >= deadline:
                log.warning(
                    "probe: the baseline at v%d reached its hold bound (%.0f s) after %d of %d items: the feed goes, "
                    "and later rounds pair with it on those",
                    pin,
                    self.plan.baseline_hold_s,
                    len(records),
                    len(items),
                )
                break
            records += await self.run_items(items[start : start + step], pin)
        return records

    def summarise(self, records: list[ItemRecord], version: int, kind: str, started: float) -> ProbeRound:
        result = summarise_round(
            records, self.baseline, self.baseline_version, started, self.plan.eval.mode, version, kind=kind
        )
        result.probe_s, result.run_s = self.probe_s, self.clock() - self.run_started
        return result

    async def record(self, result: ProbeRound, records: list[ItemRecord]) -> None:
        self.files.write(result, records)
        if result.kind == "baseline":
            self.baseline, self.baseline_version = records, result.version
        self.last_version = max(result.version_max, self.last_version or 0)
        self.last_round = result
        self.rounds += 1
        self._deferring = False
        await self.publish(result.to_json())
        log_round(result)

    async def keep_baseline(self, result: ProbeRound, records: list[ItemRecord], seconds: float) -> None:
        """Cache a baseline that is the warm start alone (every item answered by its version, none failed)."""
        warm = self.plan.baseline_version
        cut = len(records) < len(self.items)  # cut at its hold bound: not the warm start's whole evaluation
        if (
            self.cache_of is None
            or cut
            or result.failed_requests
            or (result.version_min, result.version_max) != (warm, warm)
        ):
            if result.version_min != result.version_max:
                log.warning("probe baseline spans v%d–v%d", result.version_min, result.version_max)
            return
        try:
            cache = await asyncio.to_thread(self.cache_of)
            if cache is not None:
                path = await asyncio.to_thread(cache.store, records, seconds)
                log.info("probe: the warm start's evaluation cached at %s", path)
        except OSError as exc:
            log.warning("probe: baseline not cached: %s", exc)

    async def load_cached(self) -> None:
        """The baseline from the warm start's cached evaluation, when there is one."""
        if self.cache_of is None:
            return
        try:
            cache = await asyncio.to_thread(self.cache_of)
        except (OSError, ImportError, ValueError) as exc:
            log.warning("probe: the baseline cache cannot be read: %s", exc)
            return
        hit = cache.load() if cache is not None else None
        if hit is None:
            return
        self.item_s = hit.seconds / max(len(hit.records), 1)
        version = self.plan.baseline_version
        records = [replace(r, policy_version=version) for r in hit.records]  # answered by this run's number for it
        result = self.summarise(records, version, "baseline", time.time())
        result.cached, result.seconds = True, 0.0
        log.info(
            "probe: baseline v%d (the warm start) read from the cache %s (it took %.0f s when it ran)",
            version,
            cache.path,
            hit.seconds,
        )
        await self.record(result, hit.records)

    def due(self, version: int) -> bool:
        """A periodic round is due when the served version is new and either cadence says so."""
        if self.last_version is not None and version <= self.last_version:
            return False
        by_versions = self.plan.every_versions > 0 and (
            self.last_version is None or version >= self.last_version + self.plan.every_versions
        )
        by_time = self.plan.every_s > 0 and self.clock() - self.last_round_at >= self.plan.every_s
        return by_versions or by_time

    def estimate_s(self, n_items: int) -> float:
        return n_items * (self.item_s if self.item_s is not None else self.plan.item_seconds)

    def affordable(self, n_items: int) -> bool:
        """Whether a round of `n_items` keeps the probe within `budget_share` of the run's serving seconds."""
        if self.plan.budget_share <= 0:
            return True
        est = self.estimate_s(n_items)
        run_s = self.clock() - self.run_started
        if self.probe_s + est <= self.plan.budget_share * (run_s + est):
            return True
        if not self._deferring:
            self._deferring, self.deferred = True, self.deferred + 1
            log.info(
                "probe: a round (≈ %.0f s) waits: the probe has taken %.0f s of %.0f s serving, the budget is %.0f%%",
                est,
                self.probe_s,
                run_s,
                100 * self.plan.budget_share,
            )
        return False

    def judged(self, version: int) -> bool:
        """The last round asked every item of `version` alone (a baseline or final round on it)."""
        last = self.last_round
        return (
            last is not None and last.kind in ("baseline", "final") and last.version_min == last.version_max == version
        )

    async def final_round(self) -> ProbeRound | None:
        """Every item on the last served version, once training has stopped (the caller bounds it in time);
        None when there is nothing to judge (no baseline, no served version, or the last round judged it)."""
        if self.baseline is None:
            log.info("probe: no final round (no baseline)")
            return None
        async with self.session() as session:
            version = await self.served_version(session)
        if version is None or self.judged(version):
            log.info("probe: no final round (%s)", "API not ready" if version is None else f"v{version} judged")
            return None
        log.info(
            "probe: final round on v%d (%d items, ≈ %.0f s)", version, len(self.items), self.estimate_s(len(self.items))
        )
        return await self.round(version, "final")

    def resume(self, served: int) -> None:
        """At the first readiness: a feed restarted mid-run (the served version is at or past its last round's)
        picks up its baseline and schedule from the round files; files of an earlier run are moved aside."""
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

    async def reads_one_engine(self, session: aiohttp.ClientSession) -> bool | None:
        """`/v1/versions`' `one_engine` (False when it does not say; None when it cannot be read: asked again)."""
        try:
            async with session.get(self.plan.url.rstrip("/") + "/v1/versions") as resp:
                if resp.status != 200:
                    return False
                return bool((await resp.json(content_type=None)).get("one_engine", False))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, ConnectionError):
            return None

    async def served_version(self, session: aiohttp.ClientSession) -> int | None:
        try:
            async with session.get(self.plan.url.rstrip("/") + "/readyz") as resp:
                if resp.status != 200:
                    return None
                return (await resp.json(content_type=None)).get("policy_version")
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, ConnectionError):
            return None


def log_round(result: ProbeRound) -> None:
    head, diff = result.headline, result.vs_v0.get(result.headline_suite, {})
    log.info(
        "probe %s v%d%s: %s success %.3f [%.3f, %.3f] (n=%d), vs v%d %+.3f [%+.3f, %+.3f]; %.0fs; "
        "probe %.0f s of %.0f s",
        result.kind,
        result.version,
        " (cached)" if result.cached else "",
        result.headline_suite,
        head.get("success", 0.0),
        head.get("ci_low", 0.0),
        head.get("ci_high", 0.0),
        head.get("n", 0),
        result.baseline_version,
        diff.get("diff", 0.0),
        diff.get("ci_low", 0.0),
        diff.get("ci_high", 0.0),
        result.seconds,
        result.probe_s,
        result.run_s,
    )


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
