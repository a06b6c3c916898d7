"""The online learner (`slca learn`): groups from Redis → step → publish → checkpoint → acknowledge.

Order per step, and why:
1. train on `groups_per_step` fresh groups (duplicates of applied ids are acknowledged and skipped;
   groups staler than `max_staleness` versions are dropped and counted);
2. publish vN when due (before the checkpoint: a crash in between re-runs the step from the old checkpoint
   and publishes a *higher* version, never the same number twice);
3. checkpoint when due (model, optimizer, step, version, consumed ids), atomically;
4. XACK the entries whose steps are now in a checkpoint — never earlier, so nothing accepted is lost;
5. stats stream entry, metrics log line, Prometheus.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from learner.checkpoint import LearnerState, load_checkpoint, save_checkpoint
from learner.consumer import GroupConsumer, GroupEntry, consumer_name
from learner.metrics import LearnerMetrics
from learner.model import load_policy, load_reference
from learner.settings import LearnerSettings
from learner.trainer import StepInterrupted, StepReport, Trainer
from slca.config import CommonSettings
from slca.contracts import Streams
from slca.contracts.stats import STATS_MAXLEN, LearnerStepStats
from slca.weights import publish

log = logging.getLogger("slca.learner")


@dataclass
class LoopContext:
    settings: LearnerSettings
    common: CommonSettings
    client: redis.Redis
    run_dir: Path
    weights_dir: Path
    model_dir: Path
    metrics: LearnerMetrics
    stop: threading.Event = field(default_factory=threading.Event)
    transport: Any = None
    """How servers reach the published versions (`slca.weights.for_learner`, connected); None: the disk, in place."""

    @property
    def streams(self) -> Streams:
        return Streams(self.common.stream_prefix)


def run_dir_of(settings: LearnerSettings, common: CommonSettings) -> Path:
    """Checkpoints and logs. Under torchrun each rank keeps its own (it consumes its own groups)."""
    root = Path(settings.run_dir or Path(common.data_dir) / "learner")
    return root / f"rank{os.environ['RANK']}" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else root


def is_main_rank() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def run_learner(ctx: LoopContext) -> LearnerState:
    """The plan: restore, then loop {collect groups, step, publish, checkpoint, ack, report}."""
    s = ctx.settings
    policy = load_policy(ctx.model_dir, s)
    ref = load_reference(ctx.model_dir, policy.device) if s.loss.kl_beta > 0 else None
    trainer = Trainer(policy, s, ref)
    state = load_checkpoint(ctx.run_dir, policy.model, trainer.optimizer) or LearnerState()
    trainer.step = state.step
    consumed = set(state.consumed)
    ctx.metrics.published_version.set(state.version)
    consumer = GroupConsumer(ctx.client, ctx.streams, s.consumer_group, consumer_name(s.consumer_name), s.claim_idle_ms)
    unacked: list[bytes] = []
    log.info("learner: step %d, version %d, %d groups consumed so far", state.step, state.version, len(consumed))
    # A stop (ctx.stop) is honoured within about `block_ms` while waiting for groups and between the groups of a
    # step; a step cut short changes no weight, and nothing is acknowledged that is not in a checkpoint.
    while not ctx.stop.is_set() and not (s.max_steps and state.step >= s.max_steps):
        entries = collect(ctx, consumer, state, consumed, unacked)
        if not entries:
            continue
        try:
            report = trainer.train_step([e.group for e in entries], should_stop=ctx.stop.is_set)
        except StepInterrupted as exc:
            log.info(
                "learner: stop: step %d abandoned (%s); its %d groups stay pending for the next start",
                state.step + 1,
                exc,
                len(entries),
            )
            break
        if ctx.stop.is_set() and not (s.max_steps and report.step >= s.max_steps):
            # a stop during the step: the step is not published or checkpointed (that takes seconds), so its
            # groups are not acknowledged either; the next start resumes from the last checkpoint and applies them
            log.info(
                "learner: stop: step %d not kept; its %d groups stay pending for the next start",
                report.step,
                len(entries),
            )
            break
        state.step = report.step
        state.consumed.extend(e.group.group_id for e in entries)
        consumed.update(e.group.group_id for e in entries)
        unacked.extend(e.entry_id for e in entries)
        # a step whose groups all had zero advantage changed no weight: publishing it would only make the
        # servers swap to identical weights and split the reward-per-version curve into more, smaller points
        published = maybe_publish(ctx, policy, state) if report.updated else None
        if state.step % s.checkpoint_every == 0 or (s.max_steps and state.step >= s.max_steps):
            save_checkpoint(ctx.run_dir, state, policy.model, trainer.optimizer)
            consumer.ack(unacked)
            unacked.clear()
        record_step(ctx, state, report, entries, published)
    return state


def collect(
    ctx: LoopContext, consumer: GroupConsumer, state: LearnerState, consumed: set[str], unacked: list[bytes]
) -> list[GroupEntry]:
    """Up to `groups_per_step` usable groups; blocks at most ~block_ms per read so `stop` is honoured."""
    want = ctx.settings.groups_per_step
    usable: list[GroupEntry] = []
    while len(usable) < want and not ctx.stop.is_set():
        consumer.keep_alive()  # groups held until a checkpoint must not look idle to another learner
        entries = consumer.read(want - len(usable), ctx.settings.block_ms)
        if not entries:
            if not usable:
                return []
            continue
        for entry in entries:
            if entry.group is None:
                consumer.dead_letter(entry)
            elif entry.group.group_id in consumed or any(u.group.group_id == entry.group.group_id for u in usable):
                consumer.ack([entry.entry_id])  # redelivered after a crash, already applied: never twice
            elif (stale := state.version - entry.group.policy_version_min) > ctx.settings.max_staleness:
                ctx.metrics.stale_dropped.inc()
                state.dropped_stale += 1
                consumed.add(entry.group.group_id)
                state.consumed.append(entry.group.group_id)
                unacked.append(entry.entry_id)  # acked with the next checkpoint, like applied ones
            else:
                ctx.metrics.staleness.set(stale)
                usable.append(entry)
    return usable if len(usable) == want else []


def maybe_publish(ctx: LoopContext, policy, state: LearnerState):
    s = ctx.settings
    if state.step % s.publish_every:
        return None
    if not is_main_rank():  # rank 0 publishes; the others follow its number for their staleness checks
        latest = ctx.client.get(ctx.streams.weights_latest)
        if latest:
            state.version = max(state.version, json.loads(latest)["version"])
        return None
    manifest, seconds = publish(
        policy.model,
        ctx.model_dir,
        ctx.weights_dir,
        state.version,
        state.step,
        str(ctx.model_dir),
        ctx.client,
        ctx.streams,
        s.keep_versions,
        weights_key=ctx.common.weights_key,
        transport=ctx.transport,
    )
    state.version = manifest.version
    ctx.metrics.published_version.set(manifest.version)
    ctx.metrics.publish_seconds.observe(seconds)
    return manifest, seconds


def step_stats(state: LearnerState, report: StepReport, groups: int, ts: float) -> LearnerStepStats:
    """The step's `stats:learner` record (its one writer): the step's figures (`StepStats`) converted once. Per
    channel of the estimator, `zero_var` is the share of the step's groups with zero variance there."""
    stats = report.stats
    return LearnerStepStats(
        step=state.step,
        version=state.version,
        loss=report.loss,
        kl=stats.kl,
        clip_frac=stats.clip_frac,
        groups=groups,
        ts=ts,
        zero_var={c: f.zero_variance / max(1, groups) for c, f in stats.estimator.channels.items()},
    )


def record_step(ctx: LoopContext, state: LearnerState, report: StepReport, entries, published) -> None:
    ctx.metrics.observe_step(report)
    ts = time.time()
    stats = step_stats(state, report, len(entries), ts)
    ctx.client.xadd(ctx.streams.stats(stats.STREAM), stats.to_fields(), maxlen=STATS_MAXLEN, approximate=True)
    line = {
        "step": state.step,
        "version": state.version,
        "loss": report.loss,
        "tokens": report.tokens,
        "tokens_per_s": report.tokens_per_second,
        "step_s": report.seconds,
        "advantage_s": report.advantage_seconds,
        "skipped_zero": report.skipped_zero,
        "groups": report.group_ids,
        "group_versions": [e.group.policy_version_min for e in entries],
        "exec_mean": sum(r.exec for e in entries for r in e.group.rewards) / sum(e.group.size for e in entries),
        "published": published[0].version if published else None,
        "publish_s": published[1] if published else None,
        "ts": ts,
        **report.stats.to_log(),
    }
    with open(ctx.run_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")
    log.info(
        "step %d v%d loss %.4f tokens %d %.1f tok/s",
        state.step,
        state.version,
        report.loss,
        report.tokens,
        report.tokens_per_second,
    )
