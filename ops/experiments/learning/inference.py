"""The comparison's statistics, fixed before any run: paired per-item differences, a bootstrap over items and
seeds for the interval, a sign-flip permutation test for the p-value, Holm's correction over the family of
comparisons, and one verdict per comparison.

Data: per model family (an arm, or the warm start) a `(S, N)` array of 0/1 outcomes — S seeds (1 for the warm
start, evaluated once, greedy), N held-out items, the same items in the same order for every family (paired).

- Effect of A vs B, in points: `100 · (mean_{s,i} A − mean_{s,i} B)` = the per-item differences of the seed means
  `d_i`, averaged over items.
- 95% interval: a two-level percentile bootstrap, `reps` times: resample the N items with replacement (one draw
  shared by every family: the pairing by item is kept), then each family's seeds with replacement (independently
  per family: each arm's seeds are its own training runs). It counts the outcome noise twice (once through the
  items, once through the seeds), so it is conservative: wide rather than overconfident with 3 seeds.
- p-value: the paired sign-flip permutation test of `mean_i d_i = 0` (each item's difference keeps or flips its
  sign at random, `perms` times; Monte-Carlo +1). Items are its units: a seed-level effect shared by all items
  is not in it, which is why the verdict also needs the interval.
- Holm's step-down correction over the whole family (Holm 1979): controls the chance of any false "better" at α.
- Verdict: "A better" / "B better" when the Holm-adjusted p < α and the 95% interval excludes 0 on that side;
  otherwise "no difference detected". Never "the best": every comparison is named before the run.

Everything is vectorised with numpy (`tests/ops/experiments/learning/test_inference.py` runs hundreds of simulated
experiments in seconds).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

ALPHA = 0.05
"""Family-wise error rate of the verdicts (Holm-adjusted)."""
BOOTSTRAP_REPS = 10_000
"""Bootstrap resamples of the real comparison (its interval)."""
PERMUTATIONS = 10_000
"""Sign flips of the real comparison (its p-value: the smallest Holm threshold, α/9, needs p resolved well below
0.005)."""
LEVEL = 0.95
NO_DIFFERENCE = "no difference detected"
RULE = (
    f"Rule, fixed before the run: α = {ALPHA} for the whole family of comparisons below (Holm's step-down "
    "correction). For each comparison A vs B the effect is the difference in held-out success, in points, of "
    "the per-item outcomes averaged over seeds and items (the same items for every model: paired). 95% interval: "
    f"two-level bootstrap (resample items, and each arm's seeds within the arm; {BOOTSTRAP_REPS} resamples). "
    f"p-value: paired sign-flip permutation test on the per-item differences ({PERMUTATIONS} flips). "
    'Verdict: "A better" or '
    '"B better" when the Holm-adjusted p < α and the 95% interval excludes 0; otherwise "no difference '
    'detected".'
)


@dataclass(frozen=True)
class Effect:
    """One comparison's result (points = percentage points of success)."""

    a: str
    b: str
    effect: float
    ci_low: float
    ci_high: float
    p: float
    p_holm: float
    verdict: str
    a_rate: float
    b_rate: float
    n_items: int
    seeds_a: int
    seeds_b: int

    def to_json(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def family(arms: list[str], reference: str, warm: str) -> list[tuple[str, str]]:
    """The comparisons, named before the run: the reference against each other arm, then every arm against the
    warm start."""
    head = [(reference, b) for b in arms if b != reference] if reference in arms else []
    return head + [(a, warm) for a in arms]


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values, same order as `p` (..., m): the k-th smallest gets max_{j≤k} (m − j)·p_(j), capped
    at 1. Works on a batch of families along the last axis."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


def bootstrap_means(outcomes: dict[str, np.ndarray], reps: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`{family: (reps,) resampled overall means}`: items resampled once for all families (paired), then each
    family's seeds within it. `outcomes[f]` is (S_f, N)."""
    n = next(iter(outcomes.values())).shape[1]
    if any(x.shape[1] != n for x in outcomes.values()):
        shapes = ", ".join(f"{k} {x.shape}" for k, x in outcomes.items())
        raise ValueError(f"every family needs the same items: {shapes}")
    # counts (reps, N): how often each item is drawn; a resampled per-seed mean is counts @ x.T / N
    draws = rng.integers(0, n, size=(reps, n)) + n * np.arange(reps)[:, None]
    counts = np.bincount(draws.ravel(), minlength=reps * n).reshape(reps, n).astype(float)
    means = {}
    for name, x in outcomes.items():
        per_seed = counts @ x.T.astype(float) / n  # (reps, S)
        seeds = rng.integers(0, x.shape[0], size=(reps, x.shape[0]))
        means[name] = np.take_along_axis(per_seed, seeds, axis=1).mean(axis=1)
    return means


def sign_flip_p(diffs: np.ndarray, perms: int, rng: np.random.Generator) -> np.ndarray:
    """(C,) two-sided p-values of `mean_i d_i = 0` for C comparisons at once; `diffs` (C, N) per-item differences.
    One set of random signs serves every comparison (they are corrected together by Holm anyway)."""
    n = diffs.shape[1]
    signs = rng.integers(0, 2, size=(perms, n)) * 2.0 - 1.0
    flipped = np.abs(diffs @ signs.T) / n  # (C, perms)
    observed = np.abs(diffs.mean(axis=1, keepdims=True))
    # a tolerance: equal sums computed in another order must count as ties, not as smaller
    extreme = np.count_nonzero(flipped >= observed - 1e-12, axis=1)
    return (extreme + 1) / (perms + 1)


def verdict(a: str, b: str, p_holm: float, low: float, high: float, alpha: float = ALPHA) -> str:
    if p_holm < alpha and low > 0:
        return f"{a} better"
    if p_holm < alpha and high < 0:
        return f"{b} better"
    return NO_DIFFERENCE


def compare_family(
    outcomes: dict[str, np.ndarray],
    comparisons: list[tuple[str, str]],
    reps: int = BOOTSTRAP_REPS,
    perms: int = PERMUTATIONS,
    seed: int = 0,
    alpha: float = ALPHA,
) -> list[Effect]:
    """Every comparison of the family, Holm-corrected together. `outcomes[f]`: (S_f, N) 0/1 array."""
    if not comparisons:
        return []
    rng = np.random.default_rng(seed)
    draws = bootstrap_means(outcomes, reps, rng)
    boot = 100 * np.stack([draws[a] - draws[b] for a, b in comparisons])  # (C, reps)
    tail = (1 - LEVEL) / 2 * 100
    lows, highs = np.percentile(boot, [tail, 100 - tail], axis=1)
    seed_means = {name: x.mean(axis=0) for name, x in outcomes.items()}
    diffs = np.stack([seed_means[a] - seed_means[b] for a, b in comparisons])  # (C, N)
    p = sign_flip_p(diffs, perms, rng)
    p_holm = holm(p)
    effects = []
    for k, (a, b) in enumerate(comparisons):
        low, high, ra, rb = float(lows[k]), float(highs[k]), float(outcomes[a].mean()), float(outcomes[b].mean())
        effects.append(
            Effect(
                a,
                b,
                100 * (ra - rb),
                low,
                high,
                float(p[k]),
                float(p_holm[k]),
                verdict(a, b, float(p_holm[k]), low, high, alpha),
                ra,
                rb,
                outcomes[a].shape[1],
                outcomes[a].shape[0],
                outcomes[b].shape[0],
            )
        )
    return effects


def outcome_arrays(per_run: dict[str, dict[int, dict[str, bool]]]) -> tuple[dict[str, np.ndarray], list[str]]:
    """`{family: {seed: {item key: success}}}` → (`{family: (S, N)}`, item keys), on the items every run has
    (a run missing an item would unpair the comparison; the caller reports how many were dropped)."""
    runs = [items for seeds in per_run.values() for items in seeds.values()]
    if not runs:
        return {}, []
    common = sorted(set.intersection(*(set(r) for r in runs)))
    arrays = {
        name: np.array([[float(seeds[s][k]) for k in common] for s in sorted(seeds)]).reshape(len(seeds), -1)
        for name, seeds in per_run.items()
    }
    return arrays, common
