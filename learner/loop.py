"""The online learner (`slca learn`): groups from Redis → step → publish → checkpoint → acknowledge.

Order per step, and why:
1. train on `groups_per_step` fresh groups (duplicates of applied ids are acknowledged and skipped;
   groups staler than `max_staleness` versions are acknowledged at once, never applied, and counted);
2. publish vN when due (before the checkpoint: a crash in between re-runs the step from the old checkpoint
   and publishes a *higher* version, never the same number twice); its announcement is retried until Redis takes it
   (`learner.announce`: a full Redis answers OOM, which must not end the learner);
3. checkpoint when due (model, optimizer, step, version, consumed ids), atomically;
4. XACK the entries whose steps are now in a checkpoint — never earlier, so nothing accepted is lost;
5. stats stream entry, metrics log line, Prometheus.

At start the learner announces again the version it resumes at (or publishes its weights as a new one when that
version cannot be announced as it was: `resume_announcement`), so that the servers serve what the groups' staleness
is measured against: a learner at v28 facing servers at v0 would otherwise drop every group as stale and never step.

Under torchrun (`learner.ddp`) this loop is rank 0's, and it is the same loop: rank 0 alone reads the step's
groups (`groups_per_step` per rank), hands each rank its share (`learner.ddp_orders`), trains on its own while
DDP averages the gradients, and alone publishes, checkpoints (the consumed ids of every rank's groups) and
acknowledges. The other ranks only train (`learner.follower`). At start every rank takes rank 0's checkpoint
(`learner.ddp_state`), so the ranks never disagree on the weights or on what was applied: a rank that dies,
whichever, costs at most the steps since rank 0's last checkpoint, whose groups are still pending under rank 0's
stable consumer name and are applied again exactly once by the restarted group.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import redis

from learner.announce import Announcer
from learner.checkpoint import LearnerState, kept_ids, load_checkpoint, save_checkpoint
from learner.consumer import GroupConsumer, GroupEntry, consumer_name
from learner.ddp import Ranks, leave
from learner.ddp_orders import Orders
from learner.ddp_state import broadcast_training_state
from learner.interrupt import StepInterrupted
from learner.follower import follow
from learner.metrics import LearnerMetrics
from learner.model import load_policy, reference_for
from learner.settings import LearnerSettings
from learner.step_line import StepLine, append_line
from learner.trainer import StepReport, Trainer
from slca.config import CommonSettings
from slca.contracts import Streams
from slca.contracts.stats import STATS_MAXLEN, LearnerStepStats
from slca.heap import trim as trim_heap
from slca.weights import WeightsSettings, publish, reannounce_refusal, stored_manifest

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
    weights: WeightsSettings = field(default_factory=WeightsSettings)
    """`[weights]`: the key the versions are signed with, how many are kept."""

    @property
    def streams(self) -> Streams:
        return Streams(self.common.stream_prefix)


def run_dir_of(settings: LearnerSettings, common: CommonSettings) -> Path:
    """Checkpoints and logs: rank 0's (the one checkpoint, the same place with one process or N), and under
    torchrun `rank<N>/` for another rank's step log."""
    root = Path(settings.run_dir or Path(common.data_dir) / "learner")
    ranks = Ranks.from_env()
    return root if ranks.is_main else root / f"rank{ranks.rank}"


def is_main_rank() -> bool:
    return Ranks.from_env().is_main


def run_learner(ctx: LoopContext) -> LearnerState:
    """The plan: restore, then loop {collect groups, step, publish, checkpoint, ack, report}."""
    s = ctx.settings
    ranks = Ranks.from_env()
    policy = load_policy(ctx.model_dir, s)
    trainer = Trainer(policy, s, reference_for(ctx.model_dir, s, policy.device))
    state = (load_checkpoint(ctx.run_dir, policy.model, trainer.optimizer) if ranks.is_main else None) or LearnerState()
    orders = Orders(ranks, policy.device) if ranks.distributed else None
    if orders is not None:
        state.step = broadcast_training_state(policy.model, trainer.optimizer, state.step, policy.device)
    trainer.step = state.step
    if orders is None:
        return lead(ctx, policy, trainer, state, None, ranks)
    if ranks.is_main:
        state = lead(ctx, policy, trainer, state, orders, ranks)
        # only after a loop that ended by itself (a stop, max_steps): after an error rank 0 just exits, and the
        # others' next collective fails at once (a closed connection) or after learner.ddp_timeout_s
        try:
            orders.stop()
        except RuntimeError as exc:  # torch's DistBackendError: a rank already gone, whose death stopped us
            log.warning("learner: could not tell every rank to stop (%s); torchrun restarts or ends them", exc)
    else:
        state = follow(trainer, orders, ctx.run_dir)
    leave()
    return state


