"""Prometheus metrics of the API server (names: docs/design.md#metrics); the registry is injectable for tests."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from serve.engines.grammar_builder import KINDS as GRAMMAR_KINDS
from serve.engines.grammar_builder import OUTCOMES as GRAMMAR_OUTCOMES
from slca.weights.fetch_report import FETCH_FAILURES, FetchReport


class KnownLabel:
    """Label values that come from callers (tool names are request data): only known values (the registered tools,
    `know`) keep their name, any other is 'other', so that no caller can grow the series without bound — nor take
    the labels, as the first caller after a start could when the first 64 names seen were kept."""

    FIXED = frozenset({"unknown", "other"})

    def __init__(self, known: Iterable[str] = ()):
        self._known = frozenset(known)
        self._lock = threading.Lock()  # agent runs label from the event loop, tools may do so from threads

    def know(self, values: Iterable[str]) -> None:
        with self._lock:
            self._known = self._known | frozenset(values)

    def __call__(self, value: str) -> str:
        return value if value in self.FIXED or value in self._known else "other"


class _ToolCounter:
    """`slca_tool_calls_total` with its `tool` label bounded (KnownLabel)."""

    def __init__(self, counter: Counter, tools: KnownLabel):
        self.counter, self.tools = counter, tools

    def labels(self, *, tool: str, outcome: str):
        return self.counter.labels(tool=self.tools(tool), outcome=outcome)


class ServeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, known_tools: Iterable[str] = ()):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter("slca_requests_total", "HTTP requests", ["endpoint", "status"], registry=r)
        self.request_seconds = Histogram("slca_request_seconds", "Request latency", ["endpoint"], registry=r)
        self.tokens_generated = Counter("slca_tokens_generated_total", "Sampled tokens", registry=r)
        self.tool_calls = _ToolCounter(
            Counter("slca_tool_calls_total", "Tool calls executed", ["tool", "outcome"], registry=r),
            KnownLabel(known_tools),
        )
        self.tool_turns = Histogram(
            "slca_tool_turns", "Tool turns per episode", buckets=(0, 1, 2, 3, 4, 6, 8, 12, 16), registry=r
        )
        self.policy_version = Gauge("slca_policy_version", "Weight version served", registry=r)
        self.swap_seconds = Histogram(
            "slca_swap_seconds", "Weight swap latency", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=r
        )
        self.swaps = Counter("slca_swaps_total", "Weight swaps", ["outcome"], registry=r)
        self.swap_rollbacks = Counter(
            "slca_swap_rollbacks_total", "Failed swaps undone: last good weights restored", registry=r
        )
        self.trajectories_recorded = Counter("slca_trajectories_recorded_total", "Trajectories added", registry=r)
        self.backpressure = Counter("slca_backpressure_total", "Trajectories not added: stream full", registry=r)
        self.engine_failures = Counter("slca_engine_failures_total", "Requests failed by the engine", registry=r)
        self.engine_max_batch = Gauge("slca_engine_max_batch", "Most requests one engine step ran together", registry=r)
        self.engine_steps = Gauge("slca_engine_steps", "Engine batches (hf) or steps (vllm) run", registry=r)
        self.engine_prompt_tokens = Gauge(
            "slca_engine_prompt_tokens",
            "Prompt tokens prefilled (hf engine): computed, or reused from its prefix cache",
            ["source"],
            registry=r,
        )
        self.record_failures = Counter("slca_record_failures_total", "Trajectories not added: Redis error", registry=r)
        # the two version roles and the promotion gate (serve/versions.py, serve/promotion.py)
        self.promoted_version = Gauge("slca_promoted_version", "Weight version callers get", registry=r)
        self.candidate_version = Gauge("slca_candidate_version", "The learner's newest version served", registry=r)
        self.promotions = Counter("slca_promotions_total", "Changes of the promoted version", ["reason"], registry=r)
        self.gate_decisions = Counter("slca_gate_decisions_total", "Promotion gate decisions", ["outcome"], registry=r)
        self.gate_last_diff = Gauge(
            "slca_gate_last_diff", "Last gate decision: candidate - promoted success on the gate set", registry=r
        )
        for outcome in ("promote", "hold", "skip"):
            self.gate_decisions.labels(outcome=outcome)
        # the weight transport over HTTP (slca/weights/http.py), fed by `observe_fetch`
        self.weights_fetch_bytes = Counter(
            "slca_weights_fetch_bytes_total", "Weight bytes received over HTTP (failed fetches too)", registry=r
        )
        self.weights_fetch_seconds = Histogram(
            "slca_weights_fetch_seconds",
            "Time to fetch one weight version over HTTP (a reused local copy is not timed)",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.weights_fetch_failures = Counter(
            "slca_weights_fetch_failures_total", "Weight fetches that failed, by reason", ["reason"], registry=r
        )
        self.weights_fetch_versions = Counter(
            "slca_weights_fetch_versions_total",
            "Fetched versions: verified against the signed manifest, or refused for what was sent",
            ["outcome"],
            registry=r,
        )
        # forced-call grammar builds (serve/engines/grammar_builder.py), fed by `observe_grammar`
        self.grammar_builds = Counter(
            "slca_grammar_builds_total",
            "Forced tool-call grammar builds asked for, by what they start from and how they ended",
            ["kind", "outcome"],
            registry=r,
        )
        # every label value known up front (a fixed set): rate() sees a series from 0, not from its first event
        for kind in GRAMMAR_KINDS:
            for outcome in GRAMMAR_OUTCOMES:
                self.grammar_builds.labels(kind=kind, outcome=outcome)
        for reason in FETCH_FAILURES:
            self.weights_fetch_failures.labels(reason=reason)
        for outcome in ("verified", "refused"):
            self.weights_fetch_versions.labels(outcome=outcome)

    def observe_fetch(self, report: FetchReport) -> None:
        """One fetch of the HTTP weight transport (its `observer`)."""
        self.weights_fetch_bytes.inc(report.bytes)
        if report.downloaded:
            self.weights_fetch_seconds.observe(report.seconds)
        if report.failure is not None:
            self.weights_fetch_failures.labels(reason=report.failure).inc()
        if report.verified:
            self.weights_fetch_versions.labels(outcome="verified").inc()
        elif report.refused:
            self.weights_fetch_versions.labels(outcome="refused").inc()

    def observe_grammar(self, kind: str, outcome: str) -> None:
        """One build the grammar builder was asked for (its `observe`): both values from its fixed sets."""
        self.grammar_builds.labels(kind=kind, outcome=outcome).inc()

    @staticmethod
    def known_tool(name: str | None, offered: set[str]) -> str:
        """A name the request offered, else 'unknown' (model output must not mint labels); an offered name keeps
        its label only when it is a registered tool's (`tool_calls.tools.know`), else it is 'other'."""
        return name if name in offered else "unknown"
