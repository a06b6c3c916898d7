"""A scored rollout group: G trajectories of one task with their rewards (docs/design.md#contracts)."""

from __future__ import annotations

import time
import uuid

from pydantic import Field, model_validator

from slca.contracts.reward import Reward
from slca.contracts.trajectory import Trajectory
from slca.contracts.wire import Contract


class RolloutGroup(Contract):
    group_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    task_id: str
    policy_version_min: int = Field(ge=0)
    policy_version_max: int = Field(ge=0)
    trajectories: list[Trajectory] = Field(min_length=1)
    rewards: list[Reward] = Field(min_length=1)
    partial: bool = False
    """Emitted after a timeout with fewer than the configured G members."""
    created_at: float = Field(default_factory=time.time)

    @model_validator(mode="after")
    def _consistent(self) -> "RolloutGroup":
        if len(self.trajectories) != len(self.rewards):
            raise ValueError(f"rewards: {len(self.rewards)} rewards for {len(self.trajectories)} trajectories")
        for i, (traj, rew) in enumerate(zip(self.trajectories, self.rewards)):
            if traj.task_id != self.task_id:
                raise ValueError(f"trajectories.{i}.task_id: {traj.task_id!r} != group task_id {self.task_id!r}")
            if rew.trajectory_id != traj.id:
                raise ValueError(f"rewards.{i}.trajectory_id: {rew.trajectory_id!r} != trajectory id {traj.id!r}")
        ids = [t.id for t in self.trajectories]
        if len(set(ids)) != len(ids):
            raise ValueError("trajectories: duplicate trajectory id")
        versions = [t.policy_version for t in self.trajectories]
        if min(versions) != self.policy_version_min or max(versions) != self.policy_version_max:
            raise ValueError(
                f"policy_version_min/max: {self.policy_version_min}/{self.policy_version_max} "
                f"!= members' {min(versions)}/{max(versions)}"
            )
        return self

    @property
    def size(self) -> int:
        return len(self.trajectories)
