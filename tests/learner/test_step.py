"""`prepare_group`: which tokens enter the loss, with which behaviour logprobs and advantages."""

from __future__ import annotations


from learner.advantages.batch import TOOL_CALL
from learner.settings import LearnerSettings
from learner.step import prepare_group
from tests.learner.advantages.groups import K, reward, rollout_group
from tests.support.trajectories import trajectory

# turn 0: a call (forced by tool_choice in the constrained member), turn 1: another call, turn 2: the answer
SPEC = [
    (K.SYSTEM, 2),
    (K.USER, 1),
    (K.TOOL_CALL, 3),
    (K.TOOL_RESULT, 1),
    (K.TOOL_CALL, 2),
    (K.TOOL_RESULT, 1),
    (K.SUMMARY, 2),
]
TURN0 = [3, 4, 5]


def test_constrained_turn_tokens_are_excluded_from_the_loss__not_kept_with_zero_advantage():
    """Choice: a turn sampled under a grammar has behaviour logprobs renormalised over the allowed tokens, which
    the learner's unconstrained recompute cannot match, so ρ is biased there. Its tokens leave the loss
    altogether (no policy gradient, no KL, not counted in the token mean); the turn's reward still counts
    through the group's other tokens."""
    forced = trajectory(SPEC, meta={"constrained_turns": [0]})
    free = trajectory(SPEC)
    group = rollout_group([forced, free], [reward(0, 1.0, 0.2), reward(1, 0.0, 0.9)])
    prepared = prepare_group(group, "slca", LearnerSettings().advantage)
    assert not set(TURN0) & set(prepared.selected[0].tolist())
    assert set(TURN0) <= set(prepared.selected[1].tolist())
    n0 = prepared.selected[0].numel()
    assert n0 == 4 and prepared.num_tokens == n0 + 7 and prepared.behaviour.numel() == prepared.num_tokens
    assert bool((prepared.advantages[:2] != 0).all()) and bool((prepared.kinds[:2] == TOOL_CALL).all())
    assert prepared.constrained_excluded == 3
