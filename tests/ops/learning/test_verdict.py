"""The verdict is computed from the numbers: null, positive, negative, mixed, undetermined on synthetic results,
each comparison stated with its numbers, and a budget from the curves' slopes when a difference is too small."""

import pytest

from ops.learning.verdict import Evidence, Stats, judge, mean_curve, slope

WARM = 0.20


def evidence(finals, curves=None, steps=20, step_s=30.0) -> Evidence:
    return Evidence("indomain/success", WARM, finals, curves or {}, steps, step_s)


def test_null_when_no_difference_exceeds_the_seed_spread():
    v = judge(evidence({"slca": [0.22, 0.18, 0.26], "grpo": [0.20, 0.25, 0.17], "toolpo": [0.21, 0.19, 0.23]}))
    assert v.label == "null"
    text = "\n".join(v.lines)
    assert "Best estimator vs warm start (indomain/success): slca 0.220 ± 0.040 vs the warm start 0.200" in text
    assert "margin +0.020, not more than the spread 0.040 → slca is not separable from it" in text
    assert "SLCA-GRPO vs grpo" in text and "SLCA-GRPO vs toolpo" in text


def test_positive_when_slca_beats_every_baseline_and_the_warm_start():
    v = judge(evidence({"slca": [0.50, 0.52, 0.48], "grpo": [0.30, 0.32, 0.28], "rltr": [0.35, 0.36, 0.34]}))
    assert v.label == "positive"
    assert any("slca 0.500 ± 0.020 vs grpo 0.300 ± 0.020: margin +0.200, more than the spread 0.020 → slca beats it"
               in line for line in v.lines)  # fmt: skip
    assert not any(line.startswith("Budget") for line in v.lines)  # nothing left to extrapolate
    assert v.markdown().startswith("**Verdict: positive** — SLCA-GRPO beats every baseline")


def test_negative_when_a_baseline_beats_slca():
    v = judge(evidence({"slca": [0.30, 0.31, 0.29], "grpo": [0.50, 0.51, 0.49]}))
    assert v.label == "negative"
    assert any("margin -0.200" in line and "slca loses to it" in line for line in v.lines)


def test_mixed_when_only_part_of_the_claim_holds():
    v = judge(evidence({"slca": [0.50, 0.51, 0.49], "grpo": [0.49, 0.52, 0.47], "toolpo": [0.30, 0.31, 0.29]}))
    assert v.label == "mixed"  # beats the warm start and toolpo, not grpo


def test_fewer_than_two_seeds_is_no_verdict():
    v = judge(evidence({"slca": [0.5], "grpo": [0.3]}))
    assert v.label == "undetermined" and "fewer than two seeds" in v.lines[0]


def test_the_budget_comes_from_the_slope_of_the_curves():
    # slca rises 0.01 per step from the warm start, grpo stays flat; margin 0.02 < spread 0.05
    curves = {"slca": [[[10, 0.30], [20, 0.40]], [[10, 0.30], [20, 0.40]]], "grpo": [[[10, 0.2], [20, 0.2]]] * 2}
    v = judge(evidence({"slca": [0.40, 0.45, 0.35], "grpo": [0.38, 0.40, 0.36]}, curves))
    text = "\n".join(v.lines)
    # slca − grpo gap 0.05 − 0.02 = 0.03 at +0.01/step → 3 more steps, 1.5 min at 30 s/step
    assert "slca − grpo would exceed the spread after ≈ 3 more steps per run (≈ 23 in all), ≈ 2 more minutes" in text
    # best (slca) vs warm: margin 0.20 > 0.05 → no budget line for it
    assert "slca − warm start" not in text


def test_a_flat_curve_suggests_no_budget():
    curves = {"slca": [[[10, 0.2], [20, 0.2]]] * 2, "grpo": [[[10, 0.2], [20, 0.2]]] * 2}
    v = judge(evidence({"slca": [0.2, 0.25, 0.15], "grpo": [0.2, 0.22, 0.18]}, curves))
    assert any("does not grow along the curves" in line and "no step budget" in line for line in v.lines)


def test_stats_slope_and_mean_curve():
    assert Stats.of([1.0, 2.0, 3.0]) == Stats(2.0, 1.0, 3)
    assert Stats.of([0.5]).text() == "0.500"
    assert slope([(0, 0.0), (1, 1.0), (2, 2.0)]) == pytest.approx(1.0)
    assert slope([(5, 1.0)]) is None
    assert mean_curve([[[1, 0.0], [2, 1.0]], [[1, 1.0], [2, 1.0]]]) == [(1, 0.5), (2, 1.0)]
