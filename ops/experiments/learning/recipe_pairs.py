"""The recipe sweep's paired differences: per block, each item's outcome under one arm beside another (or the
warm start), averaged over blocks, with a bootstrap interval. Below both `recipe_report` and `recipe_estimators`,
which read them, so that neither imports the other for them."""

from __future__ import annotations

import random
from statistics import fmean

RESAMPLES = 5000


def block_pairs(blocks: list[dict], arm: str, other: str | None, suite: str) -> list[dict]:
    """Per block that ran both: {item: (outcome of `arm`, outcome of `other`)} on `suite` (None: the warm start)."""
    pairs = []
    for block in blocks:
        a = block["arms"].get(arm)
        b = block["warm"] if other is None else (block["arms"].get(other) or {}).get("outcomes")
        if a is None or b is None:
            continue
        keys = [k for k in a["outcomes"] if k.startswith(suite + "/") and k in b]
        pairs.append({k: (a["outcomes"][k], b[k]) for k in keys})
    return pairs


def item_differences(pairs: list[dict]) -> dict[str, float]:
    """Per item every block has: `arm − other`, averaged over the blocks (empty without a pair)."""
    if not pairs or not pairs[0]:
        return {}
    items = sorted(set.intersection(*(set(p) for p in pairs)))
    return {k: fmean(p[k][0] - p[k][1] for p in pairs) for k in items}


def paired(blocks: list[dict], arm: str, other: str | None, suite: str, seed: int = 0) -> dict | None:
    """The paired difference `arm − other` (None: the warm start) on `suite`, over the blocks that ran both."""
    pairs = block_pairs(blocks, arm, other, suite)
    diff = item_differences(pairs)
    if not diff:
        return None
    items = list(diff)
    rng = random.Random(seed)
    draws = []
    for _ in range(RESAMPLES):
        chosen_blocks = [rng.choice(pairs) for _ in pairs] if len(pairs) >= 3 else pairs
        chosen_items = [rng.choice(items) for _ in items]
        draws.append(fmean(fmean(p[k][0] - p[k][1] for p in chosen_blocks) for k in chosen_items))
    draws.sort()
    return {
        "blocks": len(pairs),
        "items": len(items),
        "a": fmean(p[k][0] for p in pairs for k in items),
        "b": fmean(p[k][1] for p in pairs for k in items),
        "diff": fmean(diff.values()),
        "ci95": [draws[int(0.025 * RESAMPLES)], draws[int(0.975 * RESAMPLES) - 1]],
        "gained": sum(a > b for p in pairs for a, b in p.values()),
        "lost": sum(a < b for p in pairs for a, b in p.values()),
        "changed_share": fmean(float(a != b) for p in pairs for a, b in p.values()),
    }
