"""A share with its 95% Wilson score interval."""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.959963984540054


def wilson(hits: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of hits/total (0..1 for an empty sample)."""
    if total <= 0:
        return 0.0, 1.0
    p = hits / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if hits == 0 else low), (1.0 if hits == total else high)


def share(hits: int, total: int) -> dict[str, Any]:
    """{k, n, value, low, high} (value None when n is 0)."""
    low, high = wilson(hits, total)
    return {"k": hits, "n": total, "value": hits / total if total else None, "low": low, "high": high}
