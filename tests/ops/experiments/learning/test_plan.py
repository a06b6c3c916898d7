"""Plan and budget arithmetic of `slca bench learning`: curve steps, run and plan seconds, the sizing from
`--minutes`, the refusal of a plan over budget, the recorded plan a resumed command must match."""

import argparse

import pytest

from ops.experiments.learning.main import check_budget, make_plan, size
from ops.experiments.learning.plan import (
    Calibration,
    Plan,
    curve_steps,
    describe,
    plan_seconds,
    run_seconds,
    steps_for_minutes,
)
from slca.cli import CliError
from slca.config import load_config

CAL = Calibration(startup_s=60.0, step_s=30.0, eval_s=120.0, curve_eval_s=10.0)


def args(**kw) -> argparse.Namespace:
    base = dict(
        arms="slca,grpo,toolpo,rltr",
        seeds="0,1,2",
        steps=0,
        minutes=110.0,
        pack="everyday",
        eval_items=0,
        eval_max_tokens=256,
        eval_engine="hf",
        curve="eval",
        curve_every=0,
        curve_items=60,
        train_arg=[],
    )
    return argparse.Namespace(**(base | kw))


@pytest.mark.parametrize(
    ("steps", "every", "expected"),
    [(10, 3, [3, 6, 9, 10]), (8, 0, [2, 4, 6, 8]), (10, 0, [3, 6, 9, 10]), (1, 0, [1]), (5, 5, [5]), (0, 2, [])],
)
def test_curve_steps_are_evenly_spaced_and_end_at_the_final_model(steps, every, expected):
    assert curve_steps(steps, every) == expected


def test_run_and_plan_seconds_count_startup_steps_curve_points_and_evaluations():
    # curve points at 5 and 10: the one at 10 is read off the final evaluation, so one curve evaluation
    assert run_seconds(CAL, 10, 5, "eval") == 60 + 10 * 30 + 1 * 10 + 120
    assert run_seconds(CAL, 10, 5, "reward") == 60 + 10 * 30 + 120  # no curve evaluations
    assert plan_seconds(CAL, 12, 10, 5, "eval") == 120 + 12 * 490  # the warm start's eval gives its step-0 point too


def test_steps_for_minutes_is_the_largest_plan_that_fits():
    # 110 min − 90 s calibration − 120 s warm start = 6390 s for 12 runs = 532.5 s per run;
    # a run is 60 + 120 + 3 curve evaluations × 10 + 30·steps → 10 steps (10.75)
    steps = steps_for_minutes(CAL, 110, 12, 0, "eval", spent_s=90)
    assert steps == 10
    assert 90 + plan_seconds(CAL, 12, steps, 0, "eval") <= 110 * 60 < 90 + plan_seconds(CAL, 12, steps + 1, 0, "eval")
    assert steps_for_minutes(CAL, 110, 12, 0, "reward", spent_s=90) == 11  # (6390/12 − 180)/30 = 11.75
    assert steps_for_minutes(CAL, 5, 12, 0, "eval") == 0  # not even one step fits


def test_a_plan_over_the_budget_is_refused_with_the_numbers():
    config = load_config()
    plan = make_plan(args(), config, "m", steps=40)
    check_budget(plan, CAL, 0.0, minutes=0)  # 0: no limit
    with pytest.raises(CliError, match=r"needs ≈ \d+ min > --minutes 110 \(12 runs × 40 steps"):
        check_budget(plan, CAL, 0.0, minutes=110)
    with pytest.raises(CliError, match="even 1 step per run needs"):
        size(args(minutes=5), config, make_plan(args(), config, "m", 0), CAL, 0.0, "m")
    sized = size(args(), config, make_plan(args(), config, "m", 0), CAL, 90.0, "m")
    # 90 + 120 + 12 × (60 + 300 + 3 × 10 + 120) s = 6330 s
    assert sized.steps == 10 and sized.curve_every == 3 and "estimate: 106 min" in describe(sized, CAL, 90.0)


def test_plan_pins_the_equal_budget_from_the_configuration():
    config = load_config(overrides=["learner.train_group_size=4", "learner.train_temperature=0.7", "learner.lr=2e-6"])
    plan = make_plan(args(seeds="3,4,5"), config, "SmolLM2-135M-Instruct-sft", steps=8)
    assert (plan.group_size, plan.temperature, plan.lr, plan.curve_every) == (4, 0.7, 2e-6, 2)
    # seed-major: an interrupted comparison has every estimator at the seeds it reached
    assert [r.name for r in plan.runs[:5]] == ["slca-s3", "grpo-s3", "toolpo-s3", "rltr-s3", "slca-s4"]
    assert Plan.from_json(plan.to_json()) == plan


def test_a_resumed_command_must_reproduce_the_recorded_plan():
    config = load_config()
    plan = make_plan(args(), config, "m", steps=8)
    assert plan.differences(Plan.from_json(plan.to_json())) == []
    other = make_plan(args(seeds="0,1,2,3"), config, "m", steps=8)
    assert plan.differences(other) == ["seeds: recorded [0, 1, 2], now [0, 1, 2, 3]"]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"arms": "slca,nope"}, "unknown arm 'nope'"),
        ({"seeds": "0,x"}, "--seeds"),
        ({"seeds": "1,1"}, "without repeats"),
        ({"curve_items": 0}, "--curve-items"),
        ({"eval_items": -1}, "≥ 0"),
        ({"steps": -1}, "≥ 0"),
    ],
)
def test_bad_arguments_are_clear_errors(kw, message):
    with pytest.raises(CliError, match=message):
        make_plan(args(**kw), load_config(), "m", 0)


def test_the_default_arms_are_every_registered_estimator_and_slca_decision():
    """`--arms` unset: the arms are read from the estimator registry when the command runs (the `--help` of the
    argument parser imports no learner), the reference first."""
    from learner.advantages import ESTIMATORS
    from ops.experiments.learning.arms import REFERENCE, default_arms, resolve_arm
    from ops.experiments.learning.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).arms is None
    assert default_arms()[0] == REFERENCE and set(default_arms()) == {*ESTIMATORS, "slca_decision"}
    assert len(default_arms()) == len(ESTIMATORS) + 1
    plan = make_plan(args(arms=None), load_config(), "m", steps=8)
    assert plan.arms == default_arms() == ("slca", "grpo", "toolpo", "rltr", "slca_decision")
    decision = resolve_arm("slca_decision")
    assert decision.estimator == "slca"
    assert decision.set_args() == ["--set", "learner.advantage.decision_token=true"]
    assert resolve_arm("grpo").set_args() == []


def test_a_plugin_estimator_is_an_arm_of_its_name(monkeypatch):
    from learner.advantages import ESTIMATORS
    from ops.experiments.learning.arms import default_arms, resolve_arm

    monkeypatch.setitem(ESTIMATORS, "mine", ESTIMATORS["grpo"])
    assert default_arms() == ("slca", "grpo", "toolpo", "rltr", "mine", "slca_decision")
    assert resolve_arm("mine").estimator == "mine" and resolve_arm("mine").set_args() == []