def lead(
    ctx: LoopContext, policy, trainer: Trainer, state: LearnerState, orders: Orders | None, ranks: Ranks
) -> LearnerState:
    """The loop of the one process that reads groups (rank 0 under torchrun)."""
    s = ctx.settings
    consumed = set(state.consumed)
    ctx.metrics.published_version.set(state.version)
    consumer = GroupConsumer(ctx.client, ctx.streams, s.consumer_group, consumer_name(s.consumer_name), s.claim_idle_ms)
    announcer = Announcer(ctx.client, ctx.streams)
    unacked: list[bytes] = []
    unacked_groups: set[str] = set()
    idle, stale = IdleSteps(), StaleGroups()
    log.info("learner: step %d, version %d, %d groups consumed so far", state.step, state.version, len(consumed))
    resume_announcement(ctx, policy, state, announcer)

    def before_read() -> None:
        announcer.flush()  # a version Redis refused to announce (out of memory): again, after its back-off
        if orders is not None:
            orders.wait()  # the other ranks keep waiting

    # A stop (ctx.stop) is honoured within about `block_ms` while waiting for groups and between the groups of a
    # step; a step cut short changes no weight, and nothing is acknowledged that is not in a checkpoint.
    while not ctx.stop.is_set() and not (s.max_steps and state.step >= s.max_steps):
        entries = collect(ctx, consumer, state, consumed, stale, s.groups_per_step * ranks.world, before_read)
        if not entries:
            continue
        groups = [e.group for e in entries]
        mine = orders.step(groups) if orders is not None else groups
        try:
            report = trainer.train_step(mine, should_stop=ctx.stop.is_set)
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
        unacked_groups.update(e.group.group_id for e in entries)
        # a step whose groups all had zero advantage changed no weight: publishing it would only make the
        # servers swap to identical weights and split the reward-per-version curve into more, smaller points
        published = maybe_publish(ctx, policy, state, announcer) if report.updated else None
        if state.step % s.checkpoint_every == 0 or (s.max_steps and state.step >= s.max_steps):
            # bounded: ids of acknowledged groups are kept only as a margin (`learner.consumed_ids_kept`)
            state.consumed = kept_ids(state.consumed, s.consumed_ids_kept, unacked_groups)
            consumed.intersection_update(state.consumed)
            save_checkpoint(ctx.run_dir, state, policy.model, trainer.optimizer)
            consumer.ack(unacked)
            unacked.clear()
            unacked_groups.clear()
        record_step(ctx, state, report, entries, published)
        if s.heap_trim_after_step:  # what the step, publish and checkpoint freed under the mmap threshold
            trim_heap()
        if warning := idle.observe(report.updated):
            log.warning(warning)
    return state


class IdleSteps:
    """Steps in a row that changed no weight (every group had zero advantage: each member got the same reward).
    The learner then publishes nothing, and the served version stays where it is; that is right, but it must not be
    silent: a raw model that never calls a tool (no warm start) gets the same reward on every member forever.
    `observe` returns a warning after `first` such steps, then after 10×, 100× … as many; an update resets it."""

    def __init__(self, first: int = 10):
        self.first = self.next = first
        self.run = 0

    def observe(self, updated: bool) -> str | None:
        if updated:
            self.run, self.next = 0, self.first
            return None
        self.run += 1
        if self.run < self.next:
            return None
        self.next *= 10
        return (
            f"learner: {self.run} steps in a row changed no weight (every group's members got equal rewards), so "
            "no version was published: nothing to learn from this traffic. A model that never calls a tool does "
            "this; warm-start it first (`slca sft`, or `slca up` with ops.warm_start_minutes > 0)"
        )


class StaleGroups:
    """Groups more than `max_staleness` versions older than the learner: acknowledged at once (never applied, there
    is nothing to keep them pending for: left pending, a learner that never steps would hold them forever) and
    counted (`slca_stale_groups_dropped`, `LearnerState.dropped_stale`). A run of them means the servers do not serve
    what the learner announced: said in the log after `first` in a row, then after 10×, 100× … as many."""

    def __init__(self, first: int = 10):
        self.first = self.next = first
        self.run = 0

    def drop(self, ctx: LoopContext, consumer: GroupConsumer, state: LearnerState, entry: GroupEntry) -> None:
        group = entry.group
        consumer.ack([entry.entry_id])
        ctx.metrics.stale_dropped.inc()
        state.dropped_stale += 1
        state.consumed.append(group.group_id)
        self.run += 1
        if self.run >= self.next:
            self.next *= 10
            log.warning(
                "learner: %d groups in a row were more than %d versions older than the learner's v%d (the last from "
                "v%d); dropped. The servers are not serving the announced versions: see serve's log and "
                "slca_swaps_total",
                self.run,
                ctx.settings.max_staleness,
                state.version,
                group.policy_version_min,
            )

    def fresh(self) -> None:
        """A usable group arrived: the run is over."""
        self.run, self.next = 0, self.first


