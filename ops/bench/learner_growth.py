"""Does the learner's resident memory grow step after step, and from which part of its step? A probe, not a
`slca bench` result: the 30-minute soak on the `avx512_bf16` EPYC (bench/soak/learning-30-control) saw the learner's
trough rise ≈ 10 MiB per trained step (2,150 → 2,386 MiB over 24 steps) with the heap trimmed after each.

One process, as the learner runs (`learner.heap_mmap_threshold_kib` fixed first, the heap trimmed after each step),
the embedded model; each step trains one group of synthetic trajectories whose prompt and completion lengths vary
from step to step as live traffic's do (`ops.bench.learner_step.synthetic_group`). Arms, run one after the other in a
fresh child process each (`--arm` runs one), in the order given:

- `train`: `Trainer.train_step` only;
- `publish`: then the step's weights written as a version to a temporary weights directory (`slca.weights.publish`,
  no Redis), as the learner publishes after each step that changed the weights.

Each arm runs once per cache size of `--caches` (ONEDNN_PRIMITIVE_CACHE_CAPACITY and torch's LRU_CACHE_CAPACITY in
the child, `slca.heap.ONEDNN_CACHES`; 1024 is both defaults, 64 `learner.onednn_primitive_cache`, 0 turns oneDNN's
off), the sizes alternated round by round (`--rounds`).
Per step it prints VmRSS after the trim; the slope (least squares, MiB per step) over the steps after the first
`--settle` is the figure, the median step seconds beside it.

    .venv/bin/python -m ops.bench.learner_growth [--steps 20] [--settle 4] [--arms train,publish]
        [--caches 1024,64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from slca.heap import ONEDNN_CACHES

ARMS = ("train", "publish")


def slope(values: list[float]) -> float:
    """Least-squares slope of `values` against their index (0 for fewer than 2)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    return num / sum((i - mean_x) ** 2 for i in range(n))


def _arm(
    arm: str, steps: int, seed: int, model: str | None = None, fixed: bool = False
) -> tuple[list[float], list[float]]:
    """One arm in this process: (VmRSS in MiB after each step's trim, each step's seconds). `model`: a name or
    directory (None: the configured `common.model`). `fixed`: every step's group of the same lengths (600 + 120)."""
    import time

    import torch

    from learner.model import load_policy
    from learner.settings import LearnerSettings
    from learner.trainer import Trainer
    from ops.bench.learner_step import synthetic_group
    from slca.config import load_config
    from slca.heap import fix_mmap_threshold, own_memory_mib, trim
    from slca.models.paths import find_model_dir
    from slca.weights.publish import publish

    config = load_config(None, [])
    settings = config.get(LearnerSettings).model_copy(update={"lr": 1e-7, "skip_zero_advantage_groups": False})
    fix_mmap_threshold(settings.heap_mmap_threshold_kib)
    model_dir = find_model_dir(model or config.common.model, config.common.cache_dir)
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    policy = load_policy(model_dir, settings)
    trainer = Trainer(policy, settings)
    rss, seconds, version = [], [], 0
    with tempfile.TemporaryDirectory(prefix="slca-growth-") as weights:
        for step in range(steps):
            prompt, completion = (600, 120) if fixed else (rng.randrange(300, 900), rng.randrange(48, 192))
            group = synthetic_group(rng, 8, prompt, completion, vocab, step)
            began = time.perf_counter()
            trainer.train_step([group])
            if arm == "publish":
                manifest, _ = publish(
                    policy.model, model_dir, Path(weights), version, step + 1, str(model_dir), None, None
                )
                version = manifest.version
            seconds.append(round(time.perf_counter() - began, 2))
            trim()
            rss.append(round(own_memory_mib("VmRSS"), 1))
            print(f"{arm} step {step + 1}: {rss[-1]:,.1f} MiB", flush=True)
    return rss, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.bench.learner_growth", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--settle", type=int, default=4, help="steps left out of the slope (allocator warm-up)")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--caches", default="1024,64", help="ONEDNN_PRIMITIVE_CACHE_CAPACITY values, alternated")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="a model name or directory (default: common.model)")
    parser.add_argument("--fixed-lengths", action="store_true", help="every group 600 + 120 tokens (not varied)")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one arm, in this process
    args = parser.parse_args(argv)
    if args.arm:
        rss, seconds = _arm(args.arm, args.steps, args.seed, args.model, args.fixed_lengths)
        print(json.dumps({"arm": args.arm, "rss_mib": rss, "seconds": seconds}))
        return 0
    arms, caches = args.arms.split(","), [int(c) for c in args.caches.split(",")]
    if unknown := [a for a in arms if a not in ARMS]:
        parser.error(f"unknown arm {unknown[0]!r}; known: {', '.join(ARMS)}")
    for r in range(args.rounds):
        for cache in caches if r % 2 == 0 else caches[::-1]:
            for arm in arms:
                print(_child(args, arm, cache), flush=True)
    return 0


def _child(args, arm: str, cache: int) -> str:
    """One arm in a fresh child with `cache` primitive cache entries: its line of the report."""
    cmd = [sys.executable, "-m", "ops.bench.learner_growth", "--arm", arm, "--steps", str(args.steps)]
    cmd += ["--seed", str(args.seed), *(["--model", args.model] if args.model else [])]
    cmd += ["--fixed-lengths"] if args.fixed_lengths else []
    env = {**os.environ, **{name: str(cache) for name in ONEDNN_CACHES}}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    got = json.loads(out.strip().splitlines()[-1])
    rss, kept = got["rss_mib"], got["rss_mib"][args.settle :]
    lengths = ", fixed lengths" if args.fixed_lengths else ""
    return (
        f"{arm} cache {cache}{lengths}: {rss[0]:,.1f} → {rss[-1]:,.1f} MiB over {len(rss)} steps; slope "
        f"{slope(kept):+.2f} MiB/step after {args.settle}; step {statistics.median(got['seconds']):.2f} s "
        f"median (per step: {rss})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
