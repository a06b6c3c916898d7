"""Reading a private Prometheus registry in tests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def metric(registry: CollectorRegistry, name: str, **labels) -> float:
    """The sample `name{labels}` of `registry`; 0.0 when it was never set."""
    return registry.get_sample_value(name, labels) or 0.0
