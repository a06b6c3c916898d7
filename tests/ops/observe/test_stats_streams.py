"""The stats streams end to end: each writer writes the contract's record under the contract's cap, the reader
fetches no more than the writers keep, and a malformed entry is skipped with a warning instead of breaking a view."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import redis

from learner.checkpoint import LearnerState
from learner.loop import record_step
from learner.step_stats import StepStats
from learner.trainer import StepReport
from ops.observe import redis_view, reward_curve
from ops.observe.dashboard import app as dashboard_app
from ops.observe.probe_rounds import HEADLINE, ProbeRound
from ops.observe.redis_view import read_rounds, read_snapshot
from slca.contracts import ContractError, Streams
from slca.contracts.queues import STATS_PROBE
from slca.contracts.stats import (
    PROBE_READ_MAX,
    STATS_MAXLEN,
    STATS_READ_DEFAULT,
    STATS_READ_MAX,
    LearnerStepStats,
    RewardStats,
)
from workers.settings import WorkerSettings


class RecordingClient:
    def __init__(self):
        self.calls = []

    def xadd(self, name, fields, maxlen=None, approximate=False):
        self.calls.append((name, fields, maxlen, approximate))


def test_the_learner_writes_its_step_record_capped_at_the_shared_maxlen(tmp_path):
    client = RecordingClient()
    ctx = SimpleNamespace(
        metrics=SimpleNamespace(observe_step=lambda report: None),
        client=client,
        streams=Streams("p"),
        run_dir=tmp_path,
    )
    stats = StepStats.from_log(
        {"all/kl": 0.02, "all/clip_frac": 0.1, "all/tokens": 9, "estimator/zero_variance/exec": 1.0}
    )
    report = StepReport(5, 0.3, 100, 120, 1.0, 0.1, ["g1", "g2"], 0, stats)
    group = SimpleNamespace(policy_version_min=1, rewards=[SimpleNamespace(exec=1.0)], size=1)
    record_step(ctx, LearnerState(step=5, version=2), report, [SimpleNamespace(group=group)] * 2, None)
    ((name, fields, maxlen, approximate),) = client.calls
    assert name == "p:stats:learner" and maxlen == STATS_MAXLEN and approximate
    step = LearnerStepStats.from_fields(fields)
    assert (step.step, step.version, step.loss, step.kl, step.clip_frac, step.groups) == (5, 2, 0.3, 0.02, 0.1, 2)
    assert step.zero_var == {"exec": 0.5}


def test_writers_cap_and_readers_fetch_from_the_same_constants():
    # writers: the workers' rewards stream (the learner's: above), the readers' most rows: the dashboard, the curve
    assert WorkerSettings().stats_maxlen == STATS_MAXLEN == STATS_READ_MAX
    assert dashboard_app.MAX_ROWS == STATS_READ_MAX and reward_curve.REWARD_HISTORY == STATS_READ_MAX
    for reader in (read_snapshot, redis_view.read_snapshot_async):
        defaults = inspect.signature(reader).parameters
        assert defaults["n_rewards"].default == defaults["n_learner"].default == STATS_READ_DEFAULT
    assert inspect.signature(read_rounds).parameters["count"].default == PROBE_READ_MAX


def test_the_reader_skips_a_malformed_entry_with_a_warning(redis_url, caplog):
    client = redis.Redis.from_url(redis_url)
    rewards, learner = Streams().stats(RewardStats.STREAM), Streams().stats(LearnerStepStats.STREAM)
    good = RewardStats(exec=1.0, pref=0.5, tool_turns=1, policy_version=3, task_id="t", ts=10.0)
    client.xadd(rewards, good.to_fields())
    client.xadd(rewards, {**good.to_fields(), "exec": "oops"})
    client.xadd(rewards, {"exec": 0.0, "pref": 0.0, "tool_turns": 0, "policy_version": 4, "ts": 11.0})  # pre-schema
    client.xadd(learner, LearnerStepStats(step=1, version=1, ts=12.0, zero_var={"exec": 0.5}).to_fields())
    client.xadd(learner, {"step": "1", "version": "1"})  # no ts
    snapshot = read_snapshot(client)
    assert [r["policy_version"] for r in snapshot.rewards] == [3, 4] and "task_id" not in snapshot.rewards[0]
    assert [(r["step"], r["zero_var"]) for r in snapshot.learner] == [(1, {"exec": 0.5})]
    assert "stats:rewards: 1 malformed" in caplog.text and "exec" in caplog.text
    assert "stats:learner: 1 malformed" in caplog.text


def probe_round(version: int) -> ProbeRound:
    suites = {HEADLINE: {"n": 10, "success": 0.5}}
    return ProbeRound(version, version, version, 1.0, 2.0, "greedy", 10, 0, f"probe/v{version}.jsonl", suites, {}, 0)


def test_a_probe_round_round_trips_through_its_fields():
    round_ = probe_round(3)
    assert ProbeRound.from_fields(round_.to_fields()) == round_
    assert ProbeRound.from_fields({k.encode(): v.encode() for k, v in round_.to_fields().items()}) == round_
    assert ProbeRound.from_fields({"json": '{"schema": 1, "version": 0}'}) is None  # an older schema: skipped
    with pytest.raises(ContractError, match="not JSON"):
        ProbeRound.from_fields({"json": "{broken"})


def test_the_probe_reader_skips_a_malformed_round_with_a_warning(redis_url, caplog):
    client = redis.Redis.from_url(redis_url)
    stream = Streams().stats(STATS_PROBE)
    client.xadd(stream, probe_round(1).to_fields())
    client.xadd(stream, {"json": "{broken"})
    client.xadd(stream, probe_round(2).to_fields())
    assert [r["version"] for r in read_rounds(client, stream)] == [1, 2]
    assert "stats:probe: 1 malformed" in caplog.text
