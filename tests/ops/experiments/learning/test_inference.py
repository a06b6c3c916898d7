"""The comparison's statistics on synthetic results (no model): under the null (no true difference) the verdict is
"no difference detected" for every comparison in ≥ 90% of simulated experiments; a +10-point arm is detected most
of the time; Holm and the bootstrap behave on hand-made cases.

Simulation: 5 arms × 3 seeds × 200 items and a warm start (1 greedy run). Each item has a difficulty p_i drawn
from a Beta with mean 0.5–0.7 (so outcomes correlate across arms item by item, as on a real eval), each run a
small run-level shift (a seed that trains a better model lifts every item), outcomes Bernoulli."""

import numpy as np
import pytest

from ops.experiments.learning.inference import (
    ALPHA,
    NO_DIFFERENCE,
    compare_family,
    family,
    holm,
    outcome_arrays,
    sign_flip_p,
)

ARMS = ["slca", "grpo", "toolpo", "rltr", "slca_decision"]
FAMILY = family(ARMS, "slca", "warm")
REPS, PERMS = 400, 500  # the real run uses 10 000 of each; 500 flips resolve p to 0.002 < α/9


def experiment(rng, effect: dict[str, float] | None = None, seeds=3, items=200, run_sd=0.01):
    base = rng.uniform(0.5, 0.7)
    difficulty = rng.beta(2 * base, 2 * (1 - base), size=items)  # concentration 2: strongly item-driven
    out = {}
    for name, n_runs in [("warm", 1)] + [(a, seeds) for a in ARMS]:
        shift = (effect or {}).get(name, 0.0)
        p = np.clip(difficulty[None, :] + shift + rng.normal(0, run_sd, size=(n_runs, 1)), 0, 1)
        out[name] = (rng.random((n_runs, items)) < p).astype(float)
    return out


def test_under_the_null_every_verdict_is_no_difference_in_at_least_90_percent_of_experiments():
    rng = np.random.default_rng(1)
    clean, false_calls = 0, 0
    for k in range(200):
        effects = compare_family(experiment(rng), FAMILY, reps=REPS, perms=PERMS, seed=k)
        wrong = sum(e.verdict != NO_DIFFERENCE for e in effects)
        clean += wrong == 0
        false_calls += wrong
    assert clean / 200 >= 0.90, f"all-null verdicts in {clean}/200 experiments"
    assert false_calls / (200 * len(FAMILY)) < 0.02


def test_a_ten_point_gain_of_one_arm_is_detected_most_of_the_time():
    rng = np.random.default_rng(2)
    detected, wrong_way = 0, 0
    for k in range(50):
        effects = {
            (e.a, e.b): e
            for e in compare_family(experiment(rng, {"slca": 0.10}), FAMILY, reps=REPS, perms=PERMS, seed=k)
        }
        detected += effects[("slca", "grpo")].verdict == "slca better"
        wrong_way += any(
            e.verdict.startswith(("grpo", "toolpo", "rltr", "slca_decision")) for e in effects.values() if e.b == "warm"
        )
        assert effects[("slca", "warm")].verdict in ("slca better", NO_DIFFERENCE)
    assert detected / 50 >= 0.6  # measured: 36–39 of 50 (a realised 9 ± 3 points against a Holm threshold of α/9)
    assert wrong_way <= 3


def test_effect_is_in_points_paired_by_item_and_its_interval_covers_it():
    a = np.array([[1, 1, 0, 1, 0, 1, 1, 0] * 25] * 3, dtype=float)
    b = a.copy()
    b[:, :50] = 0  # b fails the first 50 items a solves or not: a − b = share of a's successes among them
    (e,) = compare_family({"a": a, "b": b}, [("a", "b")], reps=2000)
    assert e.effect == pytest.approx(100 * (a.mean() - b.mean())) and e.n_items == 200
    assert e.ci_low < e.effect < e.ci_high and e.verdict == "a better" and e.p_holm < ALPHA
    (same,) = compare_family({"a": a, "b": a.copy()}, [("a", "b")], reps=500)
    assert (same.effect, same.ci_low, same.ci_high, same.p, same.verdict) == (0.0, 0.0, 0.0, 1.0, NO_DIFFERENCE)
    assert e.p < 0.01 and e.seeds_a == 3


def test_holm_matches_the_step_down_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 → max so far 0.06
    assert holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm(np.array([[0.5, 0.9]])).tolist() == [[1.0, 1.0]]


def test_sign_flip_p_is_uniform_under_symmetry_and_small_under_a_shift():
    rng = np.random.default_rng(0)
    null = sign_flip_p(rng.choice([-1.0, 0.0, 1.0], size=(400, 200)), 200, rng)
    assert 0.02 < (null < 0.05).mean() < 0.09 and 0.4 < null.mean() < 0.6
    shifted = sign_flip_p(rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.4, 0.5], size=(5, 200)), 500, rng)
    assert (shifted < 0.01).all()


def test_family_names_every_comparison_before_the_run():
    assert FAMILY[:4] == [("slca", "grpo"), ("slca", "toolpo"), ("slca", "rltr"), ("slca", "slca_decision")]
    assert FAMILY[4:] == [(a, "warm") for a in ARMS] and len(FAMILY) == 9


def test_outcome_arrays_pair_runs_on_their_common_items():
    arrays, items = outcome_arrays(
        {
            "warm": {0: {"t/1": True, "t/2": False, "n/3": True}},
            "slca": {0: {"t/1": False, "t/2": True}, 1: {"t/1": True, "t/2": True}},
        }
    )
    assert items == ["t/1", "t/2"]
    assert arrays["warm"].tolist() == [[1.0, 0.0]] and arrays["slca"].tolist() == [[0.0, 1.0], [1.0, 1.0]]
