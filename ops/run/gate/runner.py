"""The gate's loop: when a candidate is due, judge it on the gate set against the promoted version and tell serve.

- Due: the candidate is newer than the promoted version and than the last candidate judged, never rolled back,
  and `ops.gate_every_versions` past the last one judged or `ops.gate_every_minutes` after the last decision.
- Judging: the gate set (`sim.tasks.gate`, `ops.gate_items` tasks) through serve's agent API, greedy, pinned to the
  candidate (`X-SLCA-Pin-Version`; on the candidate replica with `ops.candidate_replica`); the promoted version's
  outcomes on the same items come from the cache `<data_dir>/gate/items/v<N>.jsonl` (judged once per version: after
  a promotion the candidate's own records are the new promoted version's; the warm start's are kept across runs:
  ops/run/gate/warm_records.py). The rule: `ops.run.gate.rule.decide`.
- Recording: every decision is a `GateDecision`, appended to `<data_dir>/gate/decisions.jsonl` and to the Redis
  list `<prefix>:gate:decisions` (bounded; `slca status` reads it) and sent to serve (`POST /admin/promote`), which
  counts it in /metrics and promotes the candidate when the outcome is `promote`.
- Holding the feed: while it judges, the gate sets `<prefix>:gate:feed-hold` (expiring after `ops.gate_hold_s`,
  renewed when the candidate's part begins) and deletes it when the judging ends, also on an error or a stop; the
  training feed sends nothing while it is set (`ops.gate_holds_feed`; ops/run/feed/gate_hold.py).
- Budget: a due decision waits while the gate's judging seconds with its estimate would pass `ops.gate_budget_share`
  of the seconds since the gate's first look at a ready serve (`affordable`; the estimate: items × the seconds per
  item measured so far, `ops.gate_item_seconds` before, for each version not cached).
- Guarding: before judging, each look (with Redis) checks the promoted version's success on scored traffic against
  the previous promoted version's (`success_guard.SuccessGuard`) and asks serve to roll it back past the bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp
from redis.exceptions import RedisError

from ops.experiments.eval.suite import EvalItem, EvalPlan, ItemRecord, read_jsonl, write_jsonl
from ops.run.gate.journal import append_decision
from ops.run.gate.rule import decide
from ops.run.gate.success_guard import ScoredSuccess, SuccessGuard
from ops.run.gate.warm_records import WarmStartRecords
from ops.run.stopping import until_stopped, wait_or_stop
from slca.contracts.versions import PIN_HEADER, GateDecision, gate_decisions_key, gate_feed_hold_key

log = logging.getLogger(__name__)

GATE_SUITE = "gate"

Evaluate = Callable[[int, list[EvalItem]], Awaitable[list[ItemRecord]]]
"""(version, items) → one record per item, the version pinned."""


def gate_items(pack: str, n: int) -> list[EvalItem]:
    from sim.tasks.gate import gate_tasks

    return [EvalItem(GATE_SUITE, t.task_id, task=t) for t in gate_tasks(pack, n)]


class ServeAdmin:
    """The two calls the gate makes to serve: its versions, and a decision. `candidate_url`: a replica of role
    "candidate" (`ops.candidate_replica`), whose candidate is the one to judge; the promoted version, the record
    and every decision are the main replica's (`url`)."""

    def __init__(self, url: str, admin_token: str | None, candidate_url: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.candidate_url = candidate_url.rstrip("/") if candidate_url else None
        self.headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else {}

    async def versions(self) -> dict:
        async with aiohttp.ClientSession(headers=self.headers) as http:
            body = await self._versions(http, self.url)
            if self.candidate_url is not None:
                body["candidate"] = (await self._versions(http, self.candidate_url))["candidate"]
            return body

    @staticmethod
    async def _versions(http: aiohttp.ClientSession, url: str) -> dict:
        async with http.get(f"{url}/v1/versions", timeout=aiohttp.ClientTimeout(total=30)) as r:
            r.raise_for_status()
            return await r.json()

    async def hold(self, seconds: float) -> int | None:
        """Hold the candidate's engine (the candidate replica's, else the main one's) at the version it serves now,
        for `seconds` at most (serve/version_hold.py): that version, or None when the server has no hold (a serve of
        before it: the candidate may then move while it is judged, as before)."""
        url = self.candidate_url or self.url
        async with aiohttp.ClientSession(headers=self.headers) as http:
            async with http.post(f"{url}/admin/hold", json={"version": None, "seconds": seconds},
                                 timeout=aiohttp.ClientTimeout(total=120)) as r:  # fmt: skip
                if r.status in (404, 405):
                    return None
                r.raise_for_status()
                return int((await r.json())["held"])

    async def release(self) -> None:
        url = self.candidate_url or self.url
        async with aiohttp.ClientSession(headers=self.headers) as http:
            async with http.delete(f"{url}/admin/hold", timeout=aiohttp.ClientTimeout(total=30)) as r:
                if r.status not in (200, 404, 405):
                    log.warning("gate: releasing the candidate's hold answered %s", r.status)

    async def send(self, body: dict) -> tuple[int, dict]:
        async with aiohttp.ClientSession(headers=self.headers) as http:
            async with http.post(f"{self.url}/admin/promote", json=body, timeout=aiohttp.ClientTimeout(total=600)) as r:
                return r.status, await r.json(content_type=None)


def pinned_evaluator(url: str, api_key: str | None, plan: EvalPlan) -> Evaluate:
    """Items through serve's API, each request pinned to the version judged."""
    from ops.experiments.eval.suite import run_items

    async def evaluate(version: int, items: list[EvalItem]) -> list[ItemRecord]:
        return await run_items(url.rstrip("/"), api_key, items, plan, headers={PIN_HEADER: str(version)})

    return evaluate


class Gate:
    def __init__(self, ops, items: list[EvalItem], evaluate: Evaluate, admin: ServeAdmin, data_dir: Path, redis=None,
                 prefix: str = "slca", clock: Callable[[], float] = time.time,
                 evaluate_candidate: Evaluate | None = None, warm: WarmStartRecords | None = None) -> None:  # fmt: skip
        self.ops, self.items, self.evaluate, self.admin = ops, items, evaluate, admin
        self.evaluate_candidate = evaluate_candidate or evaluate
        """Where the candidate is judged: the candidate replica with `ops.candidate_replica`, else `evaluate`."""
        self.dir = data_dir / "gate"
        self.redis, self.key = redis, gate_decisions_key_of(prefix)
        self.feed_hold_key = gate_feed_hold_key_of(prefix)
        self.clock = clock
        self.last_judged: int | None = None
        self.last_at = clock()
        self.first_look_at: float | None = None
        """When serve first answered the gate's look (the budget's clock starts there)."""
        self.spent_s = 0.0
        """Seconds the gate's evaluations took (the budget's numerator)."""
        self.item_s = getattr(ops, "gate_item_seconds", 1.6)
        """Seconds per item per version judged: measured by the last evaluation, the setting before."""
        self.waiting_for: int | None = None
        """The candidate a due decision began to wait for the budget with (logged once per wait)."""
        self.warm = warm
        """The warm start's records across runs (`ops.gate_cache_warm_start`): read at the first look, kept after."""
        self.guard = None if redis is None else SuccessGuard(
            ops, ScoredSuccess(redis, prefix, ops.success_rollback_window), admin, self.dir, redis, prefix, clock
        )  # fmt: skip

    def due(self, versions: dict) -> bool:
        candidate, promoted = versions["candidate"], versions["promoted"]
        rolled_back = set((versions.get("record") or {}).get("rolled_back", []))
        if candidate <= promoted or candidate in rolled_back:
            return False
        if self.last_judged is not None and candidate <= self.last_judged:
            return False
        since = candidate - (self.last_judged if self.last_judged is not None else promoted)
        minutes = (self.clock() - self.last_at) / 60
        return since >= self.ops.gate_every_versions or minutes >= self.ops.gate_every_minutes

    async def outcomes(self, version: int, evaluate: Evaluate | None = None) -> tuple[list[ItemRecord], float]:
        """The version's records on the gate items (cached per version) and the seconds spent judging them now
        (through `evaluate`, else the promoted version's `self.evaluate`)."""
        cache = self.dir / "items" / f"v{version}.jsonl"
        if cache.is_file():
            records = read_jsonl(cache)
            if {r.item_id for r in records} >= {i.item_id for i in self.items}:
                return records, 0.0
        started = self.clock()
        records = await (evaluate or self.evaluate)(version, self.items)
        seconds = max(0.0, self.clock() - started)
        self.spent_s += seconds
        self.item_s = seconds / max(1, len(self.items))
        if any(r.error for r in records):
            return records, seconds  # not cached: a failed request is not the version's outcome
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(records, cache)
        if self.warm is not None:
            await self.warm.keep(version, records, seconds)
        return records, seconds

    async def judge(self, candidate: int, promoted: int) -> GateDecision:
        """The candidate against the promoted version on the gate items. The promoted version's outcomes first
        (cached per version); then the candidate's engine is held at the version it serves (it may be newer than
        `candidate`, read at the look: that one is judged) so that no swap refuses the pinned runs midway — with one
        engine per process a pin of a version the engine moved past is a 409 (a 60-minute run lost its only decision
        so: "96 gate requests failed") — and released at once after. The training feed is held for the whole of it
        (`ops.gate_holds_feed`: `hold_feed`), released when it ends, however it ends."""
        try:
            await self.hold_feed(candidate, promoted)
            base, base_s = await self.outcomes(promoted)
            held = await self.admin.hold(self.ops.gate_hold_s)
            try:
                if held is not None and held > candidate:
                    candidate = held
                await self.hold_feed(candidate, promoted)  # renewed: each part may take up to `gate_hold_s`
                new, new_s = await self.outcomes(candidate, self.evaluate_candidate)
            finally:
                if held is not None:
                    await self.admin.release()
        finally:
            await self.release_feed()
        errors = sum(1 for r in [*base, *new] if r.error)
        common = {"candidate": candidate, "promoted": promoted, "margin": self.ops.gate_margin,
                  "require_better": self.ops.gate_require_better, "seconds": base_s + new_s, "at": self.clock(),
                  "items_file": f"items/v{candidate}.jsonl"}  # fmt: skip
        if errors:
            return GateDecision(outcome="skip", why=f"{errors} gate requests failed", **common)
        verdict = decide(base, new, self.ops.gate_margin, self.ops.gate_require_better)
        f = verdict.figures
        return GateDecision(
            outcome=verdict.outcome, why=verdict.why, n=f["n"], candidate_success=f["b"], promoted_success=f["a"],
            diff=f["diff"], ci_low=f["ci_low"], ci_high=f["ci_high"], candidate_only=f["b_only"],
            promoted_only=f["a_only"], mcnemar_p=f["mcnemar_p"], **common,
        )  # fmt: skip

    def holds_feed(self) -> bool:
        return self.redis is not None and getattr(self.ops, "gate_holds_feed", True)

    async def hold_feed(self, candidate: int, promoted: int) -> None:
        """Set the feed's hold key for `ops.gate_hold_s` (its expiry: a gate that dies never leaves the feed held).
        A Redis error is logged and the judging goes on, the feed unheld."""
        if not self.holds_feed():
            return
        value = json.dumps({"candidate": candidate, "promoted": promoted, "at": self.clock()})
        try:
            await self.redis.set(self.feed_hold_key, value, px=max(1, int(1000 * self.ops.gate_hold_s)))
        except (RedisError, OSError) as exc:
            log.warning("gate: cannot hold the feed while judging (%s); it goes on", exc)

    async def release_feed(self) -> None:
        if not self.holds_feed():
            return
        try:
            await self.redis.delete(self.feed_hold_key)
        except (RedisError, OSError) as exc:
            log.warning("gate: cannot release the feed's hold (%s); it expires within %.0f s", exc,
                        self.ops.gate_hold_s)  # fmt: skip

    async def step(self) -> GateDecision | None:
        """One look at serve; a decision when a candidate was due."""
        versions = await self.admin.versions()
        if self.first_look_at is None:
            self.first_look_at = self.clock()
            await self.seed_warm_start()
        if self.guard is not None and await self.guard.check(versions) is not None:
            return None  # the roles just changed: judge a candidate against the new promoted version at the next look
        if not self.due(versions):
            return None
        candidate, promoted = versions["candidate"], versions["promoted"]
        if not self.affordable(promoted):
            if self.waiting_for is None:  # once per wait, not once per candidate published meanwhile
                self.waiting_for = candidate
                log.info("gate: v%s is due and waits: the gate has judged %.0f s of %.0f s serving, ≈ %.0f s more "
                         "would pass ops.gate_budget_share %.0f%%", candidate, self.spent_s, self.serving_s(),
                         self.estimate_s(promoted), 100 * self.ops.gate_budget_share)  # fmt: skip
            return None
        log.info(
            "gate: judging candidate v%s against the promoted v%s on %d items", candidate, promoted, len(self.items)
        )
        self.waiting_for = None
        decision = await self.judge(candidate, promoted)
        status, body = await self.admin.send({"decision": decision.model_dump(mode="json")})
        if decision.outcome == "promote" and status != 200:
            why = (body.get("error") or {}).get("message") if isinstance(body, dict) else body
            decision = decision.model_copy(update={"outcome": "skip", "why": f"serve refused the promotion: {why}"})
        self.last_judged, self.last_at = decision.candidate, self.clock()  # the one judged: maybe newer (held)
        await self.record(decision)
        log.info("gate: v%s %s (%s)", decision.candidate, decision.outcome, decision.why)
        return decision

    async def seed_warm_start(self) -> None:
        """The warm start's records from an earlier run, as this run's for its version (its first decision then
        judges only the candidate); their seconds per item become the budget's estimate until the gate measures."""
        if self.warm is None:
            return
        item_s = await self.warm.seed(self.items, self.dir / "items" / f"v{self.warm.version}.jsonl")
        if item_s is not None:
            self.item_s = item_s

    def serving_s(self) -> float:
        return 0.0 if self.first_look_at is None else self.clock() - self.first_look_at

    def estimate_s(self, promoted: int) -> float:
        """Seconds a decision against `promoted` would take: each version to evaluate (the promoted one unless its
        records are cached, and the candidate) × items × seconds per item."""
        versions = 1 + (not (self.dir / "items" / f"v{promoted}.jsonl").is_file())
        return versions * len(self.items) * self.item_s

    def affordable(self, promoted: int) -> bool:
        share = getattr(self.ops, "gate_budget_share", 0.0)
        if share <= 0:
            return True
        return self.spent_s + self.estimate_s(promoted) <= share * self.serving_s()

    async def record(self, decision: GateDecision) -> None:
        await append_decision(self.dir / "decisions.jsonl", self.redis, self.key, decision)

    async def run(self, stop: asyncio.Event) -> None:
        """Steps every `ops.gate_poll_s` until `stop`; a stop abandons a judging in flight (nothing of it is kept:
        outcomes are cached and decisions recorded only once complete), so the gate leaves within a second."""
        while not stop.is_set():
            try:
                await until_stopped(self.step(), stop)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning("gate: serve not reachable (%s); trying again", exc)
            await wait_or_stop(stop, self.ops.gate_poll_s)


def gate_decisions_key_of(prefix: str) -> str:
    from slca.contracts import Streams

    return gate_decisions_key(Streams(prefix))


def gate_feed_hold_key_of(prefix: str) -> str:
    from slca.contracts import Streams

    return gate_feed_hold_key(Streams(prefix))


__all__ = ["Gate", "ServeAdmin", "gate_items", "pinned_evaluator"]
