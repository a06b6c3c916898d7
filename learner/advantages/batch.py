"""The one typed input of every advantage estimator: a group's token layouts and rewards
(docs/design.md#advantages).

Per member i of a group of G: `kinds (T_i,)` (int codes of `SegmentKind`, see `KIND_CODE`), `turns (T_i,)`
(model turn of each token), and its `Reward`. Built once from a `RolloutGroup`; estimators never look at text
nor at the server's call records: reward shaping (the omission guard, RLTR's penalties) is the scorer's
(`workers.scoring.shaping`), and estimators read its results from the rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from slca.contracts import Reward, RolloutGroup, SegmentKind, Trajectory

KIND_CODE: dict[SegmentKind, int] = {
    SegmentKind.SYSTEM: 0,
    SegmentKind.USER: 1,
    SegmentKind.TOOL_RESULT: 2,
    SegmentKind.TOOL_CALL: 3,
    SegmentKind.SUMMARY: 4,
    SegmentKind.REASONING: 5,
}
CODE_KIND = {v: k for k, v in KIND_CODE.items()}
TOOL_CALL, SUMMARY, REASONING = (
    KIND_CODE[SegmentKind.TOOL_CALL],
    KIND_CODE[SegmentKind.SUMMARY],
    KIND_CODE[SegmentKind.REASONING],
)
GENERATED_CODES = (TOOL_CALL, SUMMARY, REASONING)


@dataclass(frozen=True)
class MemberLayout:
    """Token layout of one trajectory. Tensors are (T,) on CPU."""

    kinds: torch.Tensor
    """(T,) int64 segment-kind codes (`KIND_CODE`)."""
    turns: torch.Tensor
    """(T,) int64 model turn of each token."""

    def has(self, code: int) -> bool:
        return bool((self.kinds == code).any())

    @property
    def generated(self) -> torch.Tensor:
        """(T,) bool mask of policy-generated tokens."""
        return (self.kinds == TOOL_CALL) | (self.kinds == SUMMARY) | (self.kinds == REASONING)


@dataclass(frozen=True)
class AdvantageBatch:
    """A group as estimators see it: G layouts and G rewards, in the same order."""

    members: list[MemberLayout]
    rewards: list[Reward]
    group_id: str = ""
    tool_needed: bool | None = None
    """From the task's ground truth (`GroundTruth.tool_needed`, the group's contract data): False when the gold
    has no call, None when the group carries no ground truth (unknown: estimators assume nothing)."""

    def __post_init__(self) -> None:
        if len(self.members) != len(self.rewards) or not self.members:
            raise ValueError(f"AdvantageBatch: {len(self.members)} layouts for {len(self.rewards)} rewards")

    @property
    def size(self) -> int:
        return len(self.members)


def layout_of(traj: Trajectory) -> MemberLayout:
    """Per-token kinds and turns of one trajectory."""
    kinds = torch.zeros(len(traj.tokens), dtype=torch.long)
    turns = torch.zeros(len(traj.tokens), dtype=torch.long)
    for seg in traj.segments:
        kinds[seg.start : seg.end] = KIND_CODE[seg.kind]
        turns[seg.start : seg.end] = seg.turn
    return MemberLayout(kinds=kinds, turns=turns)


def tool_needed_of(group: RolloutGroup) -> bool | None:
    """Whether the group's task needs a tool, from its members' ground truth (one task: the first one that
    carries it); None when none does."""
    for traj in group.trajectories:
        if traj.ground_truth is not None:
            return traj.ground_truth.tool_needed
    return None


def batch_of(group: RolloutGroup) -> AdvantageBatch:
    return AdvantageBatch(
        members=[layout_of(t) for t in group.trajectories],
        rewards=list(group.rewards),
        group_id=group.group_id,
        tool_needed=tool_needed_of(group),
    )
