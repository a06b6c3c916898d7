"""A short online-RL history written into Redis by the system's own writers, for the dashboard tests.

Trajectories (real token ids and segments, from the tiny model's tokenizer) are added to `slca:trajectories` in
serve's recorder entry format and go through the workers' scoring pipeline, which scores them, writes the
`stats:rewards` rows and emits rollout groups of 4. After each version's groups, the learner's `record_step`
writes its `stats:learner` row and a `WeightManifest` is announced. Only the clock is the test's: the history
spans `minutes` of wall-clock time (the writers stamp `time.time()`), so the time axes have something to show.
Later versions sample better episodes, so the reward curve rises with the version, and each version's first
group was sampled one version behind (staleness 1).
"""

from __future__ import annotations

import random
import types
from dataclasses import dataclass
from pathlib import Path

import redis

from slca.contracts import RolloutGroup, Streams, WeightManifest, decode_entry, encode_entry
from tests.support.trajectories import TrajectoryBuilder, episodes
from tests.workers.pipeline_harness import make_pipeline


class HistoryClock:
    """Stands in for the `time` module of the writers: `time()` is the test's, `perf_counter()` the real one."""

    def __init__(self, start: float):
        self.now = start

    def time(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        import time

        return time.perf_counter()


@dataclass
class History:
    versions: int
    trajectories: int
    groups: int
    learner_steps: int
    start: float
    end: float


def write_history(
    client: redis.Redis,
    builder: TrajectoryBuilder,
    tiny_model_dir,
    run_dir: Path,
    clock: HistoryClock,
    versions: int = 5,
    groups_per_version: int = 2,
    minutes: float = 12.0,
    seed: int = 0,
) -> History:
    """Scored trajectories of versions 0..versions-1, one learner step per version, one publication per step."""
    from prometheus_client import CollectorRegistry

    from learner.checkpoint import LearnerState
    from learner.consumer import GroupEntry
    from learner.loop import record_step
    from learner.metrics import LearnerMetrics

    run_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    # worst to best: no call, a wrong argument, the right call, the right calls in two turns
    templates = [episodes(builder)[k] for k in ("none", "wrong", "good", "two")]
    pipeline = make_pipeline(client, tiny_model_dir)
    streams = Streams()
    start, step_s = clock.now, minutes * 60 / (versions * groups_per_version * 4)
    # record_step's context: the parts of LoopContext it uses (its client, stream names, metrics, run dir)
    ctx = types.SimpleNamespace(
        client=client, streams=streams, metrics=LearnerMetrics.create(CollectorRegistry()), run_dir=run_dir
    )
    state, last_group_id, n_traj = LearnerState(), "0-0", 0
    for version in range(versions):
        for g in range(groups_per_version):
            task = f"task-v{version}-g{g}"
            sampled_by = max(0, version - 1) if g == 0 and version else version  # the first group lags one swap
            for i in range(4):
                # better versions pick better episodes: the index drifts up by two over the versions, with noise
                pick = min(len(templates) - 1, max(0, rng.randint(0, 2) + version * 2 // max(1, versions - 1) - 1))
                traj = templates[pick].model_copy(
                    update={"id": f"{task}-r{i}", "task_id": task, "policy_version": sampled_by}
                )
                clock.now += step_s * rng.uniform(0.6, 1.4)
                # serve's recorder writes this entry; a Celery scoring task carries its id to the pipeline
                entry_id = client.xadd(streams.trajectories, encode_entry(traj, id=traj.id)).decode()
                pipeline.process([entry_id])
                n_traj += 1
        entries = []
        for entry_id, fields in client.xrange(streams.groups, min=f"({last_group_id}"):
            entries.append(GroupEntry(entry_id, decode_entry(RolloutGroup, fields)))
            last_group_id = entry_id.decode()
        state.step += 1
        state.version = version + 1
        clock.now += 5
        _publish(client, streams, state, clock.now)
        record_step(ctx, state, _report(state.step, entries), entries, None)
    return History(versions, n_traj, client.xlen(streams.groups), state.step, start, clock.now)


def _report(step: int, entries):
    """A StepReport whose estimator figures count the zero-variance groups per channel, as `prepare_group` does."""
    from learner.step_stats import ChannelStats, EstimatorStats, LossStats, StepStats, TokenFigures
    from learner.trainer import StepReport

    channels = {
        channel: ChannelStats(
            zero_variance=sum(
                1.0 for e in entries if len({round(getattr(r, channel), 9) for r in e.group.rewards}) == 1
            )
        )
        for channel in ("exec", "pref")
    }
    means = TokenFigures(100 * len(entries), 0.0, 0.5, 0.05, 1.0, 0.0, kl=0.002 * step)
    stats = StepStats(LossStats(means, {}, 1.0, 1.0), EstimatorStats(channels))
    return StepReport(
        step=step,
        loss=0.8 / step,
        tokens=100 * len(entries),
        row_tokens=100 * len(entries),
        seconds=1.0,
        advantage_seconds=0.01,
        group_ids=[e.group.group_id for e in entries],
        skipped_zero=0,
        stats=stats,
    )


def _publish(client: redis.Redis, streams: Streams, state, now: float) -> None:
    """The learner's announcement of a new version (the weight files themselves are not the dashboard's concern)."""
    from slca.weights import announce

    announce(
        client,
        streams,
        WeightManifest(
            version=state.version,
            path=f"weights/v{state.version}",
            sha256={"model.safetensors": "0" * 64},
            base_model="tiny",
            created_at=now,
            train_step=state.step,
        ),
    )


def probe_rounds(start: float) -> list:
    """Three held-out probe rounds over the history's versions, as the probe summarises them: 12 held-out tasks
    (8 test, 4 novel) and 4 BFCL items, more solved as the version rises (4 → 7 → 10 held-out). The last one saw a
    swap mid-round (versions 3 and 4)."""
    from ops.experiments.eval.suite import ItemRecord
    from ops.observe.probe_rounds import summarise_round

    def records(versions, solved):
        suites = (
            [("test", i) for i in range(8)]
            + [("novel", i) for i in range(4)]
            + [("bfcl:simple_python", i) for i in range(4)]
        )
        return [
            ItemRecord(
                suite,
                f"{suite}-{i}",
                success=(i if suite.startswith("bfcl") else k) < solved[suite.startswith("bfcl")],
                exec=None if suite.startswith("bfcl") else 0.5 + 0.04 * k,
                pref=0.4,
                policy_version=versions[k % len(versions)],
                calls=[{"name": "f", "arguments": {}, "valid": True}],
            )
            for k, (suite, i) in enumerate(suites)
        ]

    rounds, base = [], None
    for i, (versions, solved) in enumerate([([0, 0, 0, 1], (4, 1)), ([2], (7, 2)), ([3, 4, 4, 4], (10, 2))]):
        recs = records(versions, {False: solved[0], True: solved[1]})
        r = summarise_round(recs, base, 0 if base else None, start + 240 * i, "greedy", versions[0])
        base = base or recs
        rounds.append(r)
    return rounds


def write_probe_rounds(redis_url: str, rounds: list, prefix: str = "slca") -> list[dict]:
    """Each round through the probe's own publisher (`redis_publisher`, as `slca feed` wires it); → their JSON."""
    import asyncio

    from ops.run.feed.probe import redis_publisher
    from ops.observe.probe_rounds import PROBE_SUFFIX

    publish = redis_publisher(redis_url, Streams(prefix).stats(PROBE_SUFFIX))
    entries = [r.to_json() for r in rounds]

    async def main():
        for entry in entries:
            await publish(entry)

    asyncio.run(main())
    return entries
