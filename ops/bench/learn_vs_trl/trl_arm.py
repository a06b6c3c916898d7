"""TRL's arm of a block: `GRPOTrainer` in its own process (`ops.bench.rl.main.run_trl_side`, sampled from /proc),
configured as `arms.TrlRecipe` says, on the block's training tasks, its model saved at the marks on the parent's
clock (`ops.bench.rl.trl_marks`) and stopped after the last.

What both sides share comes from the same settings: the warm start, the tasks file, the seed, the group size, the
reward (HierR with `learner.advantage.w_exec`/`w_pref` and the slca arm's success weight), a completion's token
budget and temperature (`learner.train_max_tokens`, `train_temperature`), the precision (`learner.precision`), the
device (CUDA when there is one) and the generation engine (`serve.engine`: vLLM colocated, or transformers).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ops.bench.learn_vs_trl.arms import TrlRecipe, slca_arm
from ops.bench.rl.trl_side import TrlSpec, learner_heap
from slca.cli import CliError

GRACE_S = 3600.0
"""Past the last mark, how long TRL's process may take (its last step, the save, its exit) before it is killed."""
SIDE_FIGURES = ("startup_s", "steps", "updates", "completions", "completions_trained", "trained_tokens", "peak_rss_gib")
"""What the arm keeps of TRL's `SideResult` (the window after its cold first step, as `slca bench rl` counts)."""


def trl_spec(args, config, model_dir: Path, tasks_file: Path, seed: int, recipe: TrlRecipe, marks: list[float]):
    """TRL's spec for one arm (its save directory and clock are set when it starts: `train_trl`)."""
    from learner.settings import LearnerSettings
    from ops.bench.rl.main import serve_engine, trl_generation_for
    from serve.settings import ServeSettings
    from slca.models.precision import choose_precision

    learner, serve = config.get(LearnerSettings), config.get(ServeSettings)
    precision = choose_precision({"bf16": "bfloat16", "fp32": "float32"}.get(learner.precision, "auto"))
    success_weight = slca_arm().settings.get("learner.advantage.success_weight", learner.advantage.success_weight)
    return TrlSpec(
        model=str(model_dir),
        pack=args.pack,
        group_size=args.group_size,
        max_new_tokens=learner.train_max_tokens,
        seconds=marks[-1] * 60,  # the window's own deadline never comes first: its clock starts after the cold step
        lr=recipe.lr,
        bf16=precision.dtype == "bfloat16",
        temperature=learner.train_temperature,
        seed=seed,
        w_exec=learner.advantage.w_exec,
        w_pref=learner.advantage.w_pref,
        generation=trl_generation_for(serve_engine(config, []), None),
        kv_cache_gib=serve.kv_cache_gib,
        max_model_len=serve.max_model_len,
        is_correction=recipe.is_correction,
        steps_per_generation=recipe.steps_per_generation,
        tasks_file=str(tasks_file),
        save_minutes=list(marks),
        success_weight=float(success_weight),
        device="auto",
        **learner_heap(learner),
    )


def train_trl(spec: TrlSpec, arm_dir: Path) -> dict:
    """Train TRL's arm; {"clock", "train_seconds", "trl_config", "side", "checkpoints": [...]}, each checkpoint
    with its directory under `arm_dir`."""
    from ops.bench.learn_vs_trl.child import log_tail
    from ops.bench.rl.main import run_trl_side
    from ops.experiments.learning.files import read_json

    spec = replace(spec, save_dir=str(arm_dir / "checkpoints"), clock_start=time.time())
    try:
        result = run_trl_side(spec, arm_dir, timeout_s=spec.save_minutes[-1] * 60 + GRACE_S)
    except RuntimeError as exc:
        raise CliError(f"{exc}:\n{log_tail(arm_dir / 'trl.log')}") from None
    train_s = time.time() - spec.clock_start
    counts = read_json(arm_dir / "trl-counts.json")
    if len(counts["checkpoints"]) < len(spec.save_minutes):
        raise CliError(f"TRL's process ended before its last mark ({spec.save_minutes[-1]:g} min): see trl.log")
    side = result.to_dict()
    return {
        "clock": "from the launch of TRL's process",
        "train_seconds": round(train_s, 1),
        "trl_config": counts["config"],
        "generation": spec.generation,
        "side": {k: side[k] for k in SIDE_FIGURES},
        "checkpoints": [checkpoint(c) for c in counts["checkpoints"]],
    }


def checkpoint(saved: dict) -> dict:
    """A save mark's record in the arm's terms: TRL's step is its version; trajectories and tokens are those of
    its updates after the cold first step (`ops.bench.rl.trl_side`'s window)."""
    return {
        "minutes": saved["minutes"],
        "version": saved["step"],
        "elapsed_s": saved["elapsed_s"],
        "steps": saved["step"],
        "trajectories": saved["completions_trained"],
        "tokens": saved["trained_tokens"],
        "dir": f"checkpoints/{saved['minutes']:g}/v{saved['step']}",
    }
