"""Prometheus metrics of the task feed (registry injectable for tests)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram


@dataclass
class FeedMetrics:
    requests: Counter
    request_seconds: Histogram
    trajectories: Counter
    retries: Counter
    inflight: Gauge
    paced_seconds: Counter
    held_seconds: Counter
    skipped: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry = REGISTRY) -> "FeedMetrics":
        return cls(
            requests=Counter(
                "slca_feed_requests_total", "Agent-run requests by outcome", ["status"], registry=registry
            ),
            request_seconds=Histogram(
                "slca_feed_request_seconds",
                "Agent-run request latency",
                registry=registry,
                buckets=(0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320),
            ),
            trajectories=Counter(
                "slca_feed_trajectories_total", "Trajectories recorded by the API for the feed", registry=registry
            ),
            retries=Counter(
                "slca_feed_retries_total", "Retries after a 503 or a connection error", ["reason"], registry=registry
            ),
            inflight=Gauge("slca_feed_inflight", "Agent-run requests in flight", registry=registry),
            paced_seconds=Counter(
                "slca_feed_paced_seconds",
                "Seconds the feed waited for the learner's backlog to drain",
                registry=registry,
            ),
            held_seconds=Counter(
                "slca_feed_held_seconds",
                "Seconds the feed held its traffic while a probe round ran or the gate judged",
                registry=registry,
            ),
            skipped=Counter(
                "slca_feed_skipped_tasks_total",
                "Training tasks passed over because their latest group was uniform (ops.feed_skip_uniform_p)",
                registry=registry,
            ),
        )
