"""The verdict, computed from the per-item outcomes by the rule fixed before the run
(`ops.experiments.learning.inference`): the named family of comparisons — SLCA-GRPO against each other arm, every arm
against the warm start — each with its effect in points, 95% interval, p and Holm-adjusted p, and "A better" / "B
better" / "no difference detected".

`results.md` states the rule and α first, then these numbers."""

from __future__ import annotations

from dataclasses import dataclass

from ops.experiments.learning.arms import REFERENCE
from ops.experiments.learning.inference import ALPHA, BOOTSTRAP_REPS, NO_DIFFERENCE, PERMUTATIONS, RULE, Effect
from ops.experiments.learning.inference import compare_family, family, outcome_arrays

WARM = "warm_start"


@dataclass(frozen=True)
class Verdict:
    effects: list[Effect]
    n_items: int
    """Items every model answered (the paired comparisons' N)."""
    dropped: int
    """Items some model lacks (left out of every comparison; 0 when every run evaluated the same items)."""
    note: str = ""

    def lines(self) -> list[str]:
        return [
            f"{e.a} vs {e.b}: {e.verdict} — {e.effect:+.1f} points [{e.ci_low:+.1f}, {e.ci_high:+.1f}], "
            f"p = {e.p:.4f}, Holm p = {e.p_holm:.4f}"
            for e in self.effects
        ]

    def markdown(self) -> str:
        head = [
            RULE,
            "",
            f"α = {ALPHA}. Family: {len(self.effects)} comparisons, on {self.n_items} held-out items "
            f"answered by every model"
            + (f" ({self.dropped} items missing from some run left out)" if self.dropped else "")
            + ".",
            "",
        ]
        if self.note:
            head += [self.note, ""]
        rows = [
            "| comparison | A | B | effect A − B (points) | 95% interval | p | Holm p | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows += [
            f"| {e.a} vs {e.b} | {100 * e.a_rate:.1f}% ({e.seeds_a} seeds) | {100 * e.b_rate:.1f}% "
            f"({e.seeds_b} seeds) | {e.effect:+.1f} | [{e.ci_low:+.1f}, {e.ci_high:+.1f}] | {e.p:.4f} | "
            f"{e.p_holm:.4f} | **{e.verdict}** |"
            for e in self.effects
        ]
        return "\n".join(head + rows)

    def to_json(self) -> dict:
        return {
            "alpha": ALPHA,
            "rule": RULE,
            "n_items": self.n_items,
            "dropped_items": self.dropped,
            "comparisons": [e.to_json() for e in self.effects],
        }

    @property
    def detected(self) -> list[Effect]:
        return [e for e in self.effects if e.verdict != NO_DIFFERENCE]


def judge(
    warm: dict[str, bool],
    runs: dict[str, dict[int, dict[str, bool]]],
    arms: list[str],
    reps: int = BOOTSTRAP_REPS,
    perms: int = PERMUTATIONS,
) -> Verdict:
    """`warm`: the warm start's `{item key: success}`; `runs`: `{arm: {seed: {item key: success}}}` of the
    finished runs. Arms without a finished run are left out of the family (and said so)."""
    present = [a for a in arms if runs.get(a)]
    missing = [a for a in arms if a not in present]
    arrays, keys = outcome_arrays({WARM: {0: warm}, **{a: runs[a] for a in present}})
    dropped = len(set(warm) | {k for seeds in runs.values() for items in seeds.values() for k in items}) - len(keys)
    note = f"Not run (left out of the family): {', '.join(missing)}." if missing else ""
    if not keys or not present:
        return Verdict([], len(keys), dropped, note or "No finished run: nothing to compare.")
    effects = compare_family(arrays, family(present, REFERENCE, WARM), reps=reps, perms=perms)
    return Verdict(effects, len(keys), dropped, note)


def curve_slopes(curves: dict[str, list[list[list[float]]]], warm0: float | None) -> dict[str, float | None]:
    """Per arm, the least-squares slope (points per 100 steps) of its seed-mean curve, the warm start's outcome on
    the same curve items at step 0: every point is on the same items, so the slope is not an artefact of two
    subsets (a description of the curves, not a test)."""
    out: dict[str, float | None] = {}
    for arm, runs in curves.items():
        by_step: dict[float, list[float]] = {}
        for curve in runs:
            for step, value in curve:
                by_step.setdefault(step, []).append(value)
        points = ([(0.0, warm0)] if warm0 is not None else []) + [(s, sum(v) / len(v)) for s, v in by_step.items()]
        out[arm] = slope(points)
    return out


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope in points per 100 steps; None with fewer than two distinct steps."""
    if len({s for s, _ in points}) < 2:
        return None
    ms = sum(s for s, _ in points) / len(points)
    mv = sum(v for _, v in points) / len(points)
    b = sum((s - ms) * (v - mv) for s, v in points) / sum((s - ms) ** 2 for s, _ in points)
    return 100 * 100 * b
