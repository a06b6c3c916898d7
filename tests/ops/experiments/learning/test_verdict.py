"""The verdict from per-item outcomes: the named family (slca vs each arm, each arm vs the warm start), the rule
and α stated before the numbers, missing arms and unpaired items said, and curve slopes whose step 0 is the warm
start on the same items as every other point."""

import numpy as np
import pytest

from ops.experiments.learning.inference import NO_DIFFERENCE
from ops.experiments.learning.verdict import WARM, curve_slopes, judge

ARMS = ["slca", "grpo", "slca_decision"]


def outcomes(rate: float, n: int, seed: int) -> dict[str, bool]:
    rng = np.random.default_rng(seed)
    return {f"test/{i}": bool(x) for i, x in enumerate(rng.random(n) < rate)}


def test_a_clear_gain_is_named_and_equal_arms_are_not():
    n = 300
    warm = outcomes(0.5, n, 0)
    base = np.array(list(warm.values()))
    better = {k: True for k in warm}  # slca solves everything, every seed
    runs = {
        "slca": {s: better for s in range(3)},
        "grpo": {s: dict(warm) for s in range(3)},
        "slca_decision": {s: dict(warm) for s in range(3)},
    }
    v = judge(warm, runs, ARMS, reps=500, perms=500)
    by = {(e.a, e.b): e for e in v.effects}
    assert list(by) == [
        ("slca", "grpo"),
        ("slca", "slca_decision"),
        ("slca", WARM),
        ("grpo", WARM),
        ("slca_decision", WARM),
    ]
    assert by[("slca", "grpo")].verdict == "slca better"
    assert by[("slca", "grpo")].effect == pytest.approx(100 * (1 - base.mean()))
    assert by[("grpo", WARM)].verdict == NO_DIFFERENCE and by[("grpo", WARM)].effect == 0.0
    md = v.markdown()
    assert md.index("α = 0.05") < md.index("| slca vs grpo |") and md.startswith("Rule, fixed before the run")
    assert "**slca better**" in md and v.n_items == n and v.dropped == 0


def test_missing_arms_and_unpaired_items_are_said():
    warm = outcomes(0.5, 50, 1)
    run = dict(warm)
    run.pop("test/0")  # this run lacks one item: left out of every comparison
    v = judge(warm, {"slca": {0: run, 1: dict(warm)}}, ARMS, reps=200, perms=200)
    assert v.n_items == 49 and v.dropped == 1
    assert "Not run (left out of the family): grpo, slca_decision." in v.markdown()
    assert [(e.a, e.b) for e in v.effects] == [("slca", WARM)]
    assert judge(warm, {}, ARMS).effects == []


def test_curve_slope_uses_the_warm_start_on_the_same_items_at_step_0():
    # the old bug: the warm start's full-eval score (here 0.9 on easy items) at step 0 against curve points on
    # another subset faked a slope; now step 0 is the warm start's outcome on the curve items themselves
    curves = {"slca": [[[10, 0.5], [20, 0.5]], [[10, 0.5], [20, 0.5]]]}
    assert curve_slopes(curves, 0.5)["slca"] == pytest.approx(0.0)
    assert curve_slopes({"grpo": [[[10, 0.6], [20, 0.7]]]}, 0.5)["grpo"] == pytest.approx(100.0)  # +1 pt/step
    assert curve_slopes({"rltr": []}, None)["rltr"] is None
