"""`slca bench rl`: TRL's `GRPOTrainer` and slca's online pipeline, one after the other on the same machine, on
the same warm-started model, task pack prompts (train split, Hermes tools), group size, token budget, reward
(HierR), learning rate and precision, each for the same wall time; prints completions/hour, optimizer
updates/hour (steps whose groups all had zero advantage are not updates), completions and tokens trained (not
served), peak RSS and slca ÷ TRL, and where the pipeline's CPU time goes (per process, with its memory at the
peak); the cold first step is excluded on both sides (each window starts after it); TRL's prompt truncation
(`max_prompt_length`, prompts cut) is recorded; writes results.json and table.md to `--out` via
`ops.bench.ab.write` (no machine paths; the command as typed; load average and CPU flags at start and end).

Plan: (1) resolve the model, precision and learning rate once for both; (2) TRL in its own process
(`ops/bench/rl_trl.py`), sampled from /proc; (3) `slca up` on its own Redis and data directory
(`ops/bench/rl_slca.py`); (4) the report (`ops/bench/rl_report.py`).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from ops.bench.ab import check_no_paths, machine_now
from ops.bench.ab import write as write_checked
from ops.bench.common import bench_command, model_name
from ops.bench.machine import machine_facts
from ops.bench.proc_sampler import TreeSampler
from ops.bench.rl_report import SideResult, SideSpec, ratios, table, verdict, where_time_goes
from ops.bench.rl_slca import SlcaSpec, run_slca_side
from ops.bench.rl_trl import TrlCounts, TrlSpec

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
    spec_path, out_path = log_dir / "trl-spec.json", log_dir / "trl-counts.json"
    spec_path.write_text(json.dumps(spec.__dict__))
    with open(log_dir / "trl.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.bench.rl_trl", str(spec_path), str(out_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sampler = TreeSampler([proc.pid], lambda cmd: "trl (one process)").start()
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
    return trl_side_result(c, sampler.peak_rss_bytes, sampler.cpu_by_role())


def trl_side_result(c: TrlCounts, peak_rss_bytes: int, cpu_s_by_process: dict[str, float]) -> SideResult:
    """TRL's counts as a `SideResult`: updates and trained figures exclude zero-advantage steps."""
    truncated = (
        f"TRL's max_prompt_length {c.config.get('max_prompt_length')}: {c.prompts_truncated} of "
        f"{c.prompts_seen} prompts truncated"
        if c.config.get("max_prompt_length")
        else "TRL's max_prompt_length: none (prompts not truncated)"
    )
    return SideResult(
        name="trl",
        seconds=c.seconds,
        completions=c.completions,
        completions_trained=c.completions_trained,
        updates=c.updates,
        generated_tokens=c.generated_tokens,
        peak_rss_bytes=peak_rss_bytes,
        startup_s=c.startup_s,
        trained_tokens=c.trained_tokens,
        steps=c.steps,
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


def run_rl_bench(args, config) -> int:
    from learner.settings import LearnerSettings
    from slca.cli import CliError
    from slca.models.precision import choose_precision

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not sides or set(sides) - set(SIDES):
        raise CliError(f"--sides {args.sides!r}: choose from {', '.join(SIDES)}")
    if "trl" in sides and not trl_available():
        raise CliError("TRL is not installed: `pip install -e .[bench]` (a benchmark-only extra)")
    if args.minutes <= 0 or args.group_size < 2 or args.max_new_tokens < 1:
        raise CliError("--minutes > 0, --group-size ≥ 2 and --max-new-tokens ≥ 1 are required")
    model, warning = resolve_model(args.model, config)
    if warning:
        log.warning(warning)
    learner = config.get(LearnerSettings)
    precision = choose_precision({"bf16": "bfloat16", "fp32": "float32"}.get(learner.precision, "auto"))
    print(precision.describe("precision (both sides; the learner's setting)"), flush=True)
    seconds = args.minutes * 60
    machine_start = machine_now()
    log_dir = Path(tempfile.mkdtemp(prefix="slca-bench-rl-logs-"))
    print(f"model {model_name(model)}; {seconds:.0f} s per side; logs in {log_dir}", flush=True)
    results: dict[str, SideResult] = {}
    alike = SideSpec(model, args.pack, args.group_size, args.max_new_tokens, seconds)
    if "trl" in sides:
        results["trl"] = run_trl_side(
            TrlSpec(
                **asdict(alike),
                lr=learner.lr,
                bf16=precision.dtype == "bfloat16",
                w_exec=learner.advantage.w_exec,
                w_pref=learner.advantage.w_pref,
            ),
            log_dir,
        )
    if "slca" in sides:
        # TRL stops at the first step end past the deadline: one step can overrun it by minutes on a slow
        # machine. The pipeline gets the same wall time TRL actually had, so neither rate covers a shorter run.
        slca_seconds = same_wall_time(seconds, results.get("trl"))
        if slca_seconds > seconds:
            print(
                f"TRL's last step ended {slca_seconds - seconds:.0f} s past the deadline: the pipeline runs "
                f"{slca_seconds:.0f} s too",
                flush=True,
            )
        results["slca"] = run_slca_side(
            SlcaSpec(
                **{**asdict(alike), "seconds": slca_seconds},
                max_turns=args.max_turns,
                extra_sets=tuple(args.pipeline_set),
            ),
            log_dir,
        )
    lines = report_lines(list(results.values()), model, warning, precision.describe("precision"))
    print("\n".join(lines), flush=True)
    facts = machine_facts()
    write_outputs(
        args.out,
        lines,
        results,
        {
            "command": bench_command("rl", sys.argv),
            "method": "ops.bench.ab (sides one after the other, not alternated)",
            "machine": {"cpu": facts["cpu"], "cores": facts["cores"], "python": facts["python"]},
            "machine_start": machine_start,
            "machine_end": machine_now(),
            "model": model_name(model),
            "warm_started": warning is None,
            "pack": args.pack,
            "split": "train",
            "group_size": args.group_size,
            "max_new_tokens": args.max_new_tokens,
            "minutes": args.minutes,
            "precision": precision.dtype,
            "lr": learner.lr,
            "serve_engine": serve_engine(config, args.pipeline_set),
            "pipeline_sets": list(args.pipeline_set),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    return 0


def serve_engine(config, pipeline_sets: list[str]) -> str:
    """The engine the measured pipeline's serve runs (a `--pipeline-set serve.engine=…` wins)."""
    for item in reversed(pipeline_sets):
        if item.startswith("serve.engine="):
            return item.split("=", 1)[1]
    return config.section("serve").engine


def report_lines(sides: list[SideResult], model: str, warning: str | None, precision: str) -> list[str]:
    by = {s.name: s for s in sides}
    lines = [f"slca bench rl — model {model_name(model)}; {precision}"] + ([f"  WARNING: {warning}"] if warning else [])
    lines += table(sides)
    if "slca" in by and "trl" in by:
        lines += verdict(by["slca"], by["trl"])
    if "slca" in by:
        lines += where_time_goes(by["slca"])
    for s in sides:
        lines += [f"  note ({s.name}): {n}" for n in s.notes]
    return lines


def write_outputs(out: Path, lines: list[str], results: dict[str, SideResult], facts: dict) -> None:
    """results.json + table.md (`ops.bench.ab.write`: refused, nothing written, if a machine path is in them)."""
    data = {**facts, "sides": {k: v.to_dict() for k, v in results.items()}}
    if len(results) == 2:
        data["ratios_slca_over_trl"] = ratios(results["slca"], results["trl"])
    check_no_paths(data, lines)
    write_checked(out, data, ["```", *lines, "```"], "slca bench rl")