def collect(
    ctx: LoopContext,
    consumer: GroupConsumer,
    state: LearnerState,
    consumed: set[str],
    stale: StaleGroups | None = None,
    want: int | None = None,
    waiting: Callable[[], None] | None = None,
) -> list[GroupEntry]:
    """`want` usable groups (default `groups_per_step`), or none; blocks at most ~block_ms per read so `stop` is
    honoured. `waiting` is called before each read (rank 0 tells the other ranks to keep waiting)."""
    want = want or ctx.settings.groups_per_step
    stale = stale or StaleGroups()
    usable: list[GroupEntry] = []
    while len(usable) < want and not ctx.stop.is_set():
        if waiting is not None:
            waiting()
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
            elif (behind := state.version - entry.group.policy_version_min) > ctx.settings.max_staleness:
                consumed.add(entry.group.group_id)
                stale.drop(ctx, consumer, state, entry)
            else:
                ctx.metrics.staleness.set(behind)
                stale.fresh()
                usable.append(entry)
    return usable if len(usable) == want else []


def maybe_publish(ctx: LoopContext, policy, state: LearnerState, announcer: Announcer):
    if state.step % ctx.settings.publish_every:
        return None
    return publish_version(ctx, policy, state, announcer)


def publish_version(ctx: LoopContext, policy, state: LearnerState, announcer: Announcer):
    """Write the policy's weights as the next version and announce it (`announcer`: tried again until Redis takes
    it); (manifest, seconds). The version is the learner's from here on, announced or not yet."""
    manifest, seconds = publish(
        policy.model,
        ctx.model_dir,
        ctx.weights_dir,
        state.version,
        state.step,
        str(ctx.model_dir),
        None,  # announced below, where a refusal is retried instead of raised
        ctx.streams,
        ctx.weights.keep_versions,
        weights_key=ctx.weights.key,
        transport=ctx.transport,
    )
    state.version = manifest.version
    announcer.announce(manifest)
    ctx.metrics.published_version.set(manifest.version)
    ctx.metrics.publish_seconds.observe(seconds)
    return manifest, seconds


def resume_announcement(ctx: LoopContext, policy, state: LearnerState, announcer: Announcer) -> None:
    """At start, announce again the version the learner resumes at: a server (re)started meanwhile, or one that
    refused or missed it, then loads what the groups' staleness is measured against. A version that cannot be
    announced as it was (gone, signed with another key, another directory or url: `reannounce_refusal`) is replaced:
    the weights the learner resumes with are published as a new version. Nothing to do at v0 (the base model)."""
    if state.version == 0:
        return
    url = ctx.transport.url_for(state.version) if ctx.transport is not None else None
    manifest = stored_manifest(ctx.weights_dir, state.version)
    why = reannounce_refusal(manifest, ctx.weights_dir, ctx.weights.key, url)
    if why is None:
        log.info("learner: announcing v%d again (the version it resumes at)", state.version)
        announcer.announce(manifest)
        return
    log.warning(
        "learner: v%d cannot be announced again (%s); publishing the weights it resumes with as a new version",
        state.version,
        why,
    )
    publish_version(ctx, policy, state, announcer)


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
    try:
        ctx.client.xadd(ctx.streams.stats(stats.STREAM), stats.to_fields(), maxlen=STATS_MAXLEN, approximate=True)
    except redis.ResponseError as exc:  # a full Redis (OOM): the dashboard misses a row, the learner goes on
        log.warning("learner: step %d's stats row not written (%s)", state.step, exc)
    line = StepLine(
        step=state.step,
        version=state.version,
        loss=report.loss,
        tokens=report.tokens,
        tokens_per_s=report.tokens_per_second,
        step_s=report.seconds,
        advantage_s=report.advantage_seconds,
        skipped_zero=report.skipped_zero,
        groups=report.group_ids,
        group_versions=[e.group.policy_version_min for e in entries],
        exec_mean=sum(r.exec for e in entries for r in e.group.rewards) / sum(e.group.size for e in entries),
        published=published[0].version if published else None,
        publish_s=published[1] if published else None,
        ts=ts,
        stats=report.stats,
    )
    append_line(ctx.run_dir, line)
    log.info(
        "step %d v%d loss %.4f tokens %d %.1f tok/s",
        state.step,
        state.version,
        report.loss,
        report.tokens,
        report.tokens_per_second,
    )
