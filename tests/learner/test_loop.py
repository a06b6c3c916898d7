"""The learner loop in-process against a real Redis: stale groups dropped and counted, undecodable entries
dead-lettered, publication (files, sha256, SET + PUBLISH), stats stream, acknowledgements."""

from __future__ import annotations

import json
import threading

from learner.loop import run_learner
from slca.weights import next_version
from slca.contracts import WeightManifest, encode_entry
from slca.contracts.wire import load_json
from tests.learner.two_tools import TwoToolTask


def test_stale_groups_dropped_bad_entries_dead_lettered_versions_published(loop_context, rollout_model, redis_client):
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=2)
    ctx = loop_context(max_staleness=0, max_steps=2)
    streams = ctx.streams
    pubsub = redis_client.pubsub()
    pubsub.subscribe(streams.weights_channel)
    redis_client.xadd(streams.groups, encode_entry(task.group(model, 0, size=4, index=0), id="g0"))
    redis_client.xadd(streams.groups, {b"data": b"\x00not msgpack", b"id": b"bad"})
    redis_client.xadd(streams.groups, encode_entry(task.group(model, 0, size=4, index=1), id="g1"))  # stale after v1
    redis_client.xadd(streams.groups, encode_entry(task.group(model, 1, size=4, index=2), id="g2"))
    state = run_learner(ctx)

    assert state.step == 2 and state.version == 2 and state.dropped_stale == 1
    assert state.consumed == ["g0-v0", "g1-v0", "g2-v1"]
    lines = [json.loads(x) for x in (ctx.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [x["groups"] for x in lines] == [["g0-v0"], ["g2-v1"]]
    assert ctx.metrics.stale_dropped._value.get() == 1
    dead = redis_client.xrange(streams.dead)
    assert (
        len(dead) == 1 and b"not msgpack" in dead[0][1][b"reason"] and dead[0][1][b"source"] == streams.groups.encode()
    )
    assert redis_client.xpending(streams.groups, "learner")["pending"] == 0

    latest = load_json(WeightManifest, redis_client.get(streams.weights_latest))
    assert latest.version == 2 and latest.verify() == [] and latest.train_step == 2
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(latest.sha256)
    announced = [m for m in iter(lambda: pubsub.get_message(timeout=1.0), None) if m["type"] == "message"]
    assert [load_json(WeightManifest, m["data"]).version for m in announced] == [1, 2]
    assert len(redis_client.xrange(streams.stats("stats:learner"))) == 2
    assert next_version(ctx.weights_dir, 0) == 3  # numbers on disk are never reused


def test_stop_event_ends_an_idle_loop(loop_context):
    ctx = loop_context()
    threading.Timer(0.5, ctx.stop.set).start()
    state = run_learner(ctx)
    assert state.step == 0


def test_step_with_only_zero_advantage_groups_publishes_no_version(loop_context, rollout_model, redis_client):
    """Identical rewards in every channel: no advantage, no weight change, so no new version to swap to."""
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=3)
    ctx = loop_context(max_steps=2)
    flat = task.group(model, 0, size=4, index=0)
    flat = flat.model_copy(
        update={"rewards": [r.model_copy(update={"exec": 0.5, "pref": 0.5, "components": {}}) for r in flat.rewards]}
    )
    redis_client.xadd(ctx.streams.groups, encode_entry(flat, id="flat"))
    redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 0, size=4, index=1), id="varied"))
    state = run_learner(ctx)

    lines = [json.loads(x) for x in (ctx.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert state.step == 2 and [x["skipped_zero"] for x in lines] == [1, 0]
    assert [x["published"] for x in lines] == [None, 1] and state.version == 1


def test_steps_that_change_no_weight_are_said_in_the_log_not_silent():
    from learner.loop import IdleSteps

    idle = IdleSteps(first=3)
    said = [idle.observe(False) for _ in range(30)]
    assert [i + 1 for i, w in enumerate(said) if w] == [3, 30]  # after 3, then after 30 in a row
    assert "3 steps in a row changed no weight" in said[2] and "slca sft" in said[2]
    assert idle.observe(True) is None and [idle.observe(False) for _ in range(3)][-1]  # an update starts over


def test_the_consumed_ids_are_bounded_once_acknowledged(loop_context, rollout_model, redis_client):
    """`consumed` grew by every group for the life of the run (and its checkpoints with it): once a checkpoint's
    groups are acknowledged they are never delivered again, so beyond the groups not yet acknowledged only the newest
    `consumed_ids_kept` stay."""
    from learner.checkpoint import STATE_NAME

    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=2)
    ctx = loop_context(max_staleness=0, max_steps=2, consumed_ids_kept=1)
    redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 0, size=4, index=0), id="g0"))
    redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 0, size=4, index=1), id="g1"))  # stale
    redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 1, size=4, index=2), id="g2"))
    state = run_learner(ctx)

    assert state.step == 2 and state.dropped_stale == 1
    assert state.consumed == ["g1-v0", "g2-v1"]  # g2 not acknowledged when its checkpoint was written; g1 the margin
    latest = (ctx.run_dir / "checkpoints" / "LATEST").read_text().strip()
    saved = json.loads((ctx.run_dir / "checkpoints" / latest / STATE_NAME).read_text())["consumed"]
    assert saved == ["g1-v0", "g2-v1"]
    assert redis_client.xpending(ctx.streams.groups, "learner")["pending"] == 0


def test_kept_ids_keep_every_pending_id_and_the_newest_others():
    from learner.checkpoint import kept_ids

    ids = ["a", "b", "c", "d", "e"]
    assert kept_ids(ids, 2, {"a", "e"}) == ["a", "c", "d", "e"]
    assert kept_ids(ids, 0, set()) == []
    assert kept_ids(ids, 10, set()) == ids
