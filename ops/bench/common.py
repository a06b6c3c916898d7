"""Helpers every bench shares: the command line a result records, and percentiles of its samples."""

from __future__ import annotations

import math


def bench_command(name: str, argv: list[str]) -> str:
    """`slca bench <name> …` as run, without the `--out` directory (results carry no machine paths)."""
    rest = argv[argv.index(name) + 1:] if name in argv else []
    kept, skip = [], False
    for a in rest:
        if skip or a.startswith("--out="):
            skip = False
            continue
        skip = a == "--out"
        if not skip:
            kept.append(a)
    return " ".join(["slca bench", name, *kept])


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of the values; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
