"""A restarted learner keeps learning: it announces again the version it resumes at (or publishes its weights as a
new one when that version cannot be announced as it was), acknowledges and counts groups too stale to apply instead
of holding them forever, and survives a Redis that answers OOM to its announcement (`noeviction` at the bound)."""

from __future__ import annotations

import threading

import pytest
import redis

from learner.checkpoint import LearnerState, save_checkpoint
from learner.loop import run_learner
from slca.contracts import Streams, WeightManifest, encode_entry
from slca.contracts.wire import load_json
from slca.weights import WeightsSettings
from tests.learner.two_tools import TwoToolTask
from tests.support.weights import publish_version


def _resume_at(ctx, version: int, key: str | None) -> WeightManifest:
    """What a learner stopped at `version` leaves: its checkpoint (step = version) and its last version on disk,
    signed with `key`."""
    from learner.model import load_policy
    from learner.trainer import Trainer

    policy = load_policy(ctx.model_dir, ctx.settings)
    trainer = Trainer(policy, ctx.settings)
    save_checkpoint(ctx.run_dir, LearnerState(step=version, version=version), policy.model, trainer.optimizer)
    return publish_version(ctx.model_dir, ctx.weights_dir, version, 1.0, key=key)


def _latest(client, streams: Streams) -> WeightManifest | None:
    raw = client.get(streams.weights_latest)
    return load_json(WeightManifest, raw) if raw else None


def _run_for(ctx, seconds: float):
    threading.Timer(seconds, ctx.stop.set).start()
    return run_learner(ctx)


def test_a_learner_with_only_stale_groups_announces_its_version_and_acks_and_counts_them(
    loop_context, rollout_model, redis_client
):
    """`make run` restarted at v28 with serve on v0: every new group came from v0, was dropped as stale and left
    pending; the learner never stepped, never published, and serve never left v0."""
    model, tokenizer = rollout_model
    ctx = loop_context(max_staleness=4)
    stored = _resume_at(ctx, 28, key=None)
    task = TwoToolTask(tokenizer, seed=4)
    for i in range(3):  # sampled by a server still on v0
        redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 0, size=4, index=i), id=f"old{i}"))
    state = _run_for(ctx, 3.0)

    assert state.step == 28 and state.version == 28 and state.dropped_stale == 3
    assert ctx.metrics.stale_dropped._value.get() == 3
    assert redis_client.xpending(ctx.streams.groups, "learner")["pending"] == 0  # acknowledged, not held
    latest = _latest(redis_client, ctx.streams)  # announced again: a server started meanwhile loads v28
    assert latest is not None and latest.version == 28 and latest.sha256 == stored.sha256


def test_a_version_signed_with_an_old_key_is_replaced_by_a_new_version(loop_context, redis_client):
    ctx = loop_context()
    ctx.weights = WeightsSettings(key="the key of this run")
    _resume_at(ctx, 28, key="the key of the last run")  # servers with today's key would refuse it
    state = _run_for(ctx, 1.0)

    latest = _latest(redis_client, ctx.streams)
    assert state.version == 29 and latest is not None and latest.version == 29
    assert latest.signature_valid("the key of this run") and latest.verify() == []


def test_an_oom_answer_to_the_announcement_does_not_end_the_learner(loop_context, rollout_model, redis_client):
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=5)
    redis_client.xadd(Streams("slca").groups, encode_entry(task.group(model, 0, size=4, index=0), id="g0"))
    redis_client.xgroup_create(Streams("slca").groups, "learner", id="0")
    redis_client.config_set("maxmemory", "1")  # full: every write that needs memory is refused (noeviction)
    try:
        state = run_learner(loop_context(max_steps=1))  # steps, publishes v1 to disk, cannot announce it
        full = _latest(redis_client, Streams("slca"))
    finally:
        redis_client.config_set("maxmemory", "0")
    assert state.step == 1 and state.version == 1 and full is None
    assert redis_client.xpending(Streams("slca").groups, "learner")["pending"] == 0  # the step's ack went through

    run_learner(loop_context(max_steps=1))  # the next start announces what the last one could not
    latest = _latest(redis_client, Streams("slca"))
    assert latest is not None and latest.version == 1


class _FullRedis:
    """Refuses the announcement's SET `refusals` times (OOM), then takes it."""

    def __init__(self, refusals: int):
        self.refusals, self.sets, self.published = refusals, [], []

    def set(self, key, value):
        if self.refusals:
            self.refusals -= 1
            raise redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
        self.sets.append(value)

    def publish(self, channel, value):
        self.published.append(value)


def test_the_announcer_tries_again_after_a_back_off_and_announces_the_newest():
    from learner.announce import Announcer

    now = [0.0]
    client = _FullRedis(refusals=3)
    announcer = Announcer(client, Streams("t"), retry_s=1.0, retry_max_s=4.0, clock=lambda: now[0])
    manifest = WeightManifest(version=1, path="/w/v1", sha256={"model.safetensors": "0" * 64}, base_model="b")
    assert not announcer.announce(manifest)  # refused: kept, no exception
    assert not announcer.flush() and client.refusals == 2  # within the back-off: not tried
    now[0] = 1.0
    assert not announcer.flush() and announcer.next_try == pytest.approx(3.0)  # refused again: 2 s
    newer = manifest.model_copy(update={"version": 2})
    assert not announcer.announce(newer)  # a newer version replaces it, tried at once (refused a third time)
    now[0] = 2.0
    assert announcer.flush() and announcer.pending is None
    assert [load_json(WeightManifest, v).version for v in client.sets] == [2] and len(client.published) == 1
