"""`slca bench learner`: in one run, side by side —
- training throughput of one optimizer step (packed tokens/s and generated tokens/s), with the shared-prompt
  packing and without it (every member re-runs the prompt, as TRL does);
- the cost of advantage estimation: `slca` vs `grpo`, as a share of the step time (target < 1%).
Groups are synthetic (random tokens, a prompt shared by the group, tool_call then summary segments) so the
figures depend only on the model and the sizes."""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

from learner.settings import LearnerSettings


def synthetic_group(rng: random.Random, g: int, prompt_len: int, gen_len: int, vocab: int, index: int):
    from slca.contracts import Reward, RolloutGroup, Segment, SegmentKind, Trajectory

    prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
    trajs, rewards = [], []
    call = gen_len // 2
    for i in range(g):
        gen = [rng.randrange(vocab) for _ in range(gen_len)]
        segs = [
            Segment(start=0, end=prompt_len, kind=SegmentKind.SYSTEM),
            Segment(start=prompt_len, end=prompt_len + call, kind=SegmentKind.TOOL_CALL),
            Segment(start=prompt_len + call, end=prompt_len + gen_len, kind=SegmentKind.SUMMARY),
        ]
        t = Trajectory(
            task_id=f"bench-{index}",
            policy_version=0,
            tokens=prompt + gen,
            logprobs=[None] * prompt_len + [-rng.uniform(0.1, 5.0) for _ in gen],
            segments=segs,
        )
        trajs.append(t)
        rewards.append(Reward(trajectory_id=t.id, exec=rng.random(), pref=rng.random()))
    return RolloutGroup(
        task_id=f"bench-{index}", policy_version_min=0, policy_version_max=0, trajectories=trajs, rewards=rewards
    )


def time_estimator(groups, name: str, settings: LearnerSettings, repeats: int) -> float:
    """Median seconds to turn the step's groups into per-token advantages (what the trainer does per step)."""
    from learner.step import prepare_group

    config = settings.advantage
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for g in groups:
            prepare_group(g, name, config)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_steps(model_dir: Path, groups, settings: LearnerSettings, repeats: int):
    from learner.model import load_policy
    from learner.trainer import Trainer

    policy = load_policy(model_dir, settings)
    trainer = Trainer(policy, settings)
    trainer.train_step(groups)  # warm-up (allocator, kernels)
    reports = [trainer.train_step(groups) for _ in range(repeats)]
    return reports, policy.autocast


def run_bench_cli(args, config) -> int:
    import torch

    from slca.models.paths import find_model_dir

    common = config.common
    model_dir = find_model_dir(args.model or common.model, common.cache_dir)
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    base = config.get(LearnerSettings).model_copy(update={"lr": 1e-7, "skip_zero_advantage_groups": False})
    rng = random.Random(0)
    torch.manual_seed(0)
    prompt_len = max(16, args.tokens * 2)
    groups = [synthetic_group(rng, args.group_size, prompt_len, args.tokens, vocab, i) for i in range(args.groups)]
    rows = {}
    for label, share in (("packed, shared prompt", True), ("packed, prompt per member", False)):
        settings = base.model_copy(update={"share_prefix": share, "estimator": "slca"})
        reports, autocast = time_steps(model_dir, groups, settings, args.repeats)
        step_s = statistics.median(r.seconds for r in reports)
        gen_tokens = reports[0].tokens
        rows[label] = (step_s, reports[0].row_tokens, gen_tokens)
        print(
            f"{label:28s} step {step_s:7.2f} s  model tokens {reports[0].row_tokens:6d} "
            f"({reports[0].row_tokens / step_s:8.1f}/s)  trained tokens {gen_tokens} ({gen_tokens / step_s:7.1f}/s)"
        )
    shared_s, unshared_s = rows["packed, shared prompt"][0], rows["packed, prompt per member"][0]
    print(f"shared-prompt speed-up: {unshared_s / shared_s:.2f}x  (bf16 autocast: {autocast})")
    reps = max(20, args.repeats * 10)
    t_grpo = time_estimator(groups, "grpo", base, reps)
    t_slca = time_estimator(groups, "slca", base, reps)
    extra = t_slca - t_grpo
    print(
        f"advantages per step: grpo {t_grpo * 1e3:.2f} ms, slca {t_slca * 1e3:.2f} ms; "
        f"slca share of step {t_slca / shared_s:.3%}, overhead vs grpo {extra / shared_s:+.3%} of step time "
        f"(target < 1%)"
    )
    return 0
