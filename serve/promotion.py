"""The promoted version of this replica, kept across restarts and shared by every replica (docs/design.md#versions).

`PromotionController` owns the `Promotion` record: it is read at start (Redis key `<prefix>:promotion`, else
`<data_dir>/promotion.json`; neither: the version served at start, v0), written on every change to both (atomic
file), and polled from Redis every `serve.promotion_poll_s` (another replica, `slca promote` through another
replica). A change goes through the router (`serve.versions.VersionRouter.promote`) first: a version this server
cannot find or verify raises there (404/422) and nothing changes. The versions callers get or may roll back to are
hard-linked aside (`VersionStore.keep`) so the learner's pruning cannot remove them.

The live-signal guard (serve/live_signals.py) watches callers' requests of the promoted version; past its bounds
the version is rolled back (`auto-rollback`) to the last earlier one not rolled back, and marked so the gate never
promotes it again. The gate's scored-success guard (ops/run/gate/success_guard.py) asks for the same rollback
through `POST /admin/promote` when the promoted version's success on scored traffic dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

from redis.exceptions import RedisError

from serve.errors import ServeError
from serve.live_signals import LiveSignals, Outcome
from serve.version_store import VersionStore
from serve.versions import Route, VersionRouter
from slca.contracts import ContractError
from slca.contracts.versions import GateDecision, Promotion, PromotionReason
from slca.contracts.wire import validate

log = logging.getLogger(__name__)

RECORD_FILE = "promotion.json"


class NothingToRollBack(ServeError):
    status = 409
    code = "no_rollback_target"


class PromotedChanged(ServeError):
    """A rollback judged on one promoted version arrived after another was promoted: refused, nothing changes."""

    status = 409
    code = "promoted_changed"


class RolledBackBefore(ServeError):
    """The gate asked to promote a version an operator or the guard rolled back: refused (never automatically)."""

    status = 409
    code = "version_rolled_back"


class PromotionRecord:
    """The `Promotion` in Redis and in a file beside the data; Redis wins when both exist."""

    def __init__(self, redis, key: str, path: Path) -> None:
        self.redis, self.key, self.path = redis, key, path

    async def load(self) -> Promotion | None:
        try:
            raw = await self.redis.get(self.key)
        except (RedisError, OSError) as exc:
            log.warning("cannot read %s (%s): reading %s", self.key, exc, self.path)
            raw = None
        if raw is None and self.path.is_file():
            raw = self.path.read_text()
        if raw is None:
            return None
        try:
            return validate(Promotion, json.loads(raw))
        except (ContractError, ValueError) as exc:
            log.error("the promotion record is unreadable (%s); starting from the served version", exc)
            return None

    async def save(self, promotion: Promotion) -> None:
        text = promotion.model_dump_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)
        try:
            await self.redis.set(self.key, text)
        except (RedisError, OSError) as exc:
            log.error("the promotion v%s is only in %s: Redis refused it (%s)", promotion.promoted, self.path, exc)


class PromotionController:
    def __init__(self, router: VersionRouter, record: PromotionRecord, store: VersionStore, metrics, settings):
        self.router, self.record, self.store = router, record, store
        self.metrics, self.settings = metrics, settings
        self.state = Promotion(promoted=router.promoted, reason="start", at=time.time())
        self.signals = LiveSignals(settings)
        self._lock = asyncio.Lock()
        self._guard: asyncio.Task | None = None
        self._unrollable: set[int] = set()
        """Promoted versions whose automatic rollback failed: not tried again on every later request (which logged
        two errors per request in the soak of 2026-12-06); a new promotion or an operator's rollback clears it."""
        router.on_finish = self.observe

    async def start(self) -> None:
        """Promote what the record says (a restart keeps the promoted version), or record the version served."""
        found = await self.record.load()
        if found is None:
            await self.record.save(self.state)
            return
        try:
            await self.router.promote(found.promoted)
        except ServeError as exc:
            log.error("the recorded promoted v%s cannot be served (%s): callers get v%s", found.promoted, exc, 0)
            return
        self.state = found
        self._keep()

    async def promote(self, version: int, reason: PromotionReason) -> Promotion:
        async with self._lock:
            if reason == "gate" and version in self.state.rolled_back:
                raise RolledBackBefore(f"v{version} was rolled back before: the gate never promotes it again")
            await self.router.promote(version)  # raises (404/422) before anything changes
            return await self._apply(self.state.promote(version, reason, time.time()))

    async def roll_back(self, reason: PromotionReason, judged: int | None = None) -> Promotion:
        """Back to the last earlier promoted version; `judged`: only while it is still the promoted one (a verdict on
        v5 must not roll back the v6 an operator promoted since)."""
        async with self._lock:
            if judged is not None and judged != self.state.promoted:
                raise PromotedChanged(f"v{judged} is no longer the promoted version (v{self.state.promoted} is)")
            try:
                after = self.state.roll_back(reason, time.time())
            except ValueError as exc:
                raise NothingToRollBack(str(exc)) from None
            await self.router.promote(after.promoted)
            log.warning("rolled back v%s → v%s (%s)", self.state.promoted, after.promoted, reason)
            return await self._apply(after)

    async def _apply(self, after: Promotion) -> Promotion:
        self.state = after
        self._unrollable.clear()
        await self.record.save(after)
        self.metrics.promotions.labels(reason=after.reason).inc()
        self._keep()
        return after

    def _keep(self) -> None:
        kept = {self.state.promoted, *self.state.history[-(self.settings.keep_promoted - 1) :]}
        held = set(self.router.loaded_versions().values())
        try:
            self.store.keep(kept if self.settings.keep_promoted > 1 else {self.state.promoted}, held)
        except OSError as exc:
            log.warning("could not keep the promoted versions' files: %s", exc)

    def record_decision(self, decision: GateDecision) -> None:
        self.metrics.gate_decisions.labels(outcome=decision.outcome).inc()
        if decision.diff is not None:
            self.metrics.gate_last_diff.set(decision.diff)

    # --- following the record, guarding the promoted version -----------------------------------------------------
    async def follow(self) -> None:
        """Apply the record another replica (or `slca promote` through one) wrote; forever, every poll period."""
        while True:
            await asyncio.sleep(self.settings.promotion_poll_s)
            try:
                await self.follow_once()
            except ServeError as exc:
                log.error("cannot follow the promotion record: %s", exc)
            except (RedisError, OSError) as exc:
                log.warning("reading the promotion record failed: %s", exc)

    async def follow_once(self) -> None:
        """One poll. The record is read again under the lock before it is applied: read outside it, it could be
        older than this replica's own promotion or rollback that finished meanwhile, and applying it undid that one
        (a rollback right after a promotion then found nothing to roll back: 409 in CI under load)."""
        if not self._differs(await self.record.load()):
            return
        async with self._lock:
            found = await self.record.load()
            if self._differs(found):
                await self.router.promote(found.promoted)
                self.state = found
                self._keep()

    def _differs(self, found: Promotion | None) -> bool:
        return found is not None and (found.promoted, found.at) != (self.state.promoted, self.state.at)

    def observe(self, route: Route) -> None:
        """A request ended (the router's `on_finish`): callers' requests of the promoted version feed the guard."""
        if route.kind != "caller" or route.slot is None or route.version != self.state.promoted:
            return
        version = self.state.promoted
        self.signals.observe(version, Outcome(route.engine_errors > 0, route.tool_calls, route.malformed))
        if self._guard is not None or version in self._unrollable:
            return
        why = self.signals.verdict(version, self.state.rollback_target())
        if why and self.state.history:
            self._guard = asyncio.get_running_loop().create_task(self._auto_roll_back(version, why))

    async def _auto_roll_back(self, version: int, why: str) -> None:
        try:
            if self.state.promoted == version:
                log.error("the promoted v%s degraded (%s): rolling back", version, why)
                await self.roll_back("auto-rollback")
        except ServeError as exc:
            self._unrollable.add(version)
            log.error(
                "automatic rollback of v%s failed: %s (not tried again while v%s is promoted)", version, exc, version
            )
        finally:
            self._guard = None
