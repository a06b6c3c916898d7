"""`slca bench rl`: TRL's `GRPOTrainer` and slca's online pipeline, one after the other on the same machine, on
the same warm-started model, task pack prompts (train split, Hermes tools), group size, token budget, reward
(HierR), learning rate and precision, each for the same wall time; prints completions/hour, optimizer
updates/hour (steps whose groups all had zero advantage are not updates), completions and tokens trained (not
served), peak RSS and slca ÷ TRL, and where the pipeline's CPU time goes (per process, with its memory at the
peak); the cold first step is excluded on both sides (each window starts after it); TRL's prompt truncation
(`max_prompt_length`, prompts cut) is recorded; writes results.json and table.md to `--out` via
`ops.bench.ab.write` (no machine paths; the command as typed; load average and CPU flags at start and end).

Plan: (1) resolve the model, precision and learning rate once for both; (2) TRL in its own process
(`ops/bench/rl/trl_side.py`), sampled from /proc; (3) `slca up` on its own Redis and data directory
(`ops/bench/rl/slca_side.py`); (4) the report (`ops/bench/rl/report.py`).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from ops.bench.ab import (
    MIN_PAIRS,
    Measurement,
    ResumeError,
    ResumeLog,
    Side,
    Window,
    alternate,
    check_no_paths,
    machine_identity,
    machine_now,
    markdown,
    resume_path,
)
from ops.bench.ab import write as write_checked
from ops.bench.common import bench_command, model_name
from ops.common.machine import machine_facts
from ops.observe.procs import TreeSampler
from ops.bench.rl.report import (
    GIB,
    MEMORY_SAMPLE_S,
    PSS_EVERY_S,
    SideResult,
    SideSpec,
    ratio_spread,
    slca_peaks_gib,
    ratios,
    table,
    verdict,
    where_time_goes,
)
from ops.bench.rl.slca_side import SlcaSpec, run_slca_side
from ops.bench.rl.trl_side import TrlCounts, TrlSpec, learner_heap

log = logging.getLogger("slca.bench.rl")
SIDES = ("trl", "slca")


def resolve_model(requested: str | None, config) -> tuple[str, str | None]:
    """(model directory, warning or None): `--model`, else the `slca sft` warm start, else the embedded model."""
    from ops.experiments.warmstart.model import warm_model_dir
    from slca.models.paths import find_model_dir, is_model_dir

    if requested:
        return str(find_model_dir(requested, config.common.cache_dir, what=f"--model {requested}")), None
    warm = warm_model_dir(config)
    if is_model_dir(warm):
        return str(warm), None
    base = config.common.model_path()
    return str(base), (
        f"no warm start at <cache>/models/{warm.name}: both sides train the raw model, which never "
        "calls a tool (docs/cpu-facts.md#embedded-model): rewards carry little signal; run `slca sft` first"
    )


def trl_available() -> bool:
    try:
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


def run_trl_side(spec: TrlSpec, log_dir: Path, timeout_s: float | None = None) -> SideResult:
    """TRL in a child process; its peak RSS and CPU from /proc."""
    log_dir.mkdir(parents=True, exist_ok=True)
    spec_path, out_path = log_dir / "trl-spec.json", log_dir / "trl-counts.json"
    spec_path.write_text(json.dumps(spec.__dict__))
    with open(log_dir / "trl.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.bench.rl.trl_side", str(spec_path), str(out_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sampler = TreeSampler([proc.pid], lambda cmd: "trl (one process)", MEMORY_SAMPLE_S, pss_every_s=PSS_EVERY_S)
        sampler.start()
        try:
            rc = proc.wait(timeout=timeout_s or spec.seconds + 1800)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sampler.stop()
    if rc != 0 or not out_path.is_file():
        raise RuntimeError(f"TRL's GRPOTrainer exited with {rc}; see {log_dir / 'trl.log'}")
    c = TrlCounts(**json.loads(out_path.read_text()))
    return replace(
        trl_side_result(c, sampler.peak_rss_bytes, sampler.cpu_by_role()),
        memory_samples_per_s=sampler.samples_per_s,
        peak_pss_bytes=sampler.peak_pss_bytes,
        peak_pss_by_process=sampler.peak_pss_by_role,
    )


def trl_side_result(
    c: TrlCounts, peak_rss_bytes: int, cpu_s_by_process: dict[str, float], name: str = "trl"
) -> SideResult:
    """TRL's counts as a `SideResult`: updates and trained figures exclude zero-advantage steps."""
    truncated = (
        f"TRL's max_prompt_length {c.config.get('max_prompt_length')}: {c.prompts_truncated} of "
        f"{c.prompts_seen} prompts truncated"
        if c.config.get("max_prompt_length")
        else "TRL's max_prompt_length: none (prompts not truncated)"
    )
    return SideResult(
        name=name,
        seconds=c.seconds,
        completions=c.completions,
        completions_trained=c.completions_trained,
        updates=c.updates,
        generated_tokens=c.generated_tokens,
        peak_rss_bytes=peak_rss_bytes,
        startup_s=c.startup_s,
        trained_tokens=c.trained_tokens,
        steps=c.steps,
        prompt_tokens=c.prompt_tokens,
        prompt_tokens_trained=c.prompt_tokens_trained,
        model_tokens_trained=c.prompt_tokens_trained + c.trained_tokens,
        cpu_s_by_process=cpu_s_by_process,
        notes=[
            "CPU seconds include TRL's start-up (one process: no split by window)",
            f"{c.zero_advantage_steps} of {c.steps} steps had zero advantage (not updates); "
            f"cold first step {c.cold_step_s:.0f} s excluded",
            truncated,
        ],
        extra={
            "trl_config": c.config,
            "step_seconds": c.step_seconds,
            "cold_step_s": c.cold_step_s,
            "zero_advantage_steps": c.zero_advantage_steps,
            "prompts_seen": c.prompts_seen,
            "prompts_truncated": c.prompts_truncated,
            "mean_reward": c.reward_sum / c.completions if c.completions else None,
        },
    )


