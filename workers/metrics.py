"""Prometheus metrics of the scoring workers and the assembler, declared in one place (registry injectable).

`slca worker` runs Celery prefork children: it sets `PROMETHEUS_MULTIPROC_DIR` before they start, so every
child writes its samples to files that the parent's HTTP endpoint aggregates (prometheus_client multiprocess).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

REWARD_BUCKETS = (-0.5, -0.25, 0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


@dataclass
class WorkerMetrics:
    scored: Counter
    scored_success: Counter
    score_seconds: Histogram
    reward_exec: Histogram
    reward_pref: Histogram
    reward_component: Histogram
    queue_depth: Gauge
    queue_lag: Gauge
    redeliveries: Counter
    orphans_requeued: Counter
    dead_letters: Counter
    groups_emitted: Counter
    late_members: Counter
    duplicates: Counter
    intake_paused: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = REGISTRY) -> "WorkerMetrics":
        r = registry
        return cls(
            scored=Counter("slca_scored", "Trajectories scored", registry=r),
            scored_success=Counter(
                "slca_scored_success",
                "Scored trajectories whose HierR `success` is 1 (over slca_scored: the success rate)",
                registry=r,
            ),
            score_seconds=Histogram("slca_score_seconds", "Time to score one trajectory", registry=r),
            reward_exec=Histogram("slca_reward_exec", "Execution reward r_exec", buckets=REWARD_BUCKETS, registry=r),
            reward_pref=Histogram("slca_reward_pref", "Preference reward r_pref", buckets=REWARD_BUCKETS, registry=r),
            reward_component=Histogram(
                "slca_reward_component", "HierR reward components", ["component"], buckets=REWARD_BUCKETS, registry=r
            ),
            queue_depth=Gauge(
                "slca_queue_depth", "Entries in a stream or queue", ["stream"], registry=r, multiprocess_mode="max"
            ),
            queue_lag=Gauge(
                "slca_queue_lag_seconds",
                "Age of the oldest undelivered entry",
                ["stream"],
                registry=r,
                multiprocess_mode="max",
            ),
            redeliveries=Counter("slca_redeliveries", "Stream entries or tasks delivered again", registry=r),
            orphans_requeued=Counter(
                "slca_orphans_requeued", "Stream entries enqueued again after the broker lost their task", registry=r
            ),
            dead_letters=Counter("slca_dead_letters", "Entries sent to the dead-letter stream", ["reason"], registry=r),
            groups_emitted=Counter("slca_groups_emitted", "Rollout groups written", ["partial"], registry=r),
            late_members=Counter("slca_late_members", "Members arriving after their group was emitted", registry=r),
            duplicates=Counter("slca_duplicate_deliveries", "Deliveries of already-grouped trajectories", registry=r),
            intake_paused=Gauge(
                "slca_intake_paused", "1 while intake waits for room downstream", registry=r, multiprocess_mode="max"
            ),
        )


# Components observed as histograms (bounded label set: the [0, 1] components, not the counts).
OBSERVED_COMPONENTS = (
    "format",
    "name",
    "key",
    "value",
    "parallel",
    "outcome_valid",
    "outcome_executed",
    "outcome_complete",
    "success",
    "action",
    "completeness",
)
