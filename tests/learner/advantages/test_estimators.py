"""Estimators: hand-computed values, vectorised vs plain-loop reference, edge cases, channel isolation."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from learner.advantages import ESTIMATORS, AdvantageBatch, AdvantageSettings, UnknownEstimatorError, get_estimator
from learner.advantages.batch import SUMMARY, TOOL_CALL
from learner.advantages.common import flatten, route_reasoning
from learner.advantages.estimators import exec_scope
from tests.learner.advantages.groups import K, batch, groups, layout, reward
from tests.learner.advantages.reference import REFERENCES, route

CFG = AdvantageSettings(decision_token=False, success_weight=0.0)
"""The estimators as their papers define them (the shipped defaults aim at success: the decision token on, success
weighted 1, learner/settings.py); a test about either option turns it on."""
SPEC_CALL = [(K.SYSTEM, 2), (K.USER, 1), (K.TOOL_CALL, 2), (K.TOOL_RESULT, 1), (K.SUMMARY, 2)]
SPEC_NOCALL = [(K.SYSTEM, 2), (K.USER, 1), (K.SUMMARY, 3)]


def hand_group() -> AdvantageBatch:
    # member 2 makes no call on a task that needs one: the scorer's omission guard set its r_pref to −0.5.
    return batch([SPEC_CALL, SPEC_CALL, SPEC_NOCALL], [(1.0, 0.5), (0.0, 1.0), (0.0, -0.5)])


# Hand computation (unbiased std, ε = 1e-6):
#   exec over P_exec = {0, 1}: [1, 0] → ±0.5/0.70711 = ±0.70711
#   pref over P_pref = {0, 1, 2}: [0.5, 1, −0.5] → mean 1/3, std 0.76376 → [0.21822, 0.87287, −1.09109]
#   R = exec + pref = [1.5, 1.0, −0.5] → mean 2/3, std 1.04083 → [0.80064, 0.32026, −1.12090]
E, P, G = 0.70711, [0.21822, 0.87287, -1.09109], [0.80064, 0.32026, -1.12090]
EXPECTED = {
    "slca": [[0, 0, 0, E, E, 0, P[0], P[0]], [0, 0, 0, -E, -E, 0, P[1], P[1]], [0, 0, 0, P[2], P[2], P[2]]],
    "grpo": [[0, 0, 0, G[0], G[0], 0, G[0], G[0]], [0, 0, 0, G[1], G[1], 0, G[1], G[1]], [0, 0, 0] + [G[2]] * 3],
    "toolpo": [
        [0, 0, 0, G[0] + E, G[0] + E, 0, G[0], G[0]],
        [0, 0, 0, G[1] - E, G[1] - E, 0, G[1], G[1]],
        [0, 0, 0] + [G[2]] * 3,
    ],
    "rltr": [[0, 0, 0, E, E, 0, 0, 0], [0, 0, 0, -E, -E, 0, 0, 0], [0] * 6],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hand_built_group_matches_hand_computed_values(name):
    adv, _ = get_estimator(name)(hand_group(), CFG)
    for got, want in zip(adv, EXPECTED[name]):
        assert got.tolist() == pytest.approx(want, abs=1e-4)


def test_every_registered_estimator_has_a_reference_and_a_docstring():
    assert set(ESTIMATORS) == set(REFERENCES)
    assert all(fn.__doc__ and "arXiv" in fn.__doc__ for fn in ESTIMATORS.values())


def test_unknown_estimator_fails_listing_known_names():
    with pytest.raises(UnknownEstimatorError, match="known: grpo, rltr, slca, toolpo"):
        get_estimator("ppo")


def check_against_reference(name, b, cfg):
    adv, metrics = get_estimator(name)(b, cfg)
    want = REFERENCES[name](b, cfg)
    assert len(adv) == b.size
    for got, ref, m in zip(adv, want, b.members):
        assert got.shape == m.kinds.shape and got.dtype == torch.float32
        assert torch.isfinite(got).all()
        assert got.tolist() == pytest.approx(ref, rel=1e-4, abs=1e-4)
    return adv, metrics


EDGE_CASES = {
    "zero_variance": ([SPEC_CALL] * 3, [(0.5, 0.5)] * 3),
    "one_member_with_tool_call": ([SPEC_CALL, SPEC_NOCALL, SPEC_NOCALL], [(1.0, 0.2), (0.0, 0.9), (0.3, 0.1)]),
    "no_summary": ([[(K.SYSTEM, 1), (K.TOOL_CALL, 3)]] * 3, [(1.0, 0.0), (0.0, 0.0), (0.5, 0.0)]),
    "no_tool_call": ([SPEC_NOCALL] * 3, [(0.0, 1.0), (0.0, 0.0), (0.0, 0.5)]),
    "huge_rewards": ([SPEC_CALL] * 3, [(1e12, -1e12), (-3e11, 7e11), (0.0, 1e-12)]),
    "single_member": ([SPEC_CALL], [(1.0, 1.0)]),
    "reasoning": (
        [[(K.SYSTEM, 1), (K.REASONING, 2), (K.TOOL_CALL, 1), (K.TOOL_RESULT, 1), (K.REASONING, 1), (K.SUMMARY, 1)]] * 2,
        [(1.0, 0.0), (0.0, 1.0)],
    ),
}
CONFIGS = {
    "default": CFG,
    "turn_level": CFG.model_copy(update={"turn_level": True}),
    "route_prev": CFG.model_copy(update={"reasoning_route": "prev"}),
    "route_none_w_pref": CFG.model_copy(update={"reasoning_route": "none", "w_pref": 0.5}),
    "decision_token": CFG.model_copy(update={"decision_token": True}),
    "decision_turn_level": CFG.model_copy(update={"decision_token": True, "turn_level": True}),
    "success_weight": CFG.model_copy(update={"success_weight": 0.5}),
}


@pytest.mark.parametrize("cfg_name", sorted(CONFIGS))
@pytest.mark.parametrize("case", sorted(EDGE_CASES))
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_edge_cases_match_reference(name, case, cfg_name):
    specs, rewards = EDGE_CASES[case]
    check_against_reference(name, batch(specs, rewards), CONFIGS[cfg_name])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_single_member_and_zero_variance_give_zero_advantages(name):
    for case in ("single_member", "zero_variance"):
        adv, _ = get_estimator(name)(batch(*EDGE_CASES[case]), CFG)
        assert all(bool((a == 0).all()) for a in adv)


def test_zero_variance_is_counted_per_channel():
    _, metrics = get_estimator("slca")(batch([SPEC_CALL] * 3, [(0.5, 0.1), (0.5, 0.9), (0.5, 0.3)]), CFG)
    assert metrics.channels["exec"].zero_variance == 1.0 and metrics.channels["pref"].zero_variance == 0.0


def test_one_member_with_a_segment_gets_zero_not_its_raw_score():
    adv, _ = get_estimator("slca")(batch(*EDGE_CASES["one_member_with_tool_call"]), CFG)
    assert bool((adv[0][3:5] == 0).all())  # |P_exec| = 1 → 0 on its tool_call tokens


def test_turn_level_uses_per_call_scores_of_the_turn():
    spec = [(K.SYSTEM, 1), (K.TOOL_CALL, 1), (K.TOOL_RESULT, 1), (K.TOOL_CALL, 1), (K.TOOL_RESULT, 1), (K.SUMMARY, 1)]
    from slca.contracts import CallScore

    rewards = [
        reward(0, 0.5, 0.5, per_call=[CallScore(turn=0, score=1.0), CallScore(turn=1, score=0.0)]),
        reward(1, 0.5, 0.5, per_call=[CallScore(turn=0, score=0.0), CallScore(turn=1, score=1.0)]),
    ]
    b = AdvantageBatch([layout(spec), layout(spec)], rewards)
    adv, _ = get_estimator("slca")(b, CFG.model_copy(update={"turn_level": True}))
    assert adv[0][1] > 0 > adv[0][3] and adv[1][1] < 0 < adv[1][3]
    flat, _ = get_estimator("slca")(b, CFG)  # trajectory level: equal r_exec → zero
    assert float(flat[0][1]) == 0.0


@pytest.mark.parametrize("mode", ["next", "prev", "none"])
def test_reasoning_routing_matches_reference(mode):
    kinds = layout([(K.REASONING, 2), (K.TOOL_CALL, 1), (K.REASONING, 1), (K.SUMMARY, 1), (K.REASONING, 2)]).kinds
    assert route_reasoning(kinds, mode).tolist() == route(kinds.tolist(), mode)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=groups(), name=st.sampled_from(sorted(REFERENCES)), cfg=st.sampled_from(sorted(CONFIGS)))
def test_random_groups_match_reference(b, name, cfg):
    check_against_reference(name, b, CONFIGS[cfg])


def _with_rewards(b: AdvantageBatch, exec_shift: float, pref_shift: float) -> AdvantageBatch:
    rewards = [
        r.model_copy(update={"exec": r.exec + exec_shift * (i + 1) ** 2, "pref": r.pref - pref_shift * (i % 3)})
        for i, r in enumerate(b.rewards)
    ]
    return dataclasses.replace(b, rewards=rewards)  # the group's other data (tool_needed) kept


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=groups(), cfg=st.sampled_from(sorted(CONFIGS)))
def test_slca_never_crosses_channels(b, cfg):
    """Perturbing r_pref never moves a tool_call token's advantage; perturbing r_exec never moves a summary's."""
    config = CONFIGS[cfg]
    base, _ = get_estimator("slca")(b, config)
    pref_moved, _ = get_estimator("slca")(_with_rewards(b, 0.0, 0.37), config)
    exec_moved, _ = get_estimator("slca")(_with_rewards(b, 0.29, 0.0), config)
    credits = flatten(b, config).split(exec_scope(b, config, flatten(b, config))[0])
    for m, credit, a0, ap, ae in zip(b.members, credits, base, pref_moved, exec_moved):
        assert torch.equal(a0[credit == TOOL_CALL], ap[credit == TOOL_CALL])
        assert torch.equal(a0[credit == SUMMARY], ae[credit == SUMMARY])
        assert bool((a0[~m.generated] == 0).all())


# A task whose gold has no call: members 0, 1 call anyway (exec 0.3: the scorer's cost of a spurious call), members
# 2, 3 answer directly (exec 1.0). Plain SLCA: P_exec = {0, 1}, equal rewards → no push back on the calls at all.
NO_TOOL = ([SPEC_CALL, SPEC_CALL, SPEC_NOCALL, SPEC_NOCALL], [(0.3, 0.2), (0.3, 0.6), (1.0, 0.9), (1.0, 0.4)])
FIRST_GENERATED = 3  # SPEC_NOCALL: system ×2, user, then the summary


def test_decision_token_pushes_back_on_spurious_calls():
    on = CFG.model_copy(update={"decision_token": True})
    adv, metrics = get_estimator("slca")(batch(*NO_TOOL, tool_needed=False), on)
    for caller in (0, 1):
        calls = adv[caller][3:5]
        assert bool((calls < 0).all())
    for answerer in (2, 3):
        assert float(adv[answerer][FIRST_GENERATED]) > 0
    # the call tokens and the decision token share one normalisation over all four members: ±0.866
    assert float(adv[0][3]) == pytest.approx(-float(adv[2][FIRST_GENERATED]), rel=1e-5)
    assert metrics.channels["exec"].present == 4.0


def test_decision_token_leaves_the_rest_of_the_answer_to_the_summary_channel():
    on = CFG.model_copy(update={"decision_token": True})
    adv_on, _ = get_estimator("slca")(batch(*NO_TOOL, tool_needed=False), on)
    adv_off, _ = get_estimator("slca")(batch(*NO_TOOL, tool_needed=False), CFG)
    for i in (2, 3):  # the summary's later tokens and every caller's summary keep their pref advantage
        assert adv_on[i][FIRST_GENERATED + 1 :].tolist() == adv_off[i][FIRST_GENERATED + 1 :].tolist()
    assert adv_on[0][6:].tolist() == adv_off[0][6:].tolist()


@pytest.mark.parametrize("tool_needed", [None, True, False])
def test_without_decision_token_no_tool_groups_are_unchanged(tool_needed):
    """Off (the papers' estimator), or on a task that needs a tool, or without ground truth: the paper's SLCA."""
    plain, _ = get_estimator("slca")(batch(*NO_TOOL), CFG)
    off, _ = get_estimator("slca")(batch(*NO_TOOL, tool_needed=tool_needed), CFG)
    assert [a.tolist() for a in off] == [a.tolist() for a in plain]
    assert all(float(a[3:5].abs().sum()) == 0 for a in plain[:2])  # the blind spot the option closes
    if tool_needed is not False:
        decision = CFG.model_copy(update={"decision_token": True})
        on, _ = get_estimator("slca")(batch(*NO_TOOL, tool_needed=tool_needed), decision)
        assert [a.tolist() for a in on] == [a.tolist() for a in plain]


def _exec_tie_success_differs() -> AdvantageBatch:
    """Two members that call, equal r_exec and r_pref (a right tool with a wrong value scores 0.8), one succeeds."""
    rewards = [reward(0, 0.8, 0.5, components={"success": 1.0}), reward(1, 0.8, 0.5, components={"success": 0.0})]
    return AdvantageBatch([layout(SPEC_CALL), layout(SPEC_CALL)], rewards)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_success_weight_credits_the_successful_member_on_its_tool_call_tokens(name):
    b, weighted = _exec_tie_success_differs(), CFG.model_copy(update={"success_weight": 0.5})
    on, _ = check_against_reference(name, b, weighted)
    off, _ = get_estimator(name)(b, CFG)
    calls = slice(3, 5)  # SPEC_CALL's tool_call tokens
    assert bool((on[0][calls] > on[1][calls]).all())
    gap_on, gap_off = float(on[0][3] - on[1][3]), float(off[0][3] - off[1][3])
    assert gap_on > gap_off  # toolpo's success channel already separates them; the term adds to its action channel
    if name != "toolpo":
        assert gap_off == 0.0


def test_success_weight_is_the_scored_exec_reward_plus_the_weighted_success():
    from learner.advantages.common import exec_rewards

    tie = _exec_tie_success_differs()  # and a member without a 'success' component: it counts 0
    b = AdvantageBatch([*tie.members, layout(SPEC_CALL)], [*tie.rewards, reward(2, 0.3, 0.0)])
    assert exec_rewards(b, CFG.model_copy(update={"success_weight": 0.5})).tolist() == pytest.approx([1.3, 0.8, 0.3])
    assert exec_rewards(b, CFG).tolist() == pytest.approx([0.8, 0.8, 0.3])


def test_batch_of_reads_tool_needed_from_the_ground_truth():
    from learner.advantages import batch_of
    from slca.contracts import GoldCall, GroundTruth
    from tests.learner.advantages.groups import rollout_group
    from tests.support.trajectories import trajectory

    for gt, want in ((None, None), (GroundTruth(), False), (GroundTruth(calls=[GoldCall(name="f")]), True)):
        trajs = [trajectory(SPEC_NOCALL, ground_truth=gt) for _ in range(2)]
        assert batch_of(rollout_group(trajs, [reward(0, 1.0, 1.0), reward(1, 0.0, 0.0)])).tool_needed is want
