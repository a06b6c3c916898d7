"""`slca bench learning`, the plan: warm start → its evaluation (per-item outcomes) → budget (recorded plan, or
sized from a measured calibration and refused when over `--minutes`) → every (arm, seed) run not yet done →
paired verdicts, results, plot. Re-running the same command resumes: finished runs (and their per-item files)
are read back, an unfinished one redone."""

from __future__ import annotations

import logging
from pathlib import Path

from learner.settings import LearnerSettings
from ops.experiments.learning.files import PathScrubber, read_json, write_json
from ops.experiments.learning.plan import Calibration, Plan, auto_curve_every, describe, plan_seconds
from ops.experiments.learning.plan import run_seconds, steps_for_minutes
from slca.cli import CliError
from slca.config import Config

log = logging.getLogger("slca.bench")
LR_SCHEDULE = "constant: AdamW, no warm-up or decay (`slca train`)"


def run_bench_learning(args, config: Config) -> int:
    from ops.experiments.learning.calibration import calibrate
    from ops.experiments.learning.evaluation import evaluate_warm_start
    from ops.experiments.learning.progress import Progress
    from ops.experiments.learning.runner import TrainContext, load_done, run_one
    from ops.experiments.warmstart.model import resolve_warm_start
    from slca.models.paths import models_dir

    out = args.out.resolve()
    model_dir = resolve_warm_start(args.model, config)
    draft = make_plan(args, config, model_dir.name, steps=max(args.steps, 0))
    if len(draft.seeds) < 3:
        log.warning("%d seeds: the seed resampling behind the intervals needs ≥ 3 to mean much", len(draft.seeds))
    recorded = recorded_plan(out, draft, args)
    out.mkdir(parents=True, exist_ok=True)
    ctx = TrainContext(config, config_args(args), model_dir, recorded or draft)
    print(f"bench learning → {args.out}: warm start {model_dir.name} (evaluated once)", flush=True)
    warm = evaluate_warm_start(config, model_dir, ctx.spec, out)
    if warm["n_items"] < MIN_ITEMS:
        log.warning(
            "%d held-out items (< %d): a 10-point difference will mostly go undetected; the real run "
            "evaluates every item of test + novel (--eval-items 0)",
            warm["n_items"],
            MIN_ITEMS,
        )
    cal, cal_s = None, 0.0
    if recorded is None and (args.minutes > 0 or args.steps <= 0):
        cal, cal_s = calibrate(ctx, out, warm["eval_s"], warm["curve_eval_s"])
    elif (saved := read_json(out / "calibration.json")) is not None:
        cal, cal_s = Calibration(**saved["calibration"]), float(saved["seconds"])
    plan = recorded or size(args, config, draft, cal, cal_s, model_dir.name)
    print(describe(plan, cal, cal_s), flush=True)
    if recorded is None:
        check_budget(plan, cal, cal_s, args.minutes)
        write_json(out / "plan.json", plan.to_json())
    if args.plan_only:
        return 0
    ctx = TrainContext(config, config_args(args), model_dir, plan)
    estimate = run_seconds(cal, plan.steps, plan.curve_every, plan.curve) if cal else None
    progress = Progress(len(plan.runs), estimate)
    records = []
    for key in plan.runs:
        done = load_done(out / "runs" / key.name)
        if done is None:
            progress.start(key.name)
        record = run_one(ctx, key, out, progress.set_phase)
        progress.finished(record["seconds"], skipped=done is not None)
        records.append(record)
    scrub = PathScrubber(Path.cwd(), models_dir(Path(config.common.cache_dir)))
    write_outputs(args, plan, warm, records, cal, cal_s, out, scrub)
    return 0


MIN_ITEMS = 200
"""`ops.experiments.learning.evaluation.MIN_ITEMS`, kept light here (that module is imported only when running)."""


def make_plan(args, config: Config, model_name: str, steps: int) -> Plan:
    if args.arms is None:
        from ops.experiments.learning.arms import default_arms

        arms = default_arms()
    else:
        arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    try:
        seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    except ValueError:
        raise CliError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    check_choices(arms, seeds, args)
    s = config.get(LearnerSettings)
    return Plan(
        model=model_name,
        arms=arms,
        seeds=seeds,
        steps=steps,
        group_size=s.train_group_size,
        temperature=s.train_temperature,
        max_tokens=s.train_max_tokens,
        lr=s.lr,
        lr_schedule=LR_SCHEDULE,
        pack=args.pack,
        eval_items=args.eval_items,
        eval_max_tokens=args.eval_max_tokens,
        eval_engine=args.eval_engine,
        curve=args.curve,
        curve_every=args.curve_every or (auto_curve_every(steps) if steps else 0),
        curve_items=args.curve_items,
        train_args=tuple(args.train_arg),
    )


