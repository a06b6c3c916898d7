"""The estimator comparison of the recipe sweep (issue 35 item 3): the five estimator arms (`--arm-set
estimators`: slca, slca_decision, grpo, toolpo, rltr) trained at one recipe in blocks of their own
(`<out>/estimator-blocks/b<N>`), each compared with `slca` item by item within its blocks.

The rule, fixed in code before the first estimator block (`RULE`, `ALPHA`, `MARGIN`, the family `FAMILY`):
- per arm X ≠ slca and suite S (the training probe, the test split): the paired success difference X − slca,
  item by item within each block, averaged over the blocks then the items; its 95% interval by the sweep's
  bootstrap (`recipe_report.paired`: items, and blocks when ≥ 3);
- difference: a two-sided paired sign-flip permutation test on the per-item differences
  (`inference.sign_flip_p`), Holm-corrected over the whole family (4 arms × 2 suites, missing comparisons
  counted as p = 1 so that the correction does not loosen while blocks are missing); "X better" / "slca better"
  when the Holm p < α and the interval excludes 0 on that side, else "no difference detected";
- non-inferiority with a margin of 5 points: a one-sided sign-flip test of mean(d + margin) > 0, Holm-corrected over
  the same family; X is "non-inferior" on S when its Holm p < α and its interval's lower end is above −5 points.
"""

from __future__ import annotations

import numpy as np

from ops.experiments.learning.recipe_arms import ESTIMATORS

REFERENCE = ESTIMATORS[0]
ALPHA = 0.05
MARGIN = 0.05
"""Non-inferiority margin: 5 points of success."""
PERMUTATIONS = 10_000
SUITES = ("train_probe", "test")
FAMILY = tuple((arm, suite) for arm in ESTIMATORS if arm != REFERENCE for suite in SUITES)
"""Every comparison, named before the first block: each estimator arm against slca on each suite."""
NO_DIFFERENCE = "no difference detected"
RULE = (
    f"Estimator arms ({', '.join(ESTIMATORS)}) at one recipe, in blocks of their own; each arm against "
    f"{REFERENCE}, item by item within blocks, on the training probe and the test split ({len(FAMILY)} comparisons, "
    "named before the first block). 95% bootstrap interval over items (and blocks when ≥ 3). Difference: two-sided "
    f"paired sign-flip test ({PERMUTATIONS} flips), Holm-corrected over the {len(FAMILY)} at α = {ALPHA}; "
    f'"X better" or "{REFERENCE} better" when the Holm p < α and the interval excludes 0, else "{NO_DIFFERENCE}". '
    f"Non-inferiority, margin {MARGIN * 100:.0f} points: one-sided sign-flip test of the difference > "
    f"−{MARGIN * 100:.0f} points, Holm-corrected over the same {len(FAMILY)} at α = {ALPHA}, and the interval's "
    f"lower end above −{MARGIN * 100:.0f} points."
)


def one_sided_p(diffs: np.ndarray, perms: int, rng: np.random.Generator) -> float:
    """p of `mean_i d_i > 0` by random sign flips of the per-item differences (Monte-Carlo +1)."""
    signs = rng.integers(0, 2, size=(perms, diffs.size)) * 2.0 - 1.0
    flipped = signs @ diffs / diffs.size
    extreme = np.count_nonzero(flipped >= diffs.mean() - 1e-12)  # ties count: sums in another order
    return float((extreme + 1) / (perms + 1))


def holm_family(p: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Holm-adjusted p of every comparison of `FAMILY`; a comparison without data counts as p = 1."""
    from ops.experiments.learning.inference import holm

    adjusted = holm(np.array([p.get(c, 1.0) for c in FAMILY]))
    return {c: float(a) for c, a in zip(FAMILY, adjusted) if c in p}


def compare_estimators(blocks: list[dict], seed: int = 0) -> dict:
    """{"rule", "comparisons": [per arm and suite: the paired figures, p, Holm p, verdict, non-inferiority]}."""
    from ops.experiments.learning.inference import sign_flip_p
    from ops.experiments.learning.recipe_pairs import block_pairs, item_differences, paired

    rng = np.random.default_rng(seed)
    figures, p_diff, p_ni = {}, {}, {}
    for arm, suite in FAMILY:
        c = paired(blocks, arm, REFERENCE, suite, seed)
        if c is None:
            continue
        d = np.array(list(item_differences(block_pairs(blocks, arm, REFERENCE, suite)).values()))
        figures[arm, suite] = c
        p_diff[arm, suite] = float(sign_flip_p(d[None, :], PERMUTATIONS, rng)[0])
        p_ni[arm, suite] = one_sided_p(d + MARGIN, PERMUTATIONS, rng)
    holm_diff, holm_ni = holm_family(p_diff), holm_family(p_ni)
    rows = []
    for arm, suite in FAMILY:
        c = figures.get((arm, suite))
        if c is None:
            rows.append({"arm": arm, "suite": suite, "paired": None})
            continue
        lo, hi = c["ci95"]
        rows.append(
            {
                "arm": arm,
                "suite": suite,
                "paired": c,
                "p": p_diff[arm, suite],
                "p_holm": holm_diff[arm, suite],
                "verdict": difference_verdict(arm, holm_diff[arm, suite], lo, hi),
                "p_non_inferiority": p_ni[arm, suite],
                "p_non_inferiority_holm": holm_ni[arm, suite],
                "non_inferior": bool(holm_ni[arm, suite] < ALPHA and lo > -MARGIN),
            }
        )
    return {"rule": RULE, "reference": REFERENCE, "blocks": len(blocks), "comparisons": rows}


def difference_verdict(arm: str, p_holm: float, low: float, high: float) -> str:
    if p_holm < ALPHA and low > 0:
        return f"{arm} better"
    if p_holm < ALPHA and high < 0:
        return f"{REFERENCE} better"
    return NO_DIFFERENCE


def markdown(result: dict) -> list[str]:
    """The report's section: the rule, then one row per comparison."""
    lines = [
        "## Estimator comparison (estimator-blocks)",
        "",
        f"Rule (fixed before the first estimator block): {result['rule']}",
        "",
        f"Blocks: {result['blocks']}",
        "",
        f"| arm vs {result['reference']} | suite | success (vs {result['reference']}) | Δ points [95%] | p | Holm p "
        "| verdict | non-inferior (5 points) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["comparisons"]:
        c = row["paired"]
        if c is None:
            lines.append(f"| {row['arm']} | {row['suite']} | – | – | – | – | no block yet | – |")
            continue
        lo, hi = c["ci95"]
        lines.append(
            f"| {row['arm']} | {row['suite']} | {c['a']:.3f} ({c['b']:.3f}) | {c['diff'] * 100:+.1f} "
            f"[{lo * 100:+.1f}, {hi * 100:+.1f}] (+{c['gained']}/−{c['lost']}) | {row['p']:.4f} | "
            f"{row['p_holm']:.4f} | {row['verdict']} | {'yes' if row['non_inferior'] else 'not shown'} "
            f"(Holm p {row['p_non_inferiority_holm']:.4f}) |"
        )
    return lines
