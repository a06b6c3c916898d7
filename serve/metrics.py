"""Prometheus metrics of the API server (names agreed in the brief); the registry is injectable for tests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ServeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter("slca_requests_total", "HTTP requests", ["endpoint", "status"], registry=r)
        self.request_seconds = Histogram("slca_request_seconds", "Request latency", ["endpoint"], registry=r)
        self.tokens_generated = Counter("slca_tokens_generated_total", "Sampled tokens", registry=r)
        self.tool_calls = Counter("slca_tool_calls_total", "Tool calls executed", ["tool", "outcome"], registry=r)
        self.tool_turns = Histogram(
            "slca_tool_turns", "Tool turns per episode", buckets=(0, 1, 2, 3, 4, 6, 8, 12, 16), registry=r
        )
        self.policy_version = Gauge("slca_policy_version", "Weight version served", registry=r)
        self.swap_seconds = Histogram(
            "slca_swap_seconds", "Weight swap latency", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=r
        )
        self.swaps = Counter("slca_swaps_total", "Weight swaps", ["outcome"], registry=r)
        self.swap_rollbacks = Counter("slca_swap_rollbacks_total", "Failed swaps undone: last good weights restored",
                                      registry=r)  # fmt: skip
        self.trajectories_recorded = Counter("slca_trajectories_recorded_total", "Trajectories added", registry=r)
        self.backpressure = Counter("slca_backpressure_total", "Trajectories not added: stream full", registry=r)
        self.engine_failures = Counter("slca_engine_failures_total", "Requests failed by the engine", registry=r)
        self.engine_max_batch = Gauge("slca_engine_max_batch", "Most requests one engine step ran together", registry=r)
        self.engine_steps = Gauge("slca_engine_steps", "Engine batches (hf) or steps (vllm) run", registry=r)
        self.record_failures = Counter("slca_record_failures_total", "Trajectories not added: Redis error", registry=r)

    @staticmethod
    def known_tool(name: str | None, offered: set[str]) -> str:
        """Bounded label: a name the request offered, else 'unknown' (model output must not mint labels)."""
        return name if name in offered else "unknown"
