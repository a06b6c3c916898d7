"""`slca bench learner-memory`: what a learner step costs in memory and in time, for two settings side by side.

The whole system must fit in 6 GiB while it learns (issue 22), and the learner's step is most of it: the fp32
weights, their gradients and AdamW's two moments (2.1 GiB for the embedded model) plus one group's activations,
which gradient checkpointing trades for a second forward. Side A is the learner with `--a-set` (default
`learner.gradient_checkpointing=false`), side B with A's settings and `--b-set` (default `…=true`).

Each window is a fresh child process (`python -m ops.bench.learner_memory --child …`), so that its peak resident
set (VmHWM) is the peak of that setting alone. It loads the policy as `slca learn` does (the fixed mmap threshold,
the configured precision), takes one untimed step, then `--steps` timed steps on the same synthetic groups
(random tokens: a prompt shared by the group, then the completions, tool-call and summary segments; the cost
depends only on the sizes). The figure is trained tokens per second (completion tokens of the steps); the peak
RSS of each window is reported beside it. Windows alternate A B / B A (ops/bench/ab.py)."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from ops.bench.ab import Measurement, Side, alternate, per_side, report
from ops.bench.common import bench_command, own_memory_mib

CHILD_TIMEOUT_S = 1800.0


def _child(args) -> dict:
    import torch

    from learner.settings import LearnerSettings
    from ops.bench.learner_step import synthetic_group
    from slca.heap import fix_mmap_threshold

    update = {"lr": 1e-7, "skip_zero_advantage_groups": False, **_overrides(args.set)}
    settings = LearnerSettings().model_copy(update=update)
    settings = LearnerSettings.model_validate(settings.model_dump())  # the overrides checked as config would be
    fix_mmap_threshold(settings.heap_mmap_threshold_kib)
    from learner.model import load_policy
    from learner.trainer import Trainer

    vocab = json.loads((Path(args.model) / "config.json").read_text())["vocab_size"]
    rng = random.Random(0)
    torch.manual_seed(0)
    groups = [
        synthetic_group(rng, args.group_size, args.prompt_tokens, args.completion_tokens, vocab, i)
        for i in range(args.groups)
    ]
    policy = load_policy(Path(args.model), settings)
    trainer = Trainer(policy, settings)
    loaded = own_memory_mib("VmRSS")
    trainer.train_step(groups)  # untimed: the allocator's first pages, oneDNN's first primitives
    seconds, tokens = [], 0
    for _ in range(args.steps):
        report = trainer.train_step(groups)
        seconds.append(report.seconds)
        tokens += report.tokens
    return {
        "tokens": tokens,
        "seconds": sum(seconds),
        "step_s": [round(s, 2) for s in seconds],
        "loaded_rss_mib": round(loaded, 1),
        "peak_rss_mib": round(own_memory_mib("VmHWM"), 1),
        "autocast": policy.autocast,
        "gradient_checkpointing": settings.gradient_checkpointing,
    }


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        field = key.removeprefix("learner.")
        out[field] = {"true": True, "false": False}.get(value.lower(), value)
    return out


def _window(args, sets: list[str]) -> Measurement:
    argv = [sys.executable, "-m", "ops.bench.learner_memory", "--child"]
    for name in ("model", "steps", "groups", "group_size", "prompt_tokens", "completion_tokens"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=dict(os.environ))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"learner-memory child failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    got = json.loads(lines[-1])
    detail = {k: got[k] for k in ("step_s", "loaded_rss_mib", "peak_rss_mib", "autocast", "gradient_checkpointing")}
    return Measurement(got["tokens"] / got["seconds"], got["tokens"], got["seconds"], len(got["step_s"]), detail)


def _values_b_changes(config, a_set: list[str], b_set: list[str]) -> list[str]:
    """Side A's own values of the settings side B changes (`learner.FIELD=VALUE`), so that its name stays true
    when a default changes later ("learner as shipped" named the opposite setting once checkpointing became the
    default)."""
    from slca.cli import CliError
    from slca.config import ConfigError, load_config

    a_config = load_config(config.source, a_set)
    named = {s.split("=", 1)[0] for s in a_set}
    values = []
    for s in b_set:
        key = s.split("=", 1)[0]
        if key in named:
            continue
        section, _, field = key.partition(".")
        try:
            value = getattr(a_config.section(section), field)
        except (AttributeError, ConfigError) as exc:
            raise CliError(f"--b-set {s!r}: no such setting ({exc})") from None
        values.append(f"{key}={json.dumps(value, default=str)}")
    return values


def run_memory_ab(args, config, window, bench: str, header: dict, heading: str) -> int:
    """The settings A/B both memory benches share: `window(args, sets)` → a Measurement with `peak_rss_mib` in its
    detail; side A runs `args.a_set`, side B `args.a_set + args.b_set`, alternated; `header`: the bench's own facts."""
    from slca.cli import CliError

    if args.pairs < 3 or args.steps < 1:
        raise CliError("--pairs ≥ 3 and --steps ≥ 1")
    for s in args.a_set + args.b_set:
        if "=" not in s:
            raise CliError(f"{s!r}: expected SECTION.FIELD=VALUE")
    if not args.b_set:
        raise CliError("--b-set: side B needs at least one setting of its own")
    a_name = " ".join(args.a_set + _values_b_changes(config, args.a_set, args.b_set))
    a = Side(a_name, lambda: window(args, args.a_set))
    b = Side(" ".join(args.b_set), lambda: window(args, args.a_set + args.b_set))

    def show(w) -> None:
        d = w.detail
        print(f"pair {w.pair} {w.side}: {w.figure:.1f} trained tok/s, peak RSS {d['peak_rss_mib']:.0f} MiB", flush=True)

    result = alternate(a, b, pairs=args.pairs, warmup=0, on_window=show)
    peaks = per_side(result, "peak_rss_mib")
    header = {"command": bench_command(bench, sys.argv), **header, "peak_rss_mib": peaks}
    report(args.out, header, result, "trained tokens/s", (heading, peaks), f"slca bench {bench}")
    return 0


def run_learner_memory(args, config) -> int:
    from slca.models.paths import find_model_dir

    args.model = str(find_model_dir(args.model or config.common.model, config.common.cache_dir))
    header = {
        "model": Path(args.model).name,
        "groups_per_step": args.groups,
        "group_size": args.group_size,
        "prompt_tokens": args.prompt_tokens,
        "completion_tokens": args.completion_tokens,
        "steps_per_window": args.steps,
    }
    heading = "Peak RSS per window (MiB, the child process: model, optimizer state and the step):"
    return run_memory_ab(args, config, _window, "learner-memory", header, heading)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model directory (default: the configured model)")
    p.add_argument("--steps", type=int, default=2, help="timed steps per window (after one untimed)")
    p.add_argument("--groups", type=int, default=1, help="groups per step (learner.groups_per_step as shipped: 1)")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=800, help="the group's shared prompt")
    p.add_argument("--completion-tokens", type=int, default=128, help="each member's completion")


def main() -> None:
    p = argparse.ArgumentParser(description="one window of `slca bench learner-memory` (a child process)")
    p.add_argument("--child", action="store_true", required=True)
    p.add_argument("--set", action="append", default=[])
    add_arguments(p)
    args = p.parse_args()
    print(json.dumps(_child(args)), flush=True)


if __name__ == "__main__":
    main()