def check_choices(arms: tuple[str, ...], seeds: tuple[int, ...], args) -> None:
    from ops.experiments.learning.arms import resolve_arm

    for a in arms:
        resolve_arm(a)  # a CLI error naming the known arms and estimators
    if not arms or not seeds or len(set(arms)) != len(arms) or len(set(seeds)) != len(seeds):
        raise CliError("--arms and --seeds must be non-empty and without repeats")
    for name in ("curve_items", "eval_max_tokens"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be ≥ 1")
    if args.steps < 0 or args.minutes < 0 or args.curve_every < 0 or args.eval_items < 0:
        raise CliError("--steps, --minutes, --curve-every and --eval-items must be ≥ 0")


def config_args(args) -> tuple[str, ...]:
    return (*(["--config", args.config] if args.config else []), *[a for s in args.set for a in ("--set", s)])


def recorded_plan(out: Path, draft: Plan, args) -> Plan | None:
    """The plan an earlier invocation recorded in `<out>/plan.json`; the same command must reproduce it (steps
    and curve spacing it sized itself are taken from the record unless given explicitly)."""
    data = read_json(out / "plan.json")
    if data is None:
        return None
    plan = Plan.from_json(data)
    sized = {"steps": args.steps or plan.steps, "curve_every": args.curve_every or plan.curve_every}
    compare = Plan.from_json(draft.to_json() | sized)
    diffs = plan.differences(compare)
    if diffs:
        raise CliError(
            f"{out / 'plan.json'} records another plan ({'; '.join(diffs)}): resume with the same "
            "arguments and settings, or start over in another --out (or after deleting that one)"
        )
    print(f"resuming the plan recorded in {out / 'plan.json'}", flush=True)
    return plan


def size(args, config: Config, draft: Plan, cal: Calibration | None, cal_s: float, model_name: str) -> Plan:
    """The plan with its steps: `--steps`, else the most that fit in `--minutes` by the calibration."""
    if args.steps > 0:
        return draft
    n_runs = len(draft.runs)
    steps = steps_for_minutes(cal, args.minutes, n_runs, args.curve_every, draft.curve, cal_s)
    if steps == 0:
        need = (cal_s + plan_seconds(cal, n_runs, 1, args.curve_every, draft.curve)) / 60
        raise CliError(
            f"even 1 step per run needs ≈ {need:.0f} min for {n_runs} runs (measured: startup "
            f"{cal.startup_s:.0f} s, {cal.step_s:.0f} s/step, evaluation {cal.eval_s:.0f} s) > "
            f"--minutes {args.minutes:g}: raise --minutes, or lower the seeds or arms"
        )
    return make_plan(args, config, model_name, steps)


def check_budget(plan: Plan, cal: Calibration | None, cal_s: float, minutes: float) -> None:
    if cal is None or minutes <= 0:
        return
    total = (cal_s + plan_seconds(cal, len(plan.runs), plan.steps, plan.curve_every, plan.curve)) / 60
    if total > minutes:
        raise CliError(
            f"the plan needs ≈ {total:.0f} min > --minutes {minutes:g} ({len(plan.runs)} runs × "
            f"{plan.steps} steps at {cal.step_s:.0f} s/step, {cal.eval_s:.0f} s per evaluation, "
            f"{len(plan.curve_steps)} curve points per run): lower --steps, --eval-limit or --seeds, "
            "use --curve reward, or raise --minutes"
        )


def write_outputs(
    args,
    plan: Plan,
    warm: dict,
    records: list[dict],
    cal: Calibration | None,
    cal_s: float,
    out: Path,
    scrub: PathScrubber,
) -> None:
    from ops.experiments.eval.suite import read_jsonl
    from ops.experiments.learning.evaluation import outcomes
    from ops.experiments.learning.plot import plot_curves
    from ops.experiments.learning.provenance import budget, command_line
    from ops.experiments.learning.results import Comparison, curves_json, write_results
    from ops.experiments.learning.verdict import judge

    runs: dict[str, dict[int, dict[str, bool]]] = {}
    for r in records:
        runs.setdefault(r["arm"], {})[r["seed"]] = outcomes(
            read_jsonl(out / "runs" / f"{r['arm']}-s{r['seed']}" / "items.jsonl")
        )
    verdict = judge(outcomes(warm["records"]), runs, list(plan.arms))
    out_text = scrub.path(out)
    comparison = Comparison(
        plan,
        {k: v for k, v in warm.items() if k != "records"},
        records,
        budget(plan, records, cal, cal_s, args.minutes, warm),
        command_line(args, plan, out_text, scrub),
        verdict,
    )
    write_results(comparison, out)
    plot_curves(
        curves_json(comparison),
        out / "learning.png",
        f"{plan.model}: {len(plan.seeds)} seeds × {plan.steps} steps × group {plan.group_size}",
    )
    print(verdict.markdown())
    print(f"results: {out_text}/results.md, results.json, curves.json, learning.png")
