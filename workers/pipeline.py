"""What one scoring task does with a batch of trajectories, independent of Celery (tested and benchmarked alone).

Idempotent, keyed by trajectory id: the reward is stored under trajectory id + scorer version and a stored one
wins over a re-computed one; group membership and emission are Lua scripts a second delivery cannot double.
Round trips are what costs on a busy host, so a batch takes two: one pipeline of atomic adds (reward, dashboard
stats, bucket) for all members, then the emission of the groups they completed. With a non-deterministic judge
(an LLM) a first pipeline skips members already grouped and reuses stored rewards before any judge call.
Crash safety: the bucket keeps each member's trajectory and reward until its group is written, so a crash at
any point leaves work that a redelivery (or the assembler's sweep) finishes.

The input is entry ids of `slca:trajectories` (what a Celery task carries): the trajectories are read from the
stream by id, in one round trip. An entry is deleted once its trajectory is in a written group or in a dead
letter, so the stream holds only trajectories still on their way, and an id whose entry is gone was finished
by an earlier delivery ('gone').
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import redis

from slca.contracts import ContractError, Reward, Streams, Trajectory
from slca.contracts.queues import PAYLOAD_FIELD, STATS_REWARDS
from slca.contracts.stats import RewardStats
from slca.contracts.wire import load_msgpack
from workers.deadletter import DeadLetters, reason_kind
from workers.groups import GroupAssembler
from workers.keys import Keys
from workers.luascripts import ScriptBatch
from workers.metrics import OBSERVED_COMPONENTS, WorkerMetrics
from workers.scoring import ScoringError, score_trajectory
from workers.settings import WorkerSettings


POISON_ERRORS = (ScoringError, ValueError, TypeError, KeyError, IndexError, AttributeError)
"""Errors that retrying cannot fix (a trajectory the scorer chokes on). Transient ones are not among them."""


@functools.lru_cache(maxsize=1)
def process_metrics() -> WorkerMetrics:
    """One set of metrics per process (the default registry refuses duplicates)."""
    return WorkerMetrics.create()


@dataclass
class Scored:
    traj: Trajectory
    payload: bytes
    reward: Reward
    stream_entry: str
    """Its entry id in `slca:trajectories` (deleted once the trajectory is grouped or dead-lettered)."""


class ScoringPipeline:
    def __init__(
        self, client: redis.Redis, settings: WorkerSettings, prefix: str = "slca", metrics: WorkerMetrics | None = None
    ):
        self.client = client
        self.settings = settings
        self.keys = Keys(Streams(prefix))
        self.metrics = metrics or process_metrics()
        self.dead = DeadLetters(client, self.keys, settings.key_ttl_s, settings.dead_maxlen)
        self.groups = GroupAssembler(
            client,
            self.keys,
            settings.group_size,
            settings.version_window,
            settings.key_ttl_s,
            settings.max_groups_len,
            settings.late_window_s,
            settings.dead_maxlen,
            settings.trim_stale_group_s,
        )

    def process(self, entry_ids: list[str]) -> list[str]:
        """Score the trajectories of these `slca:trajectories` entries and add them to their groups; returns a
        status per entry ('pending', 'grouped', 'late', 'duplicate', 'dead', 'full', 'gone'). Transient errors
        (Redis, judge) propagate."""
        status: dict[str, str] = {}
        decoded = self._decode(self._read(entry_ids), status)
        stored = self._prefetch(decoded, status) if self.settings.judge != "rule" else {}
        scored = []
        for eid, traj, payload in decoded:
            if eid in status:
                continue
            try:
                scored.append(Scored(traj, payload, stored.get(traj.id) or self._score(traj), eid))
            except POISON_ERRORS as exc:
                # one trajectory the scorer cannot handle must not fail (and dead-letter) its whole batch
                status[eid] = self.dead_letter(traj.id, f"scoring_error: {type(exc).__name__}: {exc}", payload, eid)
        self.emit(self._add_all(scored, status))
        return [status.get(eid, "dead") for eid in entry_ids]

    def _read(self, entry_ids: list[str]) -> list[tuple[str, dict | None]]:
        """(entry id, its fields or None when the entry is gone), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for eid in entry_ids:
            pipe.xrange(self.keys.streams.trajectories, min=eid, max=eid, count=1)
        return [(eid, found[0][1] if found else None) for eid, found in zip(entry_ids, pipe.execute())]

    def _decode(
        self, entries: list[tuple[str, dict | None]], status: dict[str, str]
    ) -> list[tuple[str, Trajectory, bytes]]:
        out = []
        for eid, fields in entries:
            if fields is None:
                status[eid] = "gone"  # grouped or dead-lettered by an earlier delivery: entries leave only then
                continue
            traj_id, payload = (fields.get(b"id") or b"").decode(errors="replace"), fields.get(PAYLOAD_FIELD) or b""
            try:
                traj = load_msgpack(Trajectory, payload)
                if traj.id != traj_id:
                    raise ContractError(f"invalid Trajectory: entry id {traj_id!r} != payload id {traj.id!r}")
            except ContractError as exc:
                status[eid] = self.dead_letter(traj_id or eid, f"invalid_payload: {exc}", payload, eid)
                continue
            out.append((eid, traj, payload))
        return out

    def dead_letter_entries(self, entry_ids: list[str], reason: str) -> None:
        """Dead-letter the trajectories of these entries that are not in a group yet (a task that failed for
        good); entries already gone were finished."""
        for eid, fields in self._read(entry_ids):
            if fields is None:
                continue
            traj_id = (fields.get(b"id") or eid.encode()).decode(errors="replace")
            if not self.client.exists(self.keys.member(traj_id)):
                self.dead_letter(traj_id, reason, fields.get(PAYLOAD_FIELD), eid)

    def _prefetch(self, decoded, status: dict[str, str]) -> dict[str, Reward]:
        """Before calling an expensive judge: skip grouped members, reuse stored rewards (one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for _, traj, _ in decoded:
            pipe.exists(self.keys.member(traj.id))
            pipe.get(self.keys.reward(self.settings.scorer_version, traj.id))
        replies = pipe.execute()
        stored = {}
        for i, (eid, traj, _) in enumerate(decoded):
            if replies[2 * i]:
                status[eid] = "duplicate"
                self.metrics.duplicates.inc()
            elif replies[2 * i + 1] is not None:
                stored[traj.id] = Reward.model_validate_json(replies[2 * i + 1])
        return stored

    def _score(self, traj: Trajectory) -> Reward:
        started = time.perf_counter()
        reward = score_trajectory(traj, self.settings)
        self.metrics.score_seconds.observe(time.perf_counter() - started)
        return reward

    def _add_all(self, scored: list[Scored], status: dict[str, str]) -> list[str]:
        """One pipeline of atomic adds; returns the ids of the groups completed by this batch."""
        if not scored:
            return []
        batch = ScriptBatch(self.client)
        stats_stream = self.keys.streams.stats(STATS_REWARDS)
        for item in scored:
            self.groups.add(
                item.traj,
                item.payload,
                item.reward,
                self.keys.reward(self.settings.scorer_version, item.traj.id),
                stats_stream,
                _stats(item.traj, item.reward),
                self.settings.stats_maxlen,
                batch,
                item.stream_entry,
            )
        completed = []
        for item, reply in zip(scored, batch.execute()):
            added = self.groups.parse_add(reply)
            if added.fresh_reward:
                self._observe(item.reward)
            if added.status == "late":
                self.metrics.late_members.inc()
                late = "late: its group was already emitted as partial"
                status[item.stream_entry] = self.dead_letter(item.traj.id, late, item.payload, item.stream_entry)
                continue
            if added.status == "duplicate":
                self.metrics.duplicates.inc()
            if added.status == "complete":
                completed.append(added.group_id)
                added.status = "grouped"
            status[item.stream_entry] = added.status
        return completed

    def emit(self, group_ids: list[str]) -> list[str]:
        results = self.groups.emit_many(group_ids)
        for result, partial in results:
            if result == "emitted":
                self.metrics.groups_emitted.labels(partial=str(partial).lower()).inc()
        return [r for r, _ in results]

    def _observe(self, reward: Reward) -> None:
        m = self.metrics
        m.scored.inc()
        if reward.components.get("success") == 1.0:
            m.scored_success.inc()
        m.reward_exec.observe(reward.exec)
        m.reward_pref.observe(reward.pref)
        for name in OBSERVED_COMPONENTS:
            if name in reward.components:
                m.reward_component.labels(component=name).observe(reward.components[name])

    def dead_letter(self, entry_id: str, reason: str, payload: bytes | None, stream_entry: str | None = None) -> str:
        """Dead-letter a trajectory (and delete its `stream_entry` from slca:trajectories, when known)."""
        if self.dead.add(entry_id, reason, self.keys.streams.trajectories, payload, stream_entry):
            self.metrics.dead_letters.labels(reason=reason_kind(reason)).inc()
        return "dead"


def _stats(traj: Trajectory, reward: Reward) -> RewardStats:
    """The trajectory's `stats:rewards` record (the add script writes it when the reward is first stored)."""
    return RewardStats(
        exec=reward.exec,
        pref=reward.pref,
        tool_turns=int(reward.components.get("tool_turns", 0)),
        success=reward.components.get("success"),
        policy_version=traj.policy_version,
        task_id=traj.task_id,
        ts=time.time(),
    )
