"""The promotion rule and its power: pure arithmetic over two runs' per-item records on the same gate items.

Rule (fixed in settings before any run): pair the items; d = candidate − promoted success; promote when the
paired bootstrap 95% interval's lower bound is above −`gate_margin` (and, with `gate_require_better`, d > 0).
A candidate that fails more items than the promoted version beyond the margin is held with ≥ 97.5% probability
whatever the set size; the price of a small set is that a good candidate is promoted only when it is clearly good
(`power`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ops.experiments.eval.stats import Z95, paired

Z80 = 0.8416212335729143
"""The standard normal's 80% quantile (one-sided power 0.8)."""


@dataclass(frozen=True)
class Verdict:
    outcome: str
    """'promote' or 'hold'."""
    why: str
    figures: dict
    """`ops.experiments.eval.stats.paired(promoted, candidate)`: n, a, b, diff, ci_low, ci_high, b_only, a_only,
    mcnemar_p."""


def decide(promoted: list, candidate: list, margin: float, require_better: bool = False) -> Verdict:
    figures = paired(promoted, candidate)
    if figures["n"] == 0:
        return Verdict("hold", "no paired items", figures)
    low, diff = figures["ci_low"], figures["diff"]
    if low <= -margin:
        return Verdict("hold", f"lower bound {low:+.3f} <= -{margin:.3f}", figures)
    if require_better and diff <= 0:
        return Verdict("hold", f"lower bound {low:+.3f} > -{margin:.3f} but difference {diff:+.3f} <= 0", figures)
    return Verdict("promote", f"lower bound {low:+.3f} > -{margin:.3f}", figures)


def promotion_threshold(n: int, discordant: float, margin: float) -> float:
    """The true difference a candidate needs to be promoted with probability 0.8 (normal approximation of the
    paired difference: standard error sqrt(discordant / n), `discordant` the share of items whose outcome differs)."""
    return -margin + (Z95 + Z80) * math.sqrt(discordant / n)


def held_regression(n: int, discordant: float, margin: float) -> float:
    """The smallest regression (a negative true difference) held with probability 0.9 or more: every one at or below
    −margin is held with ≥ 0.975; this is the bound from the normal approximation, `-margin + (1.96 - 1.28) * se`."""
    return -margin + (Z95 - 1.2815515655446004) * math.sqrt(discordant / n)
