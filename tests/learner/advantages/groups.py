"""Builders of small groups for estimator tests: layouts from (kind, length) specs, hypothesis strategies.
(Trajectories laid out the same way: `tests.support.trajectories.trajectory(spec)`.)"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from learner.advantages.batch import KIND_CODE, AdvantageBatch, MemberLayout
from slca.contracts import CallScore, Reward, RolloutGroup, SegmentKind, Trajectory

K = SegmentKind


def layout(spec: list[tuple[SegmentKind, int]]) -> MemberLayout:
    """Tokens from `[(kind, n_tokens), ...]`; the turn increases after each tool_result."""
    kinds, turns, turn = [], [], 0
    for kind, n in spec:
        kinds += [KIND_CODE[kind]] * n
        turns += [turn] * n
        if kind == K.TOOL_RESULT:
            turn += 1
    return MemberLayout(torch.tensor(kinds), torch.tensor(turns))


def reward(i: int, exec: float, pref: float, **kw) -> Reward:
    return Reward(trajectory_id=f"t{i}", exec=exec, pref=pref, **kw)


def batch(specs, rewards, tool_needed: bool | None = None) -> AdvantageBatch:
    return AdvantageBatch(
        [layout(s) for s in specs], [reward(i, e, p) for i, (e, p) in enumerate(rewards)], tool_needed=tool_needed
    )


GEN_KINDS = [K.TOOL_CALL, K.SUMMARY, K.REASONING]
ALL_KINDS = [K.SYSTEM, K.USER, K.TOOL_RESULT, *GEN_KINDS]


@st.composite
def members(draw):
    spec = [(K.SYSTEM, draw(st.integers(1, 3)))]
    spec += draw(st.lists(st.tuples(st.sampled_from(ALL_KINDS), st.integers(1, 3)), min_size=0, max_size=6))
    return spec


@st.composite
def groups(draw, max_g: int = 6):
    g = draw(st.integers(1, max_g))
    specs = [draw(members()) for _ in range(g)]
    value = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.5, 1.0]), st.floats(-1e12, 1e12))
    layouts = []
    rewards = []
    for i, spec in enumerate(specs):
        layouts.append(layout(spec))
        per_call = [
            CallScore(turn=t, score=draw(st.floats(0, 1))) for t in draw(st.sets(st.integers(0, 2), max_size=2))
        ]
        components = {} if draw(st.booleans()) else {"rltr_plan": draw(st.sampled_from([-1.0, 0.0, 0.7]))}
        if draw(st.booleans()):
            components["success"] = draw(st.sampled_from([0.0, 1.0]))
        rewards.append(
            Reward(trajectory_id=f"t{i}", exec=draw(value), pref=draw(value), per_call=per_call, components=components)
        )
    needed = draw(st.sampled_from([None, True, False]))
    return AdvantageBatch(layouts, rewards, tool_needed=needed)


def rollout_group(trajectories: list[Trajectory], rewards: list[Reward]) -> RolloutGroup:
    rewards = [r.model_copy(update={"trajectory_id": t.id}) for t, r in zip(trajectories, rewards)]
    return RolloutGroup(
        task_id="task", policy_version_min=0, policy_version_max=0, trajectories=trajectories, rewards=rewards
    )
