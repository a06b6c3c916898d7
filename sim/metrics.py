"""Prometheus metrics of the simulator and real tools, declared in one place (registry injectable).

Tool names come from callers (any request may offer a tool of any name), and each label value is a set of
series kept for the life of the process: ≈ 20 per name (a histogram's buckets). So the `tool` label is bounded
(`ToolLabels`): the first `MAX_TOOL_LABELS` names seen keep their own label, later ones share `other`.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram


MAX_TOOL_LABELS = 64
"""Distinct `tool` label values per registry, `other` aside. The task packs' tools are a few dozen: the first
names seen in a run are theirs; a flood of fresh names from callers then lands in `other`."""
OTHER_TOOL = "other"


class ToolLabels:
    """The bounded set of `tool` label values: first come, first kept, up to `limit`; every later name is `other`."""

    def __init__(self, limit: int = MAX_TOOL_LABELS):
        self.limit = limit
        self._kept: set[str] = set()
        self._lock = threading.Lock()  # tools are called from serve's loop and from threads

    def __call__(self, name: str) -> str:
        if name in self._kept:
            return name
        with self._lock:
            if len(self._kept) < self.limit:
                self._kept.add(name)
                return name
        return OTHER_TOOL


@dataclass
class SimMetrics:
    calls: Counter
    faults: Counter
    seconds: Histogram
    validation_failures: Counter
    cache_hits: Counter
    tool: ToolLabels = field(default_factory=ToolLabels)
    """The label value of a tool name: `metrics.calls.labels(metrics.tool(name), ...)`, never the raw name."""

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
