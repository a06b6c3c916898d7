"""The learner's typed step figures: merging micro-batches and groups, the flat per-step line (a file format that
committed runs use), and the channels an estimator declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from learner.advantages import CHANNELS, ESTIMATORS, estimate, register_estimator
from learner.step_stats import ChannelStats, EstimatorStats, GroupCounts, LossSums, StepStats, TokenFigures
from slca.contracts import SegmentKind

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted((ROOT / "bench" / "learning").glob("*/*.jsonl"))


def sums(tokens: int, adv: float, kl: float | None = None) -> TokenFigures:
    return TokenFigures(tokens=tokens, adv=adv, adv_abs=abs(adv), clip=1.0, ratio=float(tokens), logprob_gap=0.0, kl=kl)


def test_micro_batch_sums_merge_then_divide_by_the_steps_tokens():
    a = LossSums(sums(2, 1.0), {SegmentKind.TOOL_CALL: sums(2, 1.0)}, ratio_max=1.5, ratio_min=0.9)
    b = LossSums(sums(6, -3.0), {SegmentKind.SUMMARY: sums(6, -3.0)}, ratio_max=1.2, ratio_min=0.5)
    m = a.merge(b).means()
    assert (m.all.tokens, m.all.adv, m.all.adv_abs, m.all.clip) == (8, -0.25, 0.5, 0.25)
    assert (m.ratio_max, m.ratio_min) == (1.5, 0.5) and m.all.kl is None and m.all.entropy is None
    assert list(m.by_kind) == [SegmentKind.TOOL_CALL, SegmentKind.SUMMARY]
    assert m.by_kind[SegmentKind.SUMMARY].adv == -0.5


def test_channels_add_over_the_steps_groups():
    one = EstimatorStats({"exec": ChannelStats(1.0, 3.0), "exec_turn": ChannelStats(2.0)})
    two = EstimatorStats({"exec": ChannelStats(0.0, 4.0), "pref": ChannelStats(1.0, 2.0)})
    total = sum([one, two], EstimatorStats())
    assert total.channels == {
        "exec": ChannelStats(1.0, 7.0),
        "exec_turn": ChannelStats(2.0, None),
        "pref": ChannelStats(1.0, 2.0),
    }


def test_a_skipped_step_has_no_loss_figures_and_zero_kl():
    stats = StepStats(loss=None, estimator=EstimatorStats({"exec": ChannelStats(1.0, 4.0)}))
    assert (stats.kl, stats.clip_frac, stats.adv_abs_mean(SegmentKind.TOOL_CALL)) == (0.0, 0.0, None)
    line = stats.to_log()
    assert "all/tokens" not in line and line["estimator/zero_variance/exec"] == 1.0
    assert StepStats.from_log(line) == stats


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_committed_runs_read_back_and_write_the_same_keys(path):
    """The flat layout is a file format: every figure of a committed `slca train` line reads back typed and writes
    out under the same key with the same value."""
    for raw in path.read_text().splitlines():
        line = json.loads(raw)
        out = StepStats.from_log(line).to_log()
        for key, value in out.items():
            if key in line:
                assert value == pytest.approx(line[key]), key
        figures = {k for k in line if "/" in k or k == "grad_norm"}
        assert figures <= set(out), figures - set(out)


def test_an_estimator_reports_only_the_channels_it_declared(monkeypatch):
    assert CHANNELS["slca"] == {"exec", "pref", "exec_turn"} and set(CHANNELS) == set(ESTIMATORS)

    def sloppy(batch, config):
        return [], EstimatorStats({"exce": ChannelStats(0.0, 2.0)})

    monkeypatch.setattr("learner.advantages.registry.ESTIMATORS", {**ESTIMATORS})
    monkeypatch.setattr("learner.advantages.registry.CHANNELS", {**CHANNELS})
    register_estimator("sloppy", channels=("exec",))(sloppy)
    with pytest.raises(ValueError, match=r"'sloppy' reported channels \['exce'\]"):
        estimate("sloppy", None, None)


def test_the_line_has_the_advantage_spread_per_kind_and_the_zero_variance_share_per_channel():
    adv = [1.0, -1.0, 3.0]
    figures = TokenFigures(
        tokens=3, adv=sum(adv), adv_abs=5.0, clip=0.0, ratio=3.0, logprob_gap=0.0, adv_sq=sum(a * a for a in adv)
    )
    loss = LossSums(figures, {SegmentKind.TOOL_CALL: figures}, ratio_max=1.0, ratio_min=1.0).means()
    groups = GroupCounts(given=5, screened=1, trained=3, trajectories=12, success_sum=9.0, success_members=20)
    stats = StepStats(loss, EstimatorStats({"exec": ChannelStats(2.0, 16.0)}), grad_norm=3.5, groups=groups, lr=1e-5)
    line = stats.to_log()
    assert line["all/adv_std"] == pytest.approx((8 / 3) ** 0.5) == line["tool_call/adv_std"]
    assert line["estimator/zero_variance_share/exec"] == 0.5  # 2 of the 4 groups the estimator saw
    counts = {"groups_in": 5, "groups_screened": 1, "groups_trained": 3, "trajectories_trained": 12}
    assert {key: line[key] for key in counts} == counts
    assert (line["success_mean"], line["lr"], line["tokens_trained"], line["grad_norm"]) == (0.45, 1e-5, 3, 3.5)
    back = StepStats.from_log(line)
    assert back.groups == groups and back.lr == 1e-5 and back.loss.all.adv_sq == pytest.approx(11 / 3)
    assert back.to_log() == line


def test_success_mean_is_left_out_when_no_member_carries_success():
    line = StepStats(None, EstimatorStats(), groups=GroupCounts(given=2, screened=0)).to_log()
    assert "success_mean" not in line and line["groups_in"] == 2 and "lr" not in line
    assert GroupCounts(1, 0, 1, 2) + GroupCounts(2, 1, 1, 4, 1.0, 4) == GroupCounts(3, 1, 2, 6, 1.0, 4)
