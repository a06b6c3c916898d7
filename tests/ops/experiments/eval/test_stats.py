"""The arithmetic of an evaluation against known values: Wilson intervals, exact McNemar, the bootstrap, and the
summaries and paired comparisons built from per-item records."""

import math

import pytest

from ops.experiments.eval.stats import bootstrap_diff, compare, mcnemar_exact, paired, summarize, wilson
from ops.experiments.eval.suite import ItemRecord


@pytest.mark.parametrize(
    "k,n,low,high",
    [
        (5, 10, 0.2366, 0.7634),
        (0, 20, 0.0, 0.1611),  # the Wald interval would be [0, 0]
        (20, 20, 0.8389, 1.0),
        (81, 263, 0.2553, 0.3662),  # Wikipedia's worked example (binomial proportion confidence interval)
    ],
)
def test_wilson_interval(k, n, low, high):
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_of_nothing_is_the_whole_range():
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    "b,c,p",
    [
        (10, 2, 2 * (1 + 12 + 66) / 4096),  # 0.0386: sum_{k<=2} C(12,k) / 2^12, doubled
        (2, 10, 2 * (1 + 12 + 66) / 4096),  # symmetric
        (5, 5, 1.0),  # capped at 1
        (0, 0, 1.0),  # no discordant pair: no evidence
        (6, 0, 2 / 64),  # 0.03125
    ],
)
def test_mcnemar_exact(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_mcnemar_matches_the_binomial_test_by_enumeration():
    """The two-sided exact binomial test's own definition: the mass of every outcome no likelier than the one seen."""
    for b, c in [(3, 11), (17, 9), (40, 25), (1, 0)]:
        n = b + c
        probs = [math.comb(n, k) / 2**n for k in range(n + 1)]
        p = sum(q for q in probs if q <= probs[b] * (1 + 1e-9))
        assert mcnemar_exact(b, c) == pytest.approx(min(1.0, p))


def test_bootstrap_interval_is_seeded_and_near_the_normal_approximation():
    a = [0.0] * 100
    b = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_diff(a, b, seed=3)
    assert (low, high) == bootstrap_diff(a, b, seed=3)  # seeded: the same interval every time
    half = 1.96 * math.sqrt(0.3 * 0.7 / 100)
    assert low == pytest.approx(0.3 - half, abs=0.02) and high == pytest.approx(0.3 + half, abs=0.02)
    assert bootstrap_diff([1.0] * 5, [1.0] * 5) == (0.0, 0.0)  # no variation: a point
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_diff([1.0], [])


def rec(suite, item, success, exec_=None, error=None):
    return ItemRecord(suite, item, success, exec_, None if exec_ is None else 0.5, error=error)


def test_summarize_per_suite_and_pooled():
    records = [
        rec("test", "t1", True, 1.0),
        rec("test", "t2", False, 0.4),
        rec("novel", "n1", False, 0.2, error="HTTP 500: boom"),
        rec("bfcl:irrelevance", "b1", True),
        rec("bfcl:simple_python", "b2", False),
    ]
    s = summarize(records)
    assert list(s) == ["test", "novel", "bfcl:irrelevance", "bfcl:simple_python", "held_out", "bfcl"]
    assert s["test"]["n"] == 2 and s["test"]["success"] == 0.5 and s["test"]["exec"] == pytest.approx(0.7)
    assert (s["test"]["ci_low"], s["test"]["ci_high"]) == pytest.approx(wilson(1, 2))
    assert s["held_out"]["n"] == 3 and s["held_out"]["success"] == pytest.approx(1 / 3)
    assert s["held_out"]["errors"] == 1 and s["novel"]["errors"] == 1 and s["bfcl"]["errors"] == 0
    assert s["bfcl"]["n"] == 2 and s["bfcl"]["exec"] is None and s["bfcl"]["pref"] is None


def test_paired_uses_items_present_in_both_runs():
    a = [rec("test", f"t{i}", i < 4) for i in range(10)] + [rec("test", "only-a", True)]
    b = [rec("test", f"t{i}", i < 2 or i >= 6) for i in range(10)] + [rec("test", "only-b", False)]
    r = paired(a, b)
    # a solves t0..t3, b solves t0, t1, t6..t9: b only on 4 items, a only on 2
    assert r["n"] == 10 and r["a"] == 0.4 and r["b"] == 0.6 and r["diff"] == pytest.approx(0.2)
    assert r["b_only"] == 4 and r["a_only"] == 2 and r["mcnemar_p"] == pytest.approx(mcnemar_exact(4, 2))
    assert r["ci_low"] <= 0.2 <= r["ci_high"]
    assert paired(a, b) == r  # seeded


def test_compare_per_suite_then_pooled():
    a = [rec("test", "t", True), rec("novel", "n", False), rec("bfcl:multiple", "m", False)]
    b = [rec("test", "t", True), rec("novel", "n", True), rec("bfcl:multiple", "m", True)]
    out = compare(a, b)
    assert list(out) == ["test", "novel", "bfcl:multiple", "held_out", "bfcl"]
    assert out["held_out"]["n"] == 2 and out["held_out"]["b_only"] == 1 and out["bfcl"]["diff"] == 1.0
