"""The result files of a comparison from the finished runs' records: `results.json` (`primary_metric`, the
comparisons' verdicts, `warm_start`, `runs`, `budget`, `command`), `curves.json` (the learning curves behind the
plot), `results.md` (the rule and α first, then the verdicts, then the rest)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, stdev

from ops.experiments.learning.diagnostics import DIAGNOSTICS
from ops.experiments.learning.evaluation import PRIMARY_METRIC, PRIMARY_WHY
from ops.experiments.learning.files import machine_paths, write_atomic, write_json
from ops.experiments.learning.plan import Plan
from ops.experiments.learning.verdict import Verdict, curve_slopes
from slca.cli import CliError


@dataclass(frozen=True)
class Stats:
    """Mean ± sample sd over seeds (a description in the tables; the verdict is
    `ops.experiments.learning.verdict`'s)."""

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
    """Everything the result files are made of (no machine paths: the model by name, `out` relative)."""

    plan: Plan
    warm: dict
    """The warm start's record: `metrics` and its curve point `curve0` (on the curve items)."""
    records: list[dict]
    """The runs' `done.json` records, in plan order."""
    budget: dict
    command: str
    verdict: Verdict

    @property
    def metric_names(self) -> list[str]:
        names = list(self.warm["metrics"])
        return [PRIMARY_METRIC, *[n for n in names if n != PRIMARY_METRIC]]

    def values(self, arm: str, metric: str) -> list[float]:
        """Per-seed values (None entries: a diagnostic `slca train` did not log)."""
        found = [r["metrics"].get(metric, r["diagnostics"].get(metric)) for r in self.records if r["arm"] == arm]
        return [v for v in found if v is not None]

    def curves(self) -> dict[str, list[list[list[float]]]]:
        return {a: [r["curve"] for r in self.records if r["arm"] == a and r["curve"]] for a in self.plan.arms}


def results_json(c: Comparison) -> dict:
    runs = [
        {
            "arm": r["arm"],
            "estimator": r["estimator"],
            "advantage": r.get("advantage", {}),
            "seed": r["seed"],
            **r["metrics"],
            **r["diagnostics"],
        }
        for r in c.records
    ]
    return {
        "primary_metric": PRIMARY_METRIC,
        "verdict": c.verdict.to_json(),
        "warm_start": dict(c.warm["metrics"]),
        "runs": runs,
        "budget": c.budget,
        "command": c.command,
    }


def curves_json(c: Comparison) -> dict:
    source = (
        f"eval: {PRIMARY_METRIC} on {c.plan.curve_items} fixed held-out items (step 0: the warm start on "
        "the same items)"
        if c.plan.curve == "eval"
        else "reward: the per-step training execution reward"
    )
    return {
        "metric": PRIMARY_METRIC,
        "source": source,
        "warm_start": c.warm.get("curve0"),
        "comparisons": c.verdict.to_json()["comparisons"],
        "runs": [{k: r[k] for k in ("arm", "seed", "curve", "exec_reward", "tool_turns")} for r in c.records],
    }


def _cell(values: list[float]) -> str:
    return Stats.of(values).text() if values else "n/a"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *["| " + " | ".join(r) + " |" for r in rows]]


def results_md(c: Comparison) -> str:
    p, metrics = c.plan, c.metric_names
    n_seeds = len(p.seeds)
    lines = [
        f"# Estimator comparison: {' vs '.join(p.arms)}",
        "",
        f"From `{p.model}`, {n_seeds} seeds ({', '.join(map(str, p.seeds))}), {p.steps} rollout groups of "
        f"{p.group_size} per run; primary metric `{PRIMARY_METRIC}`.",
        "",
        "## Verdict",
        "",
        c.verdict.markdown(),
        "",
    ]
    if n_seeds < 3:
        lines += [f"Only {n_seeds} seeds: the seed-level spread behind the intervals is poorly known.", ""]
    lines += ["## Primary metric", "", PRIMARY_WHY, ""]
    lines += ["## Final evaluation (mean ± sd over seeds; greedy; the warm start once)", ""]
    rows = [["warm start", *[_fmt(c.warm["metrics"].get(m)) for m in metrics]]]
    rows += [[a, *[_cell(c.values(a, m)) for m in metrics]] for a in p.arms]
    lines += [*_table(["model", *metrics], rows), ""]
    diag = sorted({k for r in c.records for k in r["diagnostics"]}) or list(DIAGNOSTICS)
    lines += [
        "## Diagnostics of the training rollouts (mean ± sd over seeds)",
        "",
        *[f"- `{k}`: {v}" for k, v in DIAGNOSTICS.items()],
        "",
    ]
    lines += [*_table(["arm", *diag], [[a, *[_cell(c.values(a, m)) for m in diag]] for a in p.arms]), ""]
    lines += ["## Per seed", ""]
    per_seed = [
        [r["arm"], str(r["seed"]), *[_fmt(r["metrics"].get(m)) for m in metrics], f"{r['seconds'] / 60:.1f}"]
        for r in c.records
    ]
    lines += [
        *_table(["arm", "seed", *metrics, "minutes"], per_seed),
        "",
        "(per-item records: `runs/<arm>-s<seed>/items.jsonl`, `warm_start.items.jsonl`)",
        "",
    ]
    slopes = curve_slopes(c.curves(), c.warm.get("curve0"))
    slope_text = ", ".join(f"{a} {v:+.1f}" for a, v in slopes.items() if v is not None) or "n/a"
    curve = (
        f"`{PRIMARY_METRIC}` on {p.curve_items} fixed held-out items at steps 0 (the warm start), "
        f"{p.curve_steps}: the same items at every point"
        if p.curve == "eval"
        else "the per-step training execution reward (no curve evaluations; `--curve reward`)"
    )
    lines += [
        "## Learning curves",
        "",
        f"`learning.png`, data in `curves.json`: {curve}; band: min–max over seeds. "
        "Right panel: the comparisons' effects with their 95% intervals.",
        "",
        f"Least-squares slopes of the seed-mean curves (points per 100 steps; descriptive, not tested): {slope_text}.",
        "",
    ]
    lines += [
        "## Budget",
        "",
        "```",
        *[f"{k}: {v}" for k, v in c.budget.items()],
        "```",
        "",
        "## Command",
        "",
        "```",
        c.command,
        "```",
    ]
    return "\n".join(lines) + "\n"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def write_results(c: Comparison, out: Path) -> None:
    data = results_json(c)
    left = machine_paths(data)
    if left:  # the scrubber missed something: better a loud error than a committed home folder
        raise CliError(f"machine paths left in results.json: {left[:5]} (rerun after fixing: every run is done)")
    write_json(out / "results.json", data)
    write_json(out / "curves.json", curves_json(c))
    write_atomic(out / "results.md", results_md(c))