def same_wall_time(requested_s: float, trl: SideResult | None) -> float:
    """The pipeline's window: the requested one, or TRL's measured one where its last step overran."""
    return max(requested_s, trl.seconds) if trl is not None else requested_s


COMPARED_BUDGET = (128, 1)
"""(tokens per completion, model turns per episode) of the throughput comparison unless told otherwise: one turn, as
TRL's completions are."""


def episode_budget(args, config) -> None:
    """Fill `--max-new-tokens` and `--max-turns`: as given; else `COMPARED_BUDGET`, or with `--as-shipped` the feed's
    budget as configured (`ops.feed_max_tokens` × `ops.feed_max_turns`, 192 × 3 by default; TRL's completions get
    the same token budget). Either given with `--as-shipped` is refused: it would not be slca as shipped."""
    from ops.settings import OpsSettings
    from slca.cli import CliError

    if not getattr(args, "as_shipped", False):
        args.max_new_tokens = COMPARED_BUDGET[0] if args.max_new_tokens is None else args.max_new_tokens
        args.max_turns = COMPARED_BUDGET[1] if args.max_turns is None else args.max_turns
        return
    if args.max_new_tokens is not None or args.max_turns is not None:
        raise CliError(
            "--as-shipped runs the feed's budget (ops.feed_max_tokens × ops.feed_max_turns): drop --max-new-tokens "
            "and --max-turns, or set those settings"
        )
    ops = config.get(OpsSettings)
    args.max_new_tokens, args.max_turns = ops.feed_max_tokens, ops.feed_max_turns


