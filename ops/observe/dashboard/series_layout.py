"""One chart's data in uPlot's layout (`Series`) and the moving mean the charts take: below `series` (every chart)
and `version_series` (the version charts), which both build on them, so that neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MOVING_WINDOW = 20
"""Trajectories per moving mean: single episodes are noisy (tool turns are small integers)."""


@dataclass
class Series:
    x: list[float] = field(default_factory=list)
    ys: dict[str, list[float | None]] = field(default_factory=dict)
    """Line label → one value per x (None: no value there)."""
    extra: dict[str, list[Any]] = field(default_factory=dict)
    """Per-x values shown in the legend but not drawn (trajectory counts)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Values about the whole chart, shown in its caption (the probe's difference from v0)."""


def moving_mean(values: list[float], k: int = MOVING_WINDOW) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= k:
            total -= values[i - k]
        out.append(total / min(i + 1, k))
    return out
