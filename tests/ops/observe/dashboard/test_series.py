"""What the charts mean, without a browser: per-version means, staleness against the learner's timeline, gaps,
the held-out probe by version with its interval and its paired difference from v0."""

import pytest

from ops.observe.dashboard.series import build_charts, moving_mean, probe, staleness, versions, zero_variance
from ops.experiments.eval.stats import wilson
from ops.experiments.eval.suite import ItemRecord
from ops.observe.probe_rounds import summarise_round
from ops.observe.redis_view import Snapshot, parse_records, parse_rounds
from slca.contracts.stats import LearnerStepStats


def reward(ts, version, exec_=0.5, pref=0.5, turns=1.0):
    return {"exec": exec_, "pref": pref, "tool_turns": turns, "policy_version": version, "ts": ts}


def step(ts, version, zero_var=None):
    return {"step": version, "version": version, "loss": 0.1, "kl": 0.01, "ts": ts, "zero_var": zero_var or {}}


def test_empty_snapshot_gives_empty_series():
    charts = build_charts(Snapshot()).to_json()
    assert all(series["x"] == [] for series in charts.values())


@pytest.mark.parametrize("values,k,expected", [([], 3, []), ([1, 2, 3, 4], 2, [1, 1.5, 2.5, 3.5]), ([4, 0], 5, [4, 2])])
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


def test_learner_rows_collect_zero_variance_fields(caplog):
    entries = [
        (
            b"1-0",
            {
                b"step": b"3",
                b"version": b"2",
                b"ts": b"5.0",
                b"zero_var/exec": b"0.5",
                b"zero_var/pref": b"0",
                b"loss": b"0.1",
            },
        ),
        (b"2-0", {b"step": b"4", b"version": b"2", b"ts": b"6.0", b"zero_var/pref": b"bad"}),
    ]
    (row,) = parse_records(entries, LearnerStepStats)  # the malformed one is skipped, with a warning
    assert row["zero_var"] == {"exec": 0.5, "pref": 0.0} and row["step"] == 3 and row["groups"] is None
    assert "2-0" in caplog.text and "zero_var.pref" in caplog.text


def probe_round(version, solved, base=None, started_at=0.0) -> dict:
    """A round exactly as the probe publishes it: 10 held-out tasks (the first `solved` succeed), answered by
    `version` (an int, or a list: a swap mid-round), paired with `base`'s records (None: it is v0)."""
    versions = version if isinstance(version, list) else [version]
    recs = [
        ItemRecord(
            "test",
            f"t{i}",
            success=i < solved,
            exec=float(i < solved),
            pref=0.1,
            policy_version=versions[i % len(versions)],
        )
        for i in range(10)
    ]
    r = summarise_round(recs, base, None if base is None else 0, started_at, "greedy", versions[0])
    return {**r.to_json(), "_records": recs}


def published(*rounds) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "_records"} for r in rounds]


def test_probe_by_median_version_with_interval_and_legend_columns():
    v0 = probe_round([0, 1, 1, 0], 2)
    rounds = published(probe_round([10, 10, 11], 5, v0["_records"]), v0, probe_round([20, 21, 21], 8, v0["_records"]))
    s = build_charts(Snapshot(probe=rounds)).probe
    # x = the round's median_low served version, in version order (uPlot needs ascending x)
    assert s.x == [0.0, 10.0, 21.0]
    assert s.ys["held-out success"] == [0.2, 0.5, 0.8]
    assert s.ys["95% low"] == pytest.approx([wilson(k, 10)[0] for k in (2, 5, 8)])
    assert s.ys["95% high"] == pytest.approx([wilson(k, 10)[1] for k in (2, 5, 8)])
    assert s.ys["BFCL success"] == [None, None, None] and s.ys["pref"] == pytest.approx([0.1] * 3)
    assert (
        s.extra["n"] == [10, 10, 10] and s.extra["version_min"] == [0, 10, 20] and s.extra["version_max"] == [1, 11, 21]
    )
    assert s.extra["diff"] == pytest.approx([0.0, 0.3, 0.6]) and s.extra["mcnemar_p"][2] == pytest.approx(2 / 2**6)


def test_probe_headline_is_the_latest_rounds_paired_difference_from_v0():
    v0 = probe_round(0, 3)
    s = probe(published(v0, probe_round(30, 5, v0["_records"]), probe_round(60, 9, v0["_records"])))
    assert s.meta["version"] == 60 and s.meta["baseline_version"] == 0 and list(s.meta["vs_v0"]) == ["held_out", "test"]
    d = s.meta["vs_v0"]["held_out"]
    assert (d["a"], d["b"], d["b_only"], d["a_only"]) == (0.3, 0.9, 6, 0) and d["diff"] == pytest.approx(0.6)
    assert d["ci_low"] > 0 and d["mcnemar_p"] == pytest.approx(2 / 2**6)
    assert probe([]).meta == {}


def test_probe_skips_entries_that_are_not_rounds():
    good = published(probe_round(3, 5))[0]
    bad = [
        {"version": 3, "exec_mean": 0.5, "success": 0.5},  # a round of the sampled probe (schema 1)
        {**good, "suites": {"held_out": {**good["suites"]["held_out"], "success": float("nan")}}},
        {**good, "version": "3"},
        {k: v for k, v in good.items() if k != "vs_v0"},
        ["not", "a", "round"],
    ]
    s = probe([*bad, good])
    assert s.x == [3.0] and s.ys["held-out success"] == [0.5]


def test_probe_rounds_sharing_a_version_keep_their_order():
    s = probe(published(probe_round(5, 1, started_at=1), probe_round(2, 9), probe_round(5, 3)))
    assert s.x == [2.0, 5.0, 5.0] and s.ys["held-out success"] == [0.9, 0.1, 0.3]


def test_parse_rounds_oldest_first_skipping_bad_entries():
    newest_first = [
        (b"3-0", {b"json": b'{"version": 3}'}),
        (b"2-0", {b"json": b"{broken"}),
        (b"1-0", {b"other": b"x"}),
        (b"0-0", {"json": '{"version": 0}'}),
    ]
    assert parse_rounds(newest_first) == [{"version": 0}, {"version": 3}]
