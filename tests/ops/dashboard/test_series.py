"""What the charts mean, without a browser: per-version means, staleness against the learner's timeline, gaps."""

import pytest

from ops.dashboard.series import build_charts, moving_mean, staleness, versions, zero_variance
from ops.redis_view import LEARNER_FIELDS, ZERO_VAR_PREFIX, Snapshot, parse_stats


def reward(ts, version, exec_=0.5, pref=0.5, turns=1.0):
    return {"exec": exec_, "pref": pref, "tool_turns": turns, "policy_version": version, "ts": ts}


def step(ts, version, zero_var=None):
    return {"step": version, "version": version, "loss": 0.1, "kl": 0.01, "ts": ts, "zero_var": zero_var or {}}


def test_empty_snapshot_gives_empty_series():
    charts = build_charts(Snapshot()).to_json()
    assert all(series["x"] == [] for series in charts.values())


@pytest.mark.parametrize("values,k,expected", [([], 3, []), ([1, 2, 3, 4], 2, [1, 1.5, 2.5, 3.5]),
                                                ([4, 0], 5, [4, 2])])  # fmt: skip
def test_moving_mean(values, k, expected):
    assert moving_mean(values, k) == expected


def test_reward_by_version_in_version_order():
    rows = [reward(10, 1, 0.8, 1.0), reward(11, 0, 0.2, -0.5), reward(12, 1, 0.6, 0.5), reward(13, 0, 0.4, 0.0)]
    s = build_charts(Snapshot(rewards=rows)).reward_by_version
    assert s.x == [0.0, 1.0]
    assert s.ys["execution"] == pytest.approx([0.3, 0.7]) and s.ys["preference"] == pytest.approx([-0.25, 0.75])
    assert s.extra["n"] == [2, 2]


def test_staleness_is_learner_version_at_scoring_minus_sampling_version():
    learner = [step(100, 1), step(200, 2), step(300, 4)]
    rows = [reward(50, 0), reward(150, 0), reward(250, 2), reward(260, 1), reward(310, 2), reward(320, 5)]
    s = staleness(rows, learner)
    # scored before the first learner row in view: unknown, no point; a sampler newer than the row: 0
    assert s.x == [150, 250, 260, 310, 320]
    assert s.ys["staleness"] == [1, 0, 1, 2, 0]


def test_staleness_without_learner_rows_is_empty():
    assert staleness([reward(1, 0)], []).x == []


def test_zero_variance_channels_and_gaps():
    learner = [step(1, 1), step(2, 2, {"exec": 0.5, "pref": 0.0}), step(3, 3, {"exec": 0.25})]
    s = zero_variance(learner)
    assert s.x == [2, 3]  # rows written before the learner recorded shares have none
    assert s.ys == {"exec": [0.5, 0.25], "pref": [0.0, None]}


def test_versions_share_one_time_column_with_gaps():
    s = versions([reward(10, 0), reward(30, 1)], [step(20, 1)])
    assert s.x == [10, 20, 30]
    assert s.ys == {"served (sampled by)": [0, None, 1], "learner": [None, 1, None]}


def test_series_ignore_rows_without_time_and_sort_by_time():
    rows = [reward(20, 0, turns=2.0), reward(None, 0), reward(10, 0, turns=0.0)]
    s = build_charts(Snapshot(rewards=rows)).tool_turns
    assert s.x == [10, 20] and s.ys["per episode"] == [0.0, 2.0]


def test_learner_rows_collect_zero_variance_fields():
    entries = [(b"1-0", {b"step": b"3", b"version": b"2", b"ts": b"5.0", b"zero_var/exec": b"0.5",
                         b"zero_var/pref": b"bad", b"loss": b"0.1"})]  # fmt: skip
    (row,) = parse_stats(entries, LEARNER_FIELDS, ZERO_VAR_PREFIX)
    assert row["zero_var"] == {"exec": 0.5, "pref": None} and row["step"] == 3 and row["groups"] is None
