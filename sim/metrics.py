"""Prometheus metrics of the simulator and real tools, declared in one place (registry injectable).

Tool names come from callers (any request may offer a tool of any name), and each label value is a set of
series kept for the life of the process: ≈ 20 per name (a histogram's buckets). So the `tool` label is bounded
(`ToolLabels`): the tools the simulator knows (the catalog's simulated tools, the real packs' tools: registered,
not chosen by callers) keep their own label; any other name is `other`. (First come, first kept let the first
caller after a start take every label, and the registered tools then had none.)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram


OTHER_TOOL = "other"


class ToolLabels:
    """The `tool` label values: a known name keeps its own, any other is `other` (whoever calls first)."""

    def __init__(self, known: Iterable[str] = ()):
        self._known = frozenset(known)
        self._lock = threading.Lock()  # tools are called from serve's loop and from threads

    def know(self, names: Iterable[str]) -> None:
        """Names of registered tools (a provider's: `SimProvider.tool_names`) keep their label from now on."""
        with self._lock:
            self._known = self._known | frozenset(names)

    def __call__(self, name: str) -> str:
        return name if name in self._known else OTHER_TOOL


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
