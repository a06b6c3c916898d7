"""The result files of a comparison from the finished runs' records: `results.json` (the schema of issue 14,
nothing else in it), `curves.json` (the learning curves behind the plot), `results.md` (verdict first)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ops.learning.diagnostics import DIAGNOSTICS
from ops.learning.evaluation import PRIMARY_METRIC, PRIMARY_WHY
from ops.learning.files import machine_paths, write_atomic, write_json
from ops.learning.plan import Plan
from ops.learning.verdict import Evidence, Stats, Verdict
from slca.cli import CliError


@dataclass(frozen=True)
class Comparison:
    """Everything the result files are made of (no machine paths: the model by name, `out` relative)."""

    plan: Plan
    warm: dict
    """The warm start's record: `metrics` and its curve point `curve0` (None without curve evaluations)."""
    records: list[dict]
    """The runs' `done.json` records, in plan order."""
    budget: dict
    command: str

    @property
    def metric_names(self) -> list[str]:
        names = list(self.warm["metrics"])
        return [PRIMARY_METRIC, *[n for n in names if n != PRIMARY_METRIC]]

    def values(self, estimator: str, metric: str) -> list[float]:
        """Per-seed values (None entries: a diagnostic `slca train` did not log)."""
        found = [r["metrics"].get(metric, r["diagnostics"].get(metric)) for r in self.records
                 if r["estimator"] == estimator]  # fmt: skip
        return [v for v in found if v is not None]

    def evidence(self, step_s: float | None) -> Evidence:
        est = self.plan.estimators
        return Evidence(metric=PRIMARY_METRIC, warm=self.warm["metrics"][PRIMARY_METRIC],
                        finals={e: self.values(e, PRIMARY_METRIC) for e in est},
                        curves={e: [r["curve"] for r in self.records if r["estimator"] == e and r["curve"]]
                                for e in est},
                        steps=self.plan.steps, step_s=step_s)  # fmt: skip


def results_json(c: Comparison) -> dict:
    runs = [{"estimator": r["estimator"], "seed": r["seed"], **r["metrics"], **r["diagnostics"]} for r in c.records]
    return {"primary_metric": PRIMARY_METRIC, "warm_start": dict(c.warm["metrics"]), "runs": runs,
            "budget": c.budget, "command": c.command}  # fmt: skip


def curves_json(c: Comparison) -> dict:
    source = ("eval: the primary metric on the first {} in-domain test tasks".format(c.plan.curve_limit)
              if c.plan.curve == "eval" else "reward: the per-step training execution reward")  # fmt: skip
    return {"metric": PRIMARY_METRIC, "source": source, "warm_start": c.warm.get("curve0"),
            "runs": [{k: r[k] for k in ("estimator", "seed", "curve", "exec_reward", "tool_turns")}
                     for r in c.records]}  # fmt: skip


def _cell(values: list[float]) -> str:
    return Stats.of(values).text() if values else "n/a"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *["| " + " | ".join(r) + " |" for r in rows]]


def results_md(c: Comparison, verdict: Verdict) -> str:
    p, metrics = c.plan, c.metric_names
    n_seeds = len(p.seeds)
    lines = [f"# Estimator comparison: {' vs '.join(p.estimators)}", "",
             f"From `{p.model}`, {n_seeds} seeds ({', '.join(map(str, p.seeds))}), {p.steps} rollout groups of "
             f"{p.group_size} per run; primary metric `{PRIMARY_METRIC}`.", "",
             "## Verdict", "", verdict.markdown(), "",
             "Rule (fixed before the run): A beats B when mean(A) − mean(B) exceeds the spread, the larger of the "
             "two sample standard deviations over seeds (the warm start, evaluated greedily once, has none).", ""]
    if n_seeds < 3:
        lines += [f"Only {n_seeds} seeds: a standard deviation from so few runs is itself very uncertain.", ""]
    lines += ["## Primary metric", "", PRIMARY_WHY, ""]
    lines += [f"## Final evaluation (mean ± sd over seeds; {p.eval_limit} examples per category, greedy)", ""]
    rows = [["warm start", *[f"{c.warm['metrics'][m]:.3f}" for m in metrics]]]
    rows += [[e, *[_cell(c.values(e, m)) for m in metrics]] for e in p.estimators]
    lines += [*_table(["model", *metrics], rows), ""]
    diag = list(DIAGNOSTICS)
    lines += ["## Diagnostics of the training rollouts (mean ± sd over seeds)", "",
              *[f"- `{k}`: {v}" for k, v in DIAGNOSTICS.items()], ""]  # fmt: skip
    lines += [*_table(["estimator", *diag], [[e, *[_cell(c.values(e, m)) for m in diag]] for e in p.estimators]), ""]
    lines += ["## Per seed", ""]
    per_seed = [[r["estimator"], str(r["seed"]), *[_fmt(r["metrics"].get(m)) for m in metrics],
                 f"{r['seconds'] / 60:.1f}"] for r in c.records]  # fmt: skip
    lines += [*_table(["estimator", "seed", *metrics, "minutes"], per_seed), "",
              "(per-seed diagnostics: `runs` in results.json)", ""]  # fmt: skip
    curve = (f"the primary metric on the first {p.curve_limit} in-domain test tasks at steps {p.curve_steps} "
             "(step 0: the warm start)" if p.curve == "eval" else
             "the per-step training execution reward (no curve evaluations; `--curve reward`)")  # fmt: skip
    lines += ["## Learning curves", "", f"`learning.png`, data in `curves.json`: {curve}; band: min–max over seeds. "
              "Second panel: tool turns per training episode.", ""]  # fmt: skip
    lines += ["## Budget", "", "```", *[f"{k}: {v}" for k, v in c.budget.items()], "```", "",
              "## Command", "", "```", c.command, "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def write_results(c: Comparison, out: Path, verdict: Verdict) -> None:
    data = results_json(c)
    left = machine_paths(data)
    if left:  # the scrubber missed something: better a loud error than a committed home folder
        raise CliError(f"machine paths left in results.json: {left[:5]} (rerun after fixing: every run is done)")
    write_json(out / "results.json", data)
    write_json(out / "curves.json", curves_json(c))
    write_atomic(out / "results.md", results_md(c, verdict))
