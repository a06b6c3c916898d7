"""The scored-success guard of the promoted version (docs/design.md#versions), run by the gate at each of its looks.

The workers score every recorded trajectory and write its `success` with the version that sampled it to
`stats:rewards` (`RewardStats`). `ScoredSuccess` reads that stream as it grows and keeps, per version, the success of
its latest `ops.success_rollback_window` scored trajectories — in memory, so a version's window outlives the stream's
trimming (≈2000 rows of all versions) while the gate runs. `SuccessGuard.check` compares the promoted version's
window with the previous promoted version's (the one a rollback would bring back) by `success_rule.success_drop`;
past the bound it asks serve for an automatic rollback of that version (`POST /admin/promote {"rollback":
SuccessRollback}`, admin token: serve marks it rolled back, so the gate never promotes it again) and records the
decision with its figures (`<data_dir>/gate/rollbacks.jsonl`, the Redis list `<prefix>:gate:rollbacks`). Each
promoted version is rolled back at most once by this guard.

What it sees: the trajectories recorded of each version — the feed's while the version was the candidate, callers'
with the `record` scope while it is promoted or pinned. The two windows may come from different times and task
mixes, which is why the bound (`ops.success_rollback_margin`) is wider than the gate's paired margin.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Callable

from ops.run.gate.journal import append_decision
from ops.run.gate.success_rule import success_drop
from slca.contracts import ContractError, Streams
from slca.contracts.stats import RewardStats
from slca.contracts.versions import Promotion, SuccessRollback, rollback_decisions_key

log = logging.getLogger(__name__)

READ_BATCH = 1000
"""Stream entries per XRANGE while catching up."""


class ScoredSuccess:
    """Per policy version, the success (0/1) of its latest `window` scored trajectories, read from `stats:rewards`
    after the last entry seen (rows without `success`, older than the field, are skipped)."""

    def __init__(self, redis, prefix: str, window: int) -> None:
        self.redis, self.window = redis, window
        self.stream = Streams(prefix).stats(RewardStats.STREAM)
        self.last_id = "-"
        self.windows: dict[int, deque[float]] = {}

    async def refresh(self) -> None:
        while True:
            start = "-" if self.last_id == "-" else f"({self.last_id}"
            entries = await self.redis.xrange(self.stream, min=start, count=READ_BATCH)
            for entry_id, fields in entries:
                self.last_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                try:
                    row = RewardStats.from_fields(fields)
                except ContractError as exc:
                    log.warning("%s %s skipped: %s", self.stream, self.last_id, exc)
                    continue
                if row.success is not None:
                    window = self.windows.setdefault(row.policy_version, deque(maxlen=self.window))
                    window.append(float(row.success))
            if len(entries) < READ_BATCH:
                return

    def of(self, version: int) -> list[float]:
        return list(self.windows.get(version, ()))


class SuccessGuard:
    def __init__(self, ops, scored: ScoredSuccess, admin, gate_dir: Path, redis, prefix: str,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        self.ops, self.scored, self.admin, self.redis, self.clock = ops, scored, admin, redis, clock
        self.path = gate_dir / "rollbacks.jsonl"
        self.key = rollback_decisions_key(Streams(prefix))
        self.judged: set[int] = set()
        """Promoted versions this guard already asked to roll back (once each, whatever serve answered)."""

    async def check(self, versions: dict) -> SuccessRollback | None:
        """The rollback asked for (and recorded) when the promoted version of `versions` (serve's `/v1/versions`)
        dropped past the bound, else None."""
        record = versions.get("record") or {}
        promoted = versions["promoted"]
        if "promoted" not in record or promoted in self.judged or self.ops.success_rollback_margin >= 1.0:
            return None
        state = Promotion(promoted=promoted, history=record.get("history", []),
                          rolled_back=record.get("rolled_back", []))  # fmt: skip
        previous = state.rollback_target()
        if previous is None:
            return None
        await self.scored.refresh()
        verdict = success_drop(self.scored.of(promoted), self.scored.of(previous), self.ops.success_rollback_margin,
                               self.ops.success_rollback_min)  # fmt: skip
        if not verdict.rollback:
            return None
        decision = SuccessRollback(
            version=promoted, previous=previous, why=verdict.why, n=verdict.n, previous_n=verdict.previous_n,
            success=verdict.success, previous_success=verdict.previous_success, diff=verdict.diff,
            ci_high=verdict.ci_high, margin=self.ops.success_rollback_margin, at=self.clock(),
        )  # fmt: skip
        log.error("gate: the promoted v%s lost success on scored traffic (%s): rolling back", promoted, verdict.why)
        status, body = await self.admin.send({"rollback": decision.model_dump(mode="json")})
        self.judged.add(promoted)  # after serve answered: one it could not be asked is asked again at the next look
        if status != 200:
            why = (body.get("error") or {}).get("message") if isinstance(body, dict) else body
            decision = decision.model_copy(update={"outcome": "refused", "why": f"{decision.why}; serve: {why}"})
        await append_decision(self.path, self.redis, self.key, decision)
        return decision
