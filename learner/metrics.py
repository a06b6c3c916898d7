"""Prometheus metrics of the learner (names: docs/design.md#metrics); the registry is injectable for tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from learner.step_stats import TRAINED_KINDS

if TYPE_CHECKING:
    from learner.trainer import StepReport


@dataclass
class LearnerMetrics:
    steps: Counter
    step_seconds: Histogram
    tokens_per_second: Gauge
    loss: Gauge
    kl: Gauge
    clip_fraction: Gauge
    advantage_abs_mean: Gauge
    zero_variance_groups: Counter
    staleness: Gauge
    stale_dropped: Counter
    published_version: Gauge
    publish_seconds: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> "LearnerMetrics":
        reg = {"registry": registry} if registry is not None else {}
        return cls(
            steps=Counter("slca_learner_steps", "Optimizer steps", **reg),
            step_seconds=Histogram("slca_learner_step_seconds", "Time of one optimizer step", **reg),
            tokens_per_second=Gauge(
                "slca_learner_tokens_per_second", "Packed tokens per second of the last step", **reg
            ),
            loss=Gauge("slca_learner_loss", "Policy loss of the last step", **reg),
            kl=Gauge("slca_learner_kl", "Mean k3 KL to the reference of the last step", **reg),
            clip_fraction=Gauge("slca_learner_clip_fraction", "Share of clipped tokens in the last step", **reg),
            advantage_abs_mean=Gauge("slca_advantage_abs_mean", "Mean |advantage| by segment kind", ["kind"], **reg),
            zero_variance_groups=Counter(
                "slca_zero_variance_groups", "Groups with zero reward variance", ["channel"], **reg
            ),
            staleness=Gauge("slca_staleness", "Learner version minus the group's oldest policy version", **reg),
            stale_dropped=Counter("slca_stale_groups_dropped", "Groups dropped as too stale", **reg),
            published_version=Gauge("slca_published_version", "Newest published weight version", **reg),
            publish_seconds=Histogram("slca_publish_seconds", "Time to write and announce a version", **reg),
        )

    def observe_step(self, report: StepReport) -> None:
        stats = report.stats
        self.steps.inc()
        self.step_seconds.observe(report.seconds)
        self.tokens_per_second.set(report.tokens_per_second)
        self.loss.set(report.loss)
        self.kl.set(stats.kl)
        self.clip_fraction.set(stats.clip_frac)
        for kind in TRAINED_KINDS:
            if (value := stats.adv_abs_mean(kind)) is not None:
                self.advantage_abs_mean.labels(kind=kind.value).set(value)
        for channel, figures in stats.estimator.channels.items():
            if figures.zero_variance:
                self.zero_variance_groups.labels(channel=channel).inc(figures.zero_variance)
