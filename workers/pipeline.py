"""What one scoring task does with a batch of trajectories, independent of Celery (tested and benchmarked alone).

Idempotent, keyed by trajectory id: the reward is stored under trajectory id + scorer version and a stored one
wins over a re-computed one; group membership and emission are Lua scripts a second delivery cannot double.
Round trips are what costs on a busy host, so a batch takes two: one pipeline of atomic adds (reward, dashboard
stats, bucket) for all members, then the emission of the groups they completed. With a non-deterministic judge
(an LLM) a first pipeline skips members already grouped and reuses stored rewards before any judge call.
Crash safety: the bucket keeps each member's trajectory and reward until its group is written, so a crash at
any point leaves work that a redelivery (or the assembler's sweep) finishes. An item may carry its entry id in
`slca:trajectories` (third element): that entry is deleted once the trajectory is in a written group or in a
dead letter, so the stream holds only trajectories still on their way.
"""

from __future__ import annotations

import base64
import functools
import time
from dataclasses import dataclass

import redis

from slca.contracts import ContractError, Reward, Streams, Trajectory
from slca.contracts.queues import STATS_REWARDS
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


Item = tuple[str, str] | tuple[str, str, str]
"""(trajectory id, base64 msgpack payload[, its entry id in slca:trajectories])"""


@dataclass
class Scored:
    traj: Trajectory
    payload: bytes
    reward: Reward
    stream_entry: str | None = None


class ScoringPipeline:
    def __init__(self, client: redis.Redis, settings: WorkerSettings, prefix: str = "slca",
                 metrics: WorkerMetrics | None = None):  # fmt: skip
        self.client = client
        self.settings = settings
        self.keys = Keys(Streams(prefix))
        self.metrics = metrics or process_metrics()
        self.dead = DeadLetters(client, self.keys, settings.key_ttl_s, settings.dead_maxlen)
        self.groups = GroupAssembler(client, self.keys, settings.group_size, settings.version_window,
                                     settings.key_ttl_s, settings.max_groups_len, settings.late_window_s,
                                     settings.dead_maxlen)  # fmt: skip

    def process(self, items: list[Item]) -> list[str]:
        """Score (traj_id, base64 payload[, stream entry id]) entries and add them to their groups; returns a status
        per entry ('pending', 'grouped', 'late', 'duplicate', 'dead', 'full'). Transient errors (Redis, judge)
        propagate."""
        status: dict[str, str] = {}
        entries = {item[0]: item[2] for item in items if len(item) > 2 and item[2]}
        decoded = self._decode(items, status, entries)
        stored = self._prefetch(decoded, status) if self.settings.judge != "rule" else {}
        scored = []
        for traj, payload in decoded:
            if traj.id in status:
                continue
            try:
                scored.append(Scored(traj, payload, stored.get(traj.id) or self._score(traj), entries.get(traj.id)))
            except POISON_ERRORS as exc:
                # one trajectory the scorer cannot handle must not fail (and dead-letter) its whole batch
                status[traj.id] = self.dead_letter(traj.id, f"scoring_error: {type(exc).__name__}: {exc}", payload,
                                                   entries.get(traj.id))  # fmt: skip
        self.emit(self._add_all(scored, status))
        return [status.get(item[0], "dead") for item in items]

    def _decode(self, items: list[Item], status: dict[str, str],
                entries: dict[str, str]) -> list[tuple[Trajectory, bytes]]:  # fmt: skip
        out = []
        for traj_id, payload_b64, *_ in items:
            payload = base64.b64decode(payload_b64)
            try:
                traj = load_msgpack(Trajectory, payload)
                if traj.id != traj_id:
                    raise ContractError(f"invalid Trajectory: entry id {traj_id!r} != payload id {traj.id!r}")
            except ContractError as exc:
                status[traj_id] = self.dead_letter(traj_id, f"invalid_payload: {exc}", payload, entries.get(traj_id))
                continue
            out.append((traj, payload))
        return out

    def _prefetch(self, decoded, status: dict[str, str]) -> dict[str, Reward]:
        """Before calling an expensive judge: skip grouped members, reuse stored rewards (one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for traj, _ in decoded:
            pipe.exists(self.keys.member(traj.id))
            pipe.get(self.keys.reward(self.settings.scorer_version, traj.id))
        replies = pipe.execute()
        stored = {}
        for i, (traj, _) in enumerate(decoded):
            if replies[2 * i]:
                status[traj.id] = "duplicate"
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
            self.groups.add(item.traj, item.payload, item.reward,
                            self.keys.reward(self.settings.scorer_version, item.traj.id), stats_stream,
                            _stats(item.traj, item.reward), self.settings.stats_maxlen, batch,
                            item.stream_entry)  # fmt: skip
        completed = []
        for item, reply in zip(scored, batch.execute()):
            added = self.groups.parse_add(reply)
            if added.fresh_reward:
                self._observe(item.reward)
            if added.status == "late":
                self.metrics.late_members.inc()
                status[item.traj.id] = self.dead_letter(item.traj.id, "late: its group was already emitted as partial",
                                                        item.payload, item.stream_entry)  # fmt: skip
                continue
            if added.status == "duplicate":
                self.metrics.duplicates.inc()
            if added.status == "complete":
                completed.append(added.group_id)
                added.status = "grouped"
            status[item.traj.id] = added.status
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


def _stats(traj: Trajectory, reward: Reward) -> list[str]:
    """Dashboard entry fields, in the order the add script writes them: exec, pref, tool_turns,
    policy_version, task_id, ts."""
    return [repr(reward.exec), repr(reward.pref), str(int(reward.components.get("tool_turns", 0))),
            str(traj.policy_version), traj.task_id, repr(time.time())]  # fmt: skip
