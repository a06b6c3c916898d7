"""The learner consumes the scorer's shaped rewards (docs/design.md#hierr): it applies no omission rule of its own
and takes RLTR's planner reward from the `rltr_plan` component — never re-deriving either from the server's
call records: shaping is the scorer's, whatever the records say."""

from __future__ import annotations

import pytest

from learner.advantages import batch_of, get_estimator
from learner.settings import LearnerSettings
from slca.contracts import GoldCall, GroundTruth, ToolCallRecord
from tests.learner.advantages.groups import K, reward, rollout_group
from tests.learner.advantages.reference import norm
from tests.support.trajectories import trajectory

SPEC = [(K.SYSTEM, 2), (K.USER, 1), (K.TOOL_CALL, 2), (K.TOOL_RESULT, 1), (K.SUMMARY, 2)]
TRUTH = GroundTruth(calls=[GoldCall(name="get_weather")])
UNKNOWN = ToolCallRecord(turn=0, block=0, name="fake_tool", arguments={}, valid=False, error="unknown tool")
VALID = ToolCallRecord(turn=0, block=0, name="get_weather", arguments={})


def test_pref_is_the_workers_after_its_omission_guard__no_second_rule_or_penalty_in_the_learner():
    # the first: no valid call by the server, which the scorer does not count as an omission
    trajs = [
        trajectory(SPEC, tool_calls=[UNKNOWN], ground_truth=TRUTH),
        trajectory(SPEC, tool_calls=[], ground_truth=TRUTH),  # penalised by the scorer, with its configured −1.0
        trajectory(SPEC, tool_calls=[VALID], ground_truth=TRUTH),
    ]
    rewards = [reward(0, 0.2, 1.0), reward(1, 0.0, -1.0, omission_penalized=True), reward(2, 0.9, 0.5)]
    config = LearnerSettings().advantage
    adv, _ = get_estimator("slca")(batch_of(rollout_group(trajs, rewards)), config)
    want = norm([1.0, -1.0, 0.5], [True] * 3, config.eps)
    assert [float(a[-1]) for a in adv] == pytest.approx(want, abs=1e-5)
    assert not hasattr(LearnerSettings(), "no_call_penalty")  # the value is one setting: workers.no_call_penalty


def test_rltr_planner_reward_is_the_workers_rltr_plan_component():
    trajs = [trajectory(SPEC, tool_calls=[VALID, VALID], ground_truth=TRUTH) for _ in range(3)]  # records look fine
    plans = [-1.0, 0.8, 0.3]  # the scorer shaped member 0 as an invalid format
    rewards = [reward(i, 0.5, 0.5, components={"completeness": 1.0, "rltr_plan": p}) for i, p in enumerate(plans)]
    config = LearnerSettings().advantage
    adv, _ = get_estimator("rltr")(batch_of(rollout_group(trajs, rewards)), config)
    want = norm(plans, [True] * 3, config.eps)
    assert [float(a[3]) for a in adv] == pytest.approx(want, abs=1e-5)
    assert all(float(a[-1]) == 0.0 for a in adv)  # summary tokens: 0
