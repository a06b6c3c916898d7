"""`metrics.jsonl` lines are typed (`learner.step_line`): the keys of the file format, the figures from
`StepStats.to_log()`, one line per append."""

from __future__ import annotations

import json

from learner.step_line import METRICS_FILE, FollowerLine, StepLine, append_line
from learner.step_stats import ChannelStats, EstimatorStats, GroupCounts, StepStats

PLACE_KEYS = {
    "step",
    "version",
    "loss",
    "tokens",
    "tokens_per_s",
    "step_s",
    "advantage_s",
    "skipped_zero",
    "groups",
    "group_versions",
    "exec_mean",
    "published",
    "publish_s",
    "ts",
}
"""The keys committed runs' metrics.jsonl files carry besides the figures (the file format before the type)."""


def _line(published: int | None = 4) -> StepLine:
    stats = StepStats(
        None, EstimatorStats({"exec": ChannelStats(1.0, 4.0)}), grad_norm=2.5, groups=GroupCounts(2), lr=1e-5
    )
    return StepLine(
        step=3,
        version=4,
        loss=0.25,
        tokens=96,
        tokens_per_s=120.0,
        step_s=0.8,
        advantage_s=0.01,
        skipped_zero=1,
        groups=["g1", "g2"],
        group_versions=[2, 3],
        exec_mean=0.5,
        published=published,
        publish_s=0.3 if published else None,
        ts=1000.0,
        stats=stats,
    )


def test_a_line_keeps_the_file_format_and_takes_its_figures_from_the_step_stats():
    line = _line()
    out = line.to_json()
    assert set(out) == PLACE_KEYS | set(line.stats.to_log())
    assert (out["step"], out["version"], out["groups"], out["published"]) == (3, 4, ["g1", "g2"], 4)
    assert out["grad_norm"] == 2.5 and out["lr"] == 1e-5 and out["estimator/zero_variance/exec"] == 1.0
    assert StepStats.from_log(out).grad_norm == 2.5  # the figures' one reader reads them back


def test_append_writes_one_json_line_per_step(tmp_path):
    append_line(tmp_path, _line())
    append_line(tmp_path, _line(published=None))
    append_line(tmp_path, FollowerLine(step=3, rank=1, trained=["g2"], loss=0.5, ts=1001.0))
    rows = [json.loads(x) for x in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 3, 3]
    assert rows[0]["published"] == 4 and rows[1]["published"] is None and rows[1]["publish_s"] is None
    assert rows[2] == {"step": 3, "rank": 1, "trained": ["g2"], "loss": 0.5, "ts": 1001.0}
