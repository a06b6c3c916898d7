"""Prometheus metrics of the simulator and real tools, declared in one place (registry injectable)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram


@dataclass
class SimMetrics:
    calls: Counter
    faults: Counter
    seconds: Histogram
    validation_failures: Counter
    cache_hits: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> "SimMetrics":
        reg = registry if registry is not None else REGISTRY
        return cls(
            calls=Counter("slca_sim_calls_total", "Tool calls handled", ["tool", "backend"], registry=reg),
            faults=Counter("slca_sim_faults_total", "Injected faults", ["tool", "kind"], registry=reg),
            seconds=Histogram("slca_sim_call_seconds", "Tool call latency", ["tool"], registry=reg),
            validation_failures=Counter(
                "slca_sim_validation_failures_total", "Calls with invalid arguments", ["tool"], registry=reg
            ),
            cache_hits=Counter("slca_sim_cache_hits_total", "Responses served from the cache", ["tool"], registry=reg),
        )


_BY_REGISTRY: "weakref.WeakKeyDictionary[CollectorRegistry, SimMetrics]" = weakref.WeakKeyDictionary()


def metrics_for(registry: CollectorRegistry | None = None) -> SimMetrics:
    """The metrics on a registry (default: the process-wide one), created once per registry: Prometheus
    refuses to register a name twice, and several providers may share one process."""
    reg = registry if registry is not None else REGISTRY
    if reg not in _BY_REGISTRY:
        _BY_REGISTRY[reg] = SimMetrics.create(reg)
    return _BY_REGISTRY[reg]


def default_metrics() -> SimMetrics:
    return metrics_for(None)
