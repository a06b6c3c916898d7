"""The scored-success rule of automatic rollback: pure arithmetic over two versions' success on scored traffic.

The two samples are not paired (different trajectories, sampled at different times), so the rule bounds the
difference of two independent proportions: Newcombe's hybrid score interval (Newcombe 1998, "Interval estimation
for the difference between independent proportions", method 10), built from each side's Wilson interval. It keeps
its coverage at the sizes a window holds and at success rates near 0 or 1, where the Wald interval of the
difference is too narrow and would roll back on noise.

Rule (fixed in settings): roll the promoted version back when both windows hold at least `min_n` scored
trajectories and the one-sided 95% upper bound of promoted − previous success is below −margin — a drop larger
than the margin, with at most a 5% chance of rolling back a version whose true drop is no larger than the margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ops.experiments.eval.stats import wilson

Z_ONE_SIDED_95 = 1.6448536269514722
"""The standard normal's 95% quantile: the upper end of a two-sided 90% interval is a one-sided 95% bound."""


@dataclass(frozen=True)
class DropVerdict:
    rollback: bool
    why: str
    n: int
    previous_n: int
    success: float | None
    previous_success: float | None
    diff: float | None
    ci_high: float | None
    """One-sided 95% upper bound of `diff`."""


def newcombe_upper(s1: float, n1: int, s2: float, n2: int, z: float = Z_ONE_SIDED_95) -> float:
    """Upper bound of p1 − p2 (p = s / n) by Newcombe's hybrid score method: d + sqrt((u1 − p1)² + (p2 − l2)²), with
    (l, u) each proportion's Wilson interval at the same z."""
    p1, p2 = s1 / n1, s2 / n2
    _, u1 = wilson(s1, n1, z)
    l2, _ = wilson(s2, n2, z)
    return p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def success_drop(promoted: Sequence[float], previous: Sequence[float], margin: float, min_n: int) -> DropVerdict:
    """`promoted`, `previous`: each version's success (0/1) over its window of scored trajectories."""
    n, m = len(promoted), len(previous)
    if n < min_n or m < min_n:
        return DropVerdict(False, f"too few scored trajectories ({n} and {m}, need {min_n} each)", n, m,
                           None, None, None, None)  # fmt: skip
    s1, s2 = float(sum(promoted)), float(sum(previous))
    p1, p2 = s1 / n, s2 / m
    high = newcombe_upper(s1, n, s2, m)
    figures = (n, m, p1, p2, p1 - p2, high)
    if high < -margin:
        return DropVerdict(True, f"upper bound {high:+.3f} < -{margin:.3f} ({p1:.3f} of {n} vs {p2:.3f} of {m})",
                           *figures)  # fmt: skip
    return DropVerdict(False, f"upper bound {high:+.3f} >= -{margin:.3f}", *figures)
