"""The verdict, computed from the numbers: does the best estimator beat the warm start by more than the seed
spread; does SLCA-GRPO beat each baseline by more than the spread; if not, what budget the curves suggest.

Rule, fixed before any run: A beats B when `mean(A) − mean(B) > spread`, with spread the larger of the two
sample standard deviations over seeds (the warm start is one model, evaluated greedily: its sd is 0). With
fewer than two seeds there is no spread and no verdict. Budget suggestion: the slope of the mean primary-metric
curve per step (least squares over the curve points, the warm start at step 0; without curve evaluations the
two-point slope from the warm start to the final models), extrapolated linearly until the margin exceeds the
spread — a straight-line guess, stated as such."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean, stdev

REFERENCE = "slca"
MEANING = {
    "positive": "SLCA-GRPO beats every baseline, and the warm start, by more than the seed spread",
    "negative": "a baseline beats SLCA-GRPO by more than the seed spread",
    "mixed": "some differences exceed the seed spread, but not the full claim (SLCA-GRPO above every baseline "
             "and above the warm start)",
    "null": "no difference exceeds the seed spread: at this budget the estimators and the warm start are not "
            "told apart",
    "undetermined": "not enough runs to judge",
}


@dataclass(frozen=True)
class Stats:
    mean: float
    sd: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no values")
        return cls(fmean(values), stdev(values) if len(values) > 1 else 0.0, len(values))

    def text(self) -> str:
        return f"{self.mean:.3f} ± {self.sd:.3f}" if self.n > 1 else f"{self.mean:.3f}"


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    sa: Stats
    sb: Stats

    @property
    def margin(self) -> float:
        return self.sa.mean - self.sb.mean

    @property
    def spread(self) -> float:
        return max(self.sa.sd, self.sb.sd)

    @property
    def a_beats_b(self) -> bool:
        return self.margin > self.spread

    @property
    def b_beats_a(self) -> bool:
        return -self.margin > self.spread

    def text(self) -> str:
        outcome = ("beats it" if self.a_beats_b else "loses to it" if self.b_beats_a else
                   "is not separable from it")  # fmt: skip
        sign = "more" if abs(self.margin) > self.spread else "not more"
        return (f"{self.a} {self.sa.text()} vs {self.b} {self.sb.text()}: margin {self.margin:+.3f}, {sign} than "
                f"the spread {self.spread:.3f} → {self.a} {outcome}")  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    label: str
    """positive | negative | null | mixed | undetermined"""
    lines: list[str]

    def markdown(self) -> str:
        return "\n".join([f"**Verdict: {self.label}** — {MEANING[self.label]}.", "", *[f"- {x}" for x in self.lines]])


def mean_curve(curves: list[list[list[float]]]) -> list[tuple[float, float]]:
    """Mean over seeds at each step: [(step, mean value)], steps ascending."""
    by_step: dict[float, list[float]] = defaultdict(list)
    for curve in curves:
        for step, value in curve:
            by_step[step].append(value)
    return [(s, fmean(v)) for s, v in sorted(by_step.items())]


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope (value per step); None with fewer than two distinct steps."""
    if len({s for s, _ in points}) < 2:
        return None
    ms, mv = fmean(s for s, _ in points), fmean(v for _, v in points)
    return sum((s - ms) * (v - mv) for s, v in points) / sum((s - ms) ** 2 for s, _ in points)


@dataclass(frozen=True)
class Evidence:
    """What the verdict reads: per estimator the per-seed final values of the primary metric and the curves."""

    metric: str
    warm: float
    finals: dict[str, list[float]]
    curves: dict[str, list[list[list[float]]]]
    """estimator → per seed [[step, value], …] of the primary metric (empty without curve evaluations)."""
    steps: int
    step_s: float | None
    """Measured seconds per step (turns a step count into time); None when unknown."""

    def slope_of(self, estimator: str) -> tuple[float | None, str]:
        points = mean_curve(self.curves.get(estimator, []))
        if len(points) >= 2:
            return slope([(0.0, self.warm), *[(s, v) for s, v in points if s > 0]]), "least squares over its curve"
        if self.steps > 0:
            return (fmean(self.finals[estimator]) - self.warm) / self.steps, "warm start → final models"
        return None, "no steps"


def _budget_hint(gap: float, rate: float | None, how: str, ev: Evidence, what: str) -> str:
    """How many more steps a straight line at `rate` per step needs to close `gap` (spread − margin)."""
    if rate is None:
        return f"no curve to extrapolate {what} from"
    if rate <= 0:
        return (f"{what} does not grow along the curves ({rate:+.4f} per step, {how}): the curves suggest no step "
                "budget at which it would — the limit is elsewhere (learning rate, group size, warm start)")
    more = gap / rate
    when = f"≈ {more:.0f} more steps per run (≈ {ev.steps + more:.0f} in all)"
    if ev.step_s:
        when += f", ≈ {more * ev.step_s / 60:.0f} more minutes of training per run at {ev.step_s:.1f} s/step"
    return f"at {rate:+.4f} per step ({how}) {what} would exceed the spread after {when} — a straight-line guess"


def judge(ev: Evidence, reference: str = REFERENCE) -> Verdict:
    stats = {e: Stats.of(v) for e, v in ev.finals.items() if v}
    if not stats:
        return Verdict("undetermined", ["no finished run"])
    if min(s.n for s in stats.values()) < 2:
        return Verdict("undetermined", [f"fewer than two seeds for {', '.join(e for e, s in stats.items() if s.n < 2)}"
                                        ": no seed spread to judge a difference against"])  # fmt: skip
    lines = []
    best = max(stats, key=lambda e: stats[e].mean)
    vs_warm = Comparison(best, "the warm start", stats[best], Stats(ev.warm, 0.0, 1))
    lines.append(f"Best estimator vs warm start ({ev.metric}): {vs_warm.text()}.")
    if not vs_warm.a_beats_b:
        rate, how = ev.slope_of(best)
        lines.append(f"Budget: {_budget_hint(vs_warm.spread - vs_warm.margin, rate, how, ev, f'{best} − warm start')}.")
    comps = [Comparison(reference, b, stats[reference], stats[b]) for b in stats if b != reference] \
        if reference in stats else []  # fmt: skip
    for c in comps:
        lines.append(f"SLCA-GRPO vs {c.b}: {c.text()}.")
        if not c.a_beats_b:
            ra, how = ev.slope_of(reference)
            rb, _ = ev.slope_of(c.b)
            rate = None if ra is None or rb is None else ra - rb
            lines.append(f"Budget: {_budget_hint(c.spread - c.margin, rate, how, ev, f'{reference} − {c.b}')}.")
    if not comps:
        lines.append(f"{reference} was not run: no SLCA-GRPO comparison.")
    return Verdict(_label(vs_warm, comps), lines)


def _label(vs_warm: Comparison, comps: list[Comparison]) -> str:
    if any(c.b_beats_a for c in comps):
        return "negative"  # a baseline beats SLCA-GRPO by more than the spread
    if comps and all(c.a_beats_b for c in comps) and vs_warm.a_beats_b:
        return "positive"
    if any(c.a_beats_b for c in comps) or vs_warm.a_beats_b:
        return "mixed"
    return "null"
