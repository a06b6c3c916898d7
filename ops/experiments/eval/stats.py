"""The arithmetic of an evaluation: Wilson intervals of a success rate, per-suite summaries, and the paired
comparison of two runs on the same items (bootstrap interval of the difference, exact McNemar test).

Every record is one item (`ops.experiments.eval.suite.ItemRecord`); the pooled rows are `held_out` (the task pack's test
and novel splits together) and `bfcl` (every BFCL category together). The training-task probe (`train_probe`: a
fixed sample of the train split, `sim.tasks.probe`) is a suite of its own, never pooled into `held_out`.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile (two-sided 95%)."""
BOOTSTRAP_RESAMPLES = 2000
BFCL_PREFIX = "bfcl:"
HELD_OUT = "held_out"
BFCL = "bfcl"
TRAIN_PROBE = "train_probe"
"""The training-task probe's suite: tasks the learner trains on, reported on its own (never held out)."""


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it over
    the Wald interval at these sample sizes: it stays inside [0, 1] and is not degenerate at 0 or n)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value of `b` and `c` discordant pairs: the binomial test of min(b, c) under
    Binomial(b + c, 1/2), doubled and capped at 1 (1.0 when there is no discordant pair)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_diff(
    a: Sequence[float], b: Sequence[float], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(b) − mean(a) over paired items (items resampled with replacement,
    both runs' outcomes of an item kept together), seeded."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if not a:
        return 0.0, 0.0
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def pool_of(suite: str) -> str | None:
    """The pooled row a suite counts in: `bfcl` for a BFCL category, none for the training-task probe, else
    `held_out` (a held-out split of the task pack)."""
    if suite.startswith(BFCL_PREFIX):
        return BFCL
    return None if suite == TRAIN_PROBE else HELD_OUT


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _groups(records) -> dict[str, list]:
    """Records per suite (in first-seen order), then the pooled rows that have records."""
    groups: dict[str, list] = {}
    pooled: dict[str, list] = {HELD_OUT: [], BFCL: []}
    for r in records:
        groups.setdefault(r.suite, []).append(r)
        if (pool := pool_of(r.suite)) is not None:
            pooled[pool].append(r)
    return {**groups, **{name: rs for name, rs in pooled.items() if rs}}


def summarize(records) -> dict[str, dict]:
    """Per suite and pooled: n, success rate with its Wilson 95% interval, mean exec and pref (None where no item
    has them, e.g. BFCL), and how many items failed because the request did (`errors`, counted as failures)."""
    out = {}
    for name, rs in _groups(records).items():
        k = sum(1 for r in rs if r.success)
        low, high = wilson(k, len(rs))
        out[name] = {
            "n": len(rs),
            "success": k / len(rs),
            "ci_low": low,
            "ci_high": high,
            "exec": _mean(r.exec for r in rs),
            "pref": _mean(r.pref for r in rs),
            "errors": sum(1 for r in rs if r.error),
        }
    return out


def paired(a: list, b: list, seed: int = 0) -> dict:
    """Run `a` against run `b` on the items both hold (matched by suite and item id): success rates, their
    difference b − a with a bootstrap 95% interval, the discordant counts (b_only: items only b solved) and the
    exact McNemar p-value."""
    index = {(r.suite, r.item_id): r for r in a}
    pairs = [(index[(r.suite, r.item_id)], r) for r in b if (r.suite, r.item_id) in index]
    xa = [float(x.success) for x, _ in pairs]
    xb = [float(y.success) for _, y in pairs]
    b_only = sum(1 for x, y in zip(xa, xb) if y > x)
    a_only = sum(1 for x, y in zip(xa, xb) if x > y)
    n = len(pairs)
    low, high = bootstrap_diff(xa, xb, seed)
    ra, rb = (sum(xa) / n, sum(xb) / n) if n else (0.0, 0.0)
    return {
        "n": n,
        "a": ra,
        "b": rb,
        "diff": rb - ra,
        "ci_low": low,
        "ci_high": high,
        "b_only": b_only,
        "a_only": a_only,
        "mcnemar_p": mcnemar_exact(b_only, a_only),
    }


def compare(a: list, b: list, seed: int = 0) -> dict[str, dict]:
    """`paired` per suite present in both runs, then pooled (`held_out`, `bfcl`)."""
    ga, gb = _groups(a), _groups(b)
    return {name: paired(ga[name], gb[name], seed) for name in gb if name in ga}
