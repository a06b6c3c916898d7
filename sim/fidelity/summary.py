"""One (backend, domain) run's per-call records folded into its figures, each a share with its interval."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from sim.fidelity.stats import share

TARGETS = {
    "shape": 1.0,
    "error_precision": 0.95,
    "error_recall": 0.95,
    "derived": 0.95,
    "state": 0.60,
    "consistency": 0.99,
}
"""Targets of the `local` backend (issue 38)."""


def misses(figures: dict[str, Any]) -> list[str]:
    """The measures below their target (a measure with no sample is not a miss)."""
    return [
        key for key, target in TARGETS.items() if figures[key]["value"] is not None and figures[key]["value"] < target
    ]


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    shaped = [r["shape"] for r in records if r["shape"] is not None]
    real_fail = [r for r in records if not r["real"]["ok"]]
    sim_fail = [r for r in records if not r["sim"]["ok"]]
    both_fail = [r for r in real_fail if not r["sim"]["ok"]]
    derived = [d for r in records for d in r["derived"]]
    fields = [f for r in records for f in r["state"]]
    writes = [r for r in records if r["state"]]
    pairs = [c for r in records for c in r["consistency"]]
    latency = [r["sim"]["latency_ms"] for r in records]
    real_latency_n = len(records)
    out: dict[str, Any] = {
        "calls": len(records),
        "expected_calls": sum(r["label"] == "expected" for r in records),
        "variant_calls": sum(r["label"] != "expected" for r in records),
        "real_failures": len(real_fail),
        "shape": share(sum(shaped), len(shaped)),
        "error_precision": share(len(both_fail), len(sim_fail)),
        "error_recall": share(len(both_fail), len(real_fail)),
        "error_kind": share(sum(r["real"]["error_kind"] == r["sim"]["error_kind"] for r in both_fail), len(both_fail)),
        "derived": share(sum(d["agree"] for d in derived), len(derived)),
        "derived_by_source": {
            s: share(sum(d["agree"] for d in derived if d["source"] == s), sum(d["source"] == s for d in derived))
            for s in ("request", "earlier request", "earlier answer")
        },
        "derived_unseen": sum(r["derived_unseen"] for r in records),
        "state": share(sum(f["agree"] for f in fields), len(fields)),
        "state_real_changes": share(
            sum(f["agree"] for f in fields if f.get("real_changed")), sum(bool(f.get("real_changed")) for f in fields)
        ),
        "state_described": share(
            sum(f["agree"] for f in fields if f.get("described")), sum(bool(f.get("described")) for f in fields)
        ),
        "state_calls_exact": share(sum(all(f["agree"] for f in r["state"]) for r in writes), len(writes)),
        "consistency": share(sum(c["agree"] for c in pairs), len(pairs)),
        "recall_by_variant": _recall_by_variant(real_fail),
        "false_errors_by_label": dict(Counter(r["label"] for r in sim_fail if r["real"]["ok"])),
        "sim_sources": dict(Counter(str(r["sim"].get("source")) for r in records if r["sim"]["ok"])),
        "latency_ms": {
            "p50": statistics.median(latency) if latency else None,
            "p95": _quantile(latency, 0.95),
            "mean": statistics.fmean(latency) if latency else None,
            "n": real_latency_n,
        },
    }
    return out


def _recall_by_variant(real_fail: list[dict[str, Any]]) -> dict[str, Any]:
    labels = sorted({r["label"] for r in real_fail})
    return {
        label: share(
            sum(not r["sim"]["ok"] for r in real_fail if r["label"] == label),
            sum(r["label"] == label for r in real_fail),
        )
        for label in labels
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
