"""The two arms of `slca bench learn-vs-trl`, what each trains with, and the plan a first block fixes.

- `slca`: `slca train --steps 0 --minutes M` with the learner's default recipe (`recipe_arms.RECIPE_FOR_TOOLS`: 4
  groups of 8 per step, lr 1e-5, success in the exec channel, the decision token, success-variance screening), its
  versions published under the arm's folder.
- `trl`: TRL's `GRPOTrainer` (`ops.bench.rl.trl_side`, its own process) configured as `TrlRecipe` says.

Both start from the same warm start, train on the same training-probe tasks with the same seed (the block's number)
and the same reward (HierR with the learner's weights and success term), for the same minutes on one clock
(`ops.bench.rl.trl_marks`, `capture`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ops.experiments.learning.recipe_arms import RECIPE_ARMS, RECIPE_FOR_TOOLS, RecipeArm, rotated
from slca.cli import CliError

ARMS = ("slca", "trl")
"""In block 0's order; block b starts at position b mod 2 (`order`)."""
BLOCKS = "blocks"
"""The blocks' folder under `--out`: `<out>/blocks/b<N>/`."""
SLCA_RECIPE = RECIPE_FOR_TOOLS
"""The learner's default recipe, by its recipe-sweep name."""


@dataclass(frozen=True)
class TrlRecipe:
    """TRL's side as TRL's documentation sets up GRPO for a model of this size (TRL 1.16, `GRPOConfig`). Its quick
    start trains a 0.5B instruct model — the smallest it shows; ours has 135M parameters — with `GRPOConfig()`'s
    defaults and nothing else, so the defaults are what this takes:

    - `learning_rate` 1e-6: `GRPOConfig`'s own default (it overrides `TrainingArguments`' 5e-5). slca's learner
      trains at 1e-5 (`learner.lr`, tuned for 135M by the recipe sweep); TRL documents no smaller-model value. The
      learning rate is the one knob where the two recipes differ by design, so it is a flag (`--trl-lr`), fixed in
      the plan with the first block: blocks at another TRL learning rate (say slca's 1e-5, a sensitivity check that
      TRL was not handicapped) belong in another `--out`.
    - `num_generations` 8 (the default, and `--group-size`), per-device batch 8: one prompt's group per step.
    - `steps_per_generation` 1: the default (None → `gradient_accumulation_steps`, 1): generate a group, train a
      step, generate again.
    - `vllm_importance_sampling_correction` on (the default).
    - Untouched, so TRL's defaults: `beta` 0 (no reference model), `loss_type` "dapo", `scale_rewards` "group".
    - Generation: vLLM in TRL's process (`use_vllm=True, vllm_mode="colocate"`: vLLM shares the training device, the
      docs' mode for one device) when the pipeline's `serve.engine` is vllm, transformers' `generate` when it is hf
      (`ops.bench.rl.main.trl_generation_for`: the same engine on both sides).

    Set alike on both sides, not TRL's defaults (`ops.bench.rl.trl_side`): a completion's tokens = the learner's
    `train_max_tokens` (slca's budget per turn; TRL's default 256), temperature = the learner's `train_temperature`
    (1.0, TRL's default too), precision = the learner's (TRL's default bf16), gradient checkpointing off (TRL's
    default on; off only spares TRL time), the device = the learner's (CUDA when there is one)."""

    lr: float = 1e-6
    steps_per_generation: int = 1
    is_correction: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def slca_arm() -> RecipeArm:
    """`slca train`'s arm: the learner's default recipe's settings, the `slca` estimator, the real tools."""
    return RecipeArm("slca", dict(RECIPE_ARMS[SLCA_RECIPE].settings))


def order(block: int) -> list[str]:
    """The arms in block `block`'s order: slca → trl in even blocks, trl → slca in odd ones (a drift of the
    machine's speed within a block favours neither arm over the blocks)."""
    return rotated(list(ARMS), block)


def marks(minutes: float, checkpoints: list[float]) -> list[float]:
    """The checkpoints (minutes on the arm's clock) with the budget itself as the last: ascending, each in
    (0, minutes]."""
    if minutes <= 0:
        raise CliError("--minutes must be > 0 (both arms train for the same minutes)")
    out = sorted({float(m) for m in checkpoints} | {float(minutes)})
    if out[0] <= 0 or out[-1] > minutes:
        raise CliError(f"--checkpoints {checkpoints}: each must be in (0, --minutes {minutes:g}]")
    return out


def plan(args, trl: TrlRecipe) -> dict:
    """What every block of an `--out` runs, fixed by its first block (`main.fix_plan`): budget, checkpoints, tasks,
    evaluation, both recipes."""
    return {
        "minutes": float(args.minutes),
        "checkpoints": marks(args.minutes, args.checkpoints),
        "group_size": args.group_size,
        "pack": args.pack,
        "probe_size": args.probe_size,
        "eval_max_tokens": args.eval_max_tokens,
        "eval_engine": args.eval_engine,
        "slca": {"recipe": SLCA_RECIPE, "settings": slca_arm().settings},
        "trl": trl.to_dict(),
        "extra_settings": list(args.set),
    }