def run_rl_bench(args, config) -> int:
    from learner.settings import LearnerSettings
    from serve.settings import ServeSettings
    from slca.cli import CliError
    from slca.models.precision import choose_precision

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not sides or set(sides) - set(SIDES):
        raise CliError(f"--sides {args.sides!r}: choose from {', '.join(SIDES)}")
    if "trl" in sides and not trl_available():
        raise CliError("TRL is not installed: `make install-bench` (the benchmark-only [bench] extra)")
    episode_budget(args, config)
    if args.minutes <= 0 or args.group_size < 2 or args.max_new_tokens < 1:
        raise CliError("--minutes > 0, --group-size ≥ 2 and --max-new-tokens ≥ 1 are required")
    both = set(sides) == set(SIDES)
    if both and args.pairs < MIN_PAIRS:
        raise CliError(f"--pairs {args.pairs}: at least {MIN_PAIRS} alternated pairs")
    engine = serve_engine(config, args.pipeline_set)
    args.trl_generation = trl_generation_for(engine, args.trl_generation)
    arms = chosen_arms(getattr(args, "arms", None), args.trl_generation, both)
    model, warning = resolve_model(args.model, config)
    if warning:
        log.warning(warning)
    learner = config.get(LearnerSettings)
    precision = choose_precision({"bf16": "bfloat16", "fp32": "float32"}.get(learner.precision, "auto"))
    print(precision.describe("precision (both sides; the learner's setting)"), flush=True)
    seconds = args.minutes * 60
    machine_start = machine_now()
    log_dir = Path(tempfile.mkdtemp(prefix="slca-bench-rl-logs-"))
    print(f"model {model_name(model)}; {seconds:.0f} s per window; logs in {log_dir}", flush=True)
    alike = SideSpec(model, args.pack, args.group_size, args.max_new_tokens, seconds)
    serve = config.get(ServeSettings)
    trl_spec = TrlSpec(
        **asdict(alike),
        lr=learner.lr,
        bf16=precision.dtype == "bfloat16",
        w_exec=learner.advantage.w_exec,
        w_pref=learner.advantage.w_pref,
        generation=args.trl_generation,
        kv_cache_gib=serve.kv_cache_gib,
        max_model_len=serve.max_model_len,
        **learner_heap(learner),
    )

    def slca_spec(trl: SideResult | None) -> SlcaSpec:
        # TRL stops at the first step end past the deadline: one step can overrun it by minutes on a slow
        # machine. The pipeline gets the wall time TRL actually had, so neither rate covers a shorter run.
        return SlcaSpec(
            **{**asdict(alike), "seconds": same_wall_time(seconds, trl)},
            max_turns=args.max_turns,
            extra_sets=tuple(args.pipeline_set),
            as_shipped=getattr(args, "as_shipped", False),
        )

    facts = machine_facts()
    common = {
        "command": bench_command("rl", sys.argv),
        "machine": {"cpu": facts["cpu"], "cores": facts["cores"], "python": facts["python"]},
        "model": model_name(model),
        "warm_started": warning is None,
        "pack": args.pack,
        "split": "train",
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "minutes_per_window": args.minutes,
        "precision": precision.dtype,
        "lr": learner.lr,
        "serve_engine": engine,
        "trl_generation": args.trl_generation,
        "pipeline_sets": list(args.pipeline_set),
        "as_shipped": getattr(args, "as_shipped", False),
        "max_turns": args.max_turns,
    }
    if both and len(arms) > 2:  # ablations: every arm once per block (ops/bench/rl/blocks.py)
        lines, data = run_arms(args, arms, trl_spec, slca_spec, log_dir, common)
        lines = report_header(model, warning, precision.describe("precision")) + lines
    elif both:
        lines, data = run_alternated(args, trl_spec, slca_spec, log_dir, common)
        lines = report_header(model, warning, precision.describe("precision")) + lines
    else:  # one side alone: a check of that side, no ratio
        result = (
            run_trl_side(trl_spec, log_dir / "trl")
            if sides == ["trl"]
            else run_slca_side(slca_spec(None), log_dir / "slca")
        )
        lines = report_header(model, warning, precision.describe("precision")) + side_lines(result)
        data = {**common, "method": "one side alone (no comparison)", "sides": {result.name: result.to_dict()}}
    data.update(
        machine_start=machine_start,
        machine_end=machine_now(),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    print("\n".join(lines), flush=True)
    write_outputs(args.out, lines, data)
    return 0


WINDOWS_FILE = "windows.jsonl"
"""Beside results.json: one line per measured window (its `Window` and the side's `SideResult`), written as each
window ends, so that the same command after an interruption measures only the windows still missing."""


def chosen_arms(text: str | None, trl_generation: str, both: bool) -> list[str]:
    """`--arms`: the parents and the ablations named (`ops.bench.rl.arms`); ablations need both sides."""
    from ops.bench.rl.arms import parse_arms
    from slca.cli import CliError

    try:
        arms = parse_arms(text, trl_generation)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if len(arms) > 2 and not both:
        raise CliError("--arms needs both sides (--sides trl,slca): each ablation is measured beside its parent")
    return arms


def run_arms(args, arms: list[str], trl_spec: TrlSpec, slca_spec, log_dir: Path, common: dict):
    from ops.bench.rl.blocks import run_blocks
    from slca.cli import CliError

    try:
        return run_blocks(args, arms, trl_spec, slca_spec, log_dir, common, run_trl_side, run_slca_side)
    except ResumeError as exc:
        raise CliError(str(exc)) from exc


def measurement(result: SideResult) -> Measurement:
    """A window's figure for the A/B method: trained tokens per hour (completion tokens of steps that changed the
    weights; the issue's figure), with the other counts as its detail."""
    return Measurement(
        figure=result.trained_tokens_per_s * 3600,
        units=result.trained_tokens,
        seconds=result.seconds,
        waves=result.steps,
        detail={
            "completions": result.completions,
            "completions_trained": result.completions_trained,
            "updates": result.updates,
            "generated_tokens": result.generated_tokens,
            "peak_rss_gib": round(result.peak_rss_bytes / GIB, 3),
        },
    )


def run_alternated(args, trl_spec: TrlSpec, slca_spec, log_dir: Path, common: dict) -> tuple[list[str], dict]:
    """TRL (A) and the pipeline (B) in `args.pairs` alternated pairs of windows (`ops.bench.ab.alternate`; each
    window excludes its own start-up and cold first step, so no further warm-up); resumable from WINDOWS_FILE."""
    from slca.cli import CliError

    spec_keys = ("model", "pack", "group_size", "max_new_tokens", "minutes_per_window", "precision", "lr")
    window_log = ResumeLog(
        resume_path(args.out, WINDOWS_FILE),
        {**{k: common[k] for k in spec_keys}, "pipeline_sets": common["pipeline_sets"], "machine": machine_identity()},
    )
    try:
        earlier = [(Window(**r["window"]), SideResult.from_dict(r["result"])) for r in window_log.load()]
    except ResumeError as exc:
        raise CliError(str(exc)) from exc
    results: dict[tuple[int, str], SideResult] = {(w.pair, w.side): r for w, r in earlier}
    if earlier:
        print(f"resuming: {len(earlier)} window(s) already measured in {WINDOWS_FILE}", flush=True)
    current: dict[str, SideResult] = {}
    pair = {"trl": 0, "slca": 0}

    def measure(side: str):
        def run() -> Measurement:
            while (pair[side], side) in results:  # windows of this side measured before the interruption
                pair[side] += 1
            i = pair[side]
            where = log_dir / f"pair{i + 1}-{side}"
            print(f"pair {i + 1}: {side} window", flush=True)
            if side == "trl":
                r = run_trl_side(trl_spec, where)
            else:
                r = run_slca_side(slca_spec(results.get((i, "trl"))), where)
            current[side] = results[i, side] = r
            return measurement(r)

        return run

    def persist(window: Window) -> None:
        window_log.add({"window": asdict(window), "result": current[window.side].to_dict()})

    ab_result = alternate(
        Side("trl", measure("trl")),
        Side("slca", measure("slca")),
        pairs=args.pairs,
        order=args.order,
        seed=args.seed,
        warmup=0,
        on_window=persist,
        done=[w for w, _ in earlier],
    )
    per_pair = [ratios(results[i, "slca"], results[i, "trl"]) for i in range(args.pairs)]
    spread = ratio_spread(per_pair)
    summary = ab_result.summary()
    peak_gib, peak_pss_gib = slca_peaks_gib(results, args.pairs)
    lines = [
        f"method: {args.pairs} alternated pairs of {common['minutes_per_window']:g}-minute windows (ops.bench.ab); "
        "each window after its side's start-up and cold first step",
        *verdict(summary["median_ratio"], summary["interval"], summary["interval_coverage"], peak_gib, peak_pss_gib),
        "  slca ÷ TRL per rate over the pairs (median, min–max):",
        *(
            f"    {key:<30} {v['median']:.2f}× ({v['min']:.2f}–{v['max']:.2f})"
            for key, v in spread.items()
            if v is not None
        ),
    ]
    for i in range(args.pairs):
        first = "TRL" if ab_result.orders[i][0] == "A" else "slca"
        lines += [f"pair {i + 1} ({first} first):", *table([results[i, "trl"], results[i, "slca"]])]
    lines += where_time_goes(results[0, "slca"])
    for note in dict.fromkeys(f"  note ({s.name}): {n}" for s in results.values() for n in s.notes):
        lines.append(note)
    data = {
        **common,
        "method": f"ops.bench.ab.alternate: {args.pairs} pairs, order {args.order}, figure trained tokens/hour "
        "(B = slca over A = TRL); cold first step excluded inside each window on both sides",
        "ab": ab_result.to_dict(),
        "ratios_slca_over_trl": spread,
        "pairs": [
            {
                "pair": i + 1,
                "trl": results[i, "trl"].to_dict(),
                "slca": results[i, "slca"].to_dict(),
                "ratios_slca_over_trl": per_pair[i],
            }
            for i in range(args.pairs)
        ],
    }
    return lines + ["", *markdown(ab_result, "trained tokens/hour")], data


SAME_ENGINE = {"hf": "hf", "vllm": "vllm-colocate"}
"""The pipeline's serve engine → TRL's generation on the same engine (issue 22: the same engine on both sides)."""


def trl_generation_for(engine: str, asked: str | None) -> str:
    """TRL's generation: the one on the pipeline's engine, unless asked otherwise — then only that same one."""
    from slca.cli import CliError

    same = SAME_ENGINE.get(engine)
    if asked is None:
        if same is None:
            raise CliError(f"serve.engine {engine!r}: no TRL generation runs on it; pass --trl-generation")
        return same
    if same is not None and asked != same:
        raise CliError(
            f"--trl-generation {asked} against serve.engine {engine}: the sides would generate on different "
            f"engines; use --trl-generation {same}, or --pipeline-set serve.engine="
            f"{next(k for k, v in SAME_ENGINE.items() if v == asked)}"
        )
    return asked


def serve_engine(config, pipeline_sets: list[str]) -> str:
    """The engine the measured pipeline's serve runs (a `--pipeline-set serve.engine=…` wins)."""
    for item in reversed(pipeline_sets):
        if item.startswith("serve.engine="):
            return item.split("=", 1)[1]
    return config.section("serve").engine


def report_header(model: str, warning: str | None, precision: str) -> list[str]:
    return [f"slca bench rl — model {model_name(model)}; {precision}"] + ([f"  WARNING: {warning}"] if warning else [])


def side_lines(result: SideResult) -> list[str]:
    lines = table([result])
    if result.name == "slca":
        lines += where_time_goes(result)
    return lines + [f"  note ({result.name}): {n}" for n in result.notes]


def write_outputs(out: Path, lines: list[str], data: dict) -> None:
    """results.json + table.md (`ops.bench.ab.write`: refused, nothing written, if a machine path is in them)."""
    check_no_paths(data, lines)
    write_checked(out, data, ["```", *lines, "```"], "slca bench rl")
