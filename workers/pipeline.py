"""What one scoring task does with one trajectory, independent of Celery (so it can be tested and benchmarked).

Idempotent, keyed by trajectory id: a trajectory already in a group is skipped; a stored reward (trajectory id
+ scorer version) is reused instead of re-scored; group membership and emission are Lua scripts that a second
delivery cannot double. Order matters for crash safety: the reward is stored before the member joins its
bucket, and the bucket keeps the trajectory until its group is written, so a crash at any point leaves work
that a redelivery (or the assembler's sweep) finishes.
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
from workers.metrics import OBSERVED_COMPONENTS, WorkerMetrics
from workers.scoring import ScoringError, score_trajectory
from workers.settings import WorkerSettings


@functools.lru_cache(maxsize=1)
def process_metrics() -> WorkerMetrics:
    """One set of metrics per process (the default registry refuses duplicates)."""
    return WorkerMetrics.create()


@dataclass
class Outcome:
    status: str
    """'grouped' | 'pending' | 'late' | 'duplicate' | 'dead'"""
    group_id: str | None = None


class ScoringPipeline:
    def __init__(self, client: redis.Redis, settings: WorkerSettings, prefix: str = "slca",
                 metrics: WorkerMetrics | None = None):  # fmt: skip
        self.client = client
        self.settings = settings
        self.keys = Keys(Streams(prefix))
        self.metrics = metrics or process_metrics()
        self.dead = DeadLetters(client, self.keys, settings.key_ttl_s)
        self.groups = GroupAssembler(client, self.keys, settings.group_size, settings.version_window,
                                     settings.key_ttl_s, settings.max_groups_len, settings.late_window_s)  # fmt: skip

    def process(self, traj_id: str, payload_b64: str) -> Outcome:
        """Score one stream entry and add it to its group. Transient errors (Redis, judge) propagate."""
        if self.client.exists(self.keys.member(traj_id)):
            self.metrics.duplicates.inc()
            return Outcome("duplicate")
        payload = base64.b64decode(payload_b64)
        try:
            traj = load_msgpack(Trajectory, payload)
            if traj.id != traj_id:
                raise ContractError(f"invalid Trajectory: entry id {traj_id!r} != payload id {traj.id!r}")
        except ContractError as exc:
            return self._dead(traj_id, f"invalid_payload: {exc}", payload)
        try:
            reward = self._reward(traj)
        except ScoringError as exc:
            return self._dead(traj_id, f"scoring_error: {exc}", payload)
        added = self.groups.add(traj, payload, reward)
        if added.status == "late":
            self.metrics.late_members.inc()
            return self._dead(traj_id, "late: its group was already emitted as partial", payload)
        if added.status == "duplicate":
            self.metrics.duplicates.inc()
        if added.status != "complete":
            return Outcome(added.status)
        return Outcome(*self.emit(added.group_id))

    def emit(self, group_id: str) -> tuple[str, str]:
        result, partial = self.groups.emit(group_id)
        if result == "emitted":
            self.metrics.groups_emitted.labels(partial=str(partial).lower()).inc()
        return ("grouped" if result in ("emitted", "duplicate") else result, group_id)

    def _reward(self, traj: Trajectory) -> Reward:
        key = self.keys.reward(self.settings.scorer_version, traj.id)
        stored = self.client.get(key)
        if stored is not None:
            return Reward.model_validate_json(stored)
        started = time.perf_counter()
        reward = score_trajectory(traj, self.settings)
        self.metrics.score_seconds.observe(time.perf_counter() - started)
        # NX: if two deliveries raced, both keep the first stored reward (scoring is deterministic anyway)
        if not self.client.set(key, reward.model_dump_json(), nx=True, ex=self.settings.key_ttl_s):
            return Reward.model_validate_json(self.client.get(key))
        self._observe(traj, reward)
        return reward

    def _observe(self, traj: Trajectory, reward: Reward) -> None:
        m = self.metrics
        m.scored.inc()
        m.reward_exec.observe(reward.exec)
        m.reward_pref.observe(reward.pref)
        for name in OBSERVED_COMPONENTS:
            if name in reward.components:
                m.reward_component.labels(component=name).observe(reward.components[name])
        stats = {"exec": reward.exec, "pref": reward.pref, "tool_turns": int(reward.components.get("tool_turns", 0)),
                 "policy_version": traj.policy_version, "task_id": traj.task_id, "ts": time.time()}  # fmt: skip
        self.client.xadd(self.keys.streams.stats(STATS_REWARDS), stats, maxlen=self.settings.stats_maxlen,
                         approximate=True)  # fmt: skip

    def _dead(self, entry_id: str, reason: str, payload: bytes | None) -> Outcome:
        if self.dead.add(entry_id, reason, self.keys.streams.trajectories, payload):
            self.metrics.dead_letters.labels(reason=reason_kind(reason)).inc()
        return Outcome("dead")
