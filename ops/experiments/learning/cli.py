"""`slca bench learning` arguments (light: no heavy import here; the handler imports
`ops.experiments.learning.main`)."""

from __future__ import annotations

from pathlib import Path

from ops.experiments.learning.recipe_arms import ARM_SETS, RECIPE_FOR_ESTIMATORS, RECIPE_FOR_TOOLS
from slca.cli.flags import add_flags, flag


DESCRIPTION = (
    "The estimator comparison: every arm trained from one warm start with the same budget and seeds, every "
    "final model and the warm start evaluated greedily on the same held-out items (test + novel), and a "
    "verdict per named comparison (slca vs each other arm, each arm vs the warm start) by a rule fixed "
    "before the run: paired per-item differences, bootstrap 95% intervals over items and seeds, sign-flip "
    "p-values, Holm at α = 0.05. Resumable: rerun the same command. Full run (GPU machine): slca bench "
    "learning --steps 200 --eval-engine vllm --out bench/learning/<run>"
)
"""`slca bench learning --help`'s description."""

FLAGS = (
    flag(
        "--model",
        help="warm start: 'embedded', 'tiny', a cached model's name or a directory "
        "(default: ops.warm_model_name, the model `slca sft` writes)",
    ),
    flag(
        "--arms",
        "--estimators",
        dest="arms",
        default=None,
        help="comma-separated arms: any registered estimator (`slca train --list-estimators`), or a variant "
        "(slca_decision = slca with learner.advantage.decision_token=true); default: every registered "
        "estimator, then slca_decision",
    ),
    flag("--seeds", default="0,1,2", help="comma-separated; ≥ 3 (the seed resampling needs them)"),
    flag(
        "--steps",
        type=int,
        default=0,
        help="steps (= rollout groups) per run; 0: as many as fit in --minutes (measured calibration)",
    ),
    flag(
        "--minutes",
        type=float,
        default=110.0,
        help="time budget for the whole comparison; a plan estimated above it is refused (0: no limit)",
    ),
    flag(
        "--pack",
        default="everyday",
        help="task pack: its train split trains, its held-out splits (test, novel) evaluate; the same "
        "pool and split for every run (the seed changes only training order and sampling)",
    ),
    flag(
        "--eval-items",
        type=int,
        default=0,
        help="held-out items per evaluation: 0 = every item of test + novel (the real run, ≥ 200); N = a "
        "fixed seeded sample (smoke tests only)",
    ),
    flag("--eval-max-tokens", type=int, default=256, help="generated tokens per turn in evaluation"),
    flag(
        "--eval-engine",
        choices=["hf", "vllm"],
        default="hf",
        help="engine of the in-process evaluation server (vllm on a GPU machine)",
    ),
    flag(
        "--curve",
        choices=["eval", "reward"],
        default="eval",
        help="learning curve: the primary metric on --curve-items fixed held-out items every "
        "--curve-every steps, the warm start's outcome on the same items at step 0 (eval), or the "
        "per-step training reward (reward: no extra evaluation time)",
    ),
    flag("--curve-every", type=int, default=0, help="steps between curve points (0: about 4 per run)"),
    flag("--curve-items", type=int, default=60, help="held-out items of a curve point (a fixed subset)"),
    flag("--out", type=Path, default=Path("bench/learning/estimators")),
    flag("--plan-only", action="store_true", help="evaluate the warm start, calibrate, print the plan, stop"),
    flag("--train-arg", action="append", default=[], help="extra argument for every `slca train`"),
)
"""`slca bench learning`'s flags, in `--help` order."""

RECIPE_DESCRIPTION = (
    "The recipe sweep (docs: bench/learning/README.md): a block trains every arm (ops/experiments/learning/"
    "recipe_arms.py) once, in an order rotated by --block, for --minutes each from the warm start on the "
    "training probe's tasks, and evaluates each arm's last version greedily on the training probe and the test "
    "split, paired with the block's warm start. Blocks add up across machines; --report rewrites the results "
    "from every finished block."
)
"""`slca bench recipe --help`'s description."""

RECIPE_FLAGS = (
    flag("--block", type=int, help="the block's number (its arm order and training seed)"),
    flag("--minutes", type=float, default=8.0, help="training minutes per arm (the same for every arm)"),
    flag(
        "--trajectories",
        type=int,
        default=0,
        help="trajectories per arm instead of minutes (the same compute for every arm however busy the machine)",
    ),
    flag("--group-size", type=int, default=8, help="episodes per group (learner.train_group_size)"),
    flag(
        "--arm-set",
        default="recipe",
        choices=tuple(ARM_SETS),
        help="recipe: the recipe arms (blocks under <out>/blocks); estimators: slca, slca_decision, grpo, toolpo and "
        "rltr at --recipe (blocks under <out>/estimator-blocks); tools: real and sgls, --recipe trained with the "
        "rollouts' tool calls answered by the real tools or by SGLS, evaluated on the real tools (blocks under "
        "<out>/tools-blocks)",
    ),
    flag("--arms", default=None, help="comma-separated arms of the arm set (default: every arm)"),
    flag(
        "--recipe",
        default=None,
        help="--arm-set estimators or tools: the recipe arm whose settings (groups per step, lr, advantage) they "
        f"train with (default: {RECIPE_FOR_ESTIMATORS} for estimators, {RECIPE_FOR_TOOLS} for tools)",
    ),
    flag("--model", help="warm start (default: ops.warm_model_name, the model `slca sft` writes)"),
    flag("--pack", default="everyday"),
    flag("--probe-size", type=int, default=64, help="training-probe tasks: what the arms train on"),
    flag("--eval-max-tokens", type=int, default=256),
    flag("--eval-engine", choices=["hf", "vllm"], default="vllm"),
    flag("--out", type=Path, default=Path("bench/learning/recipe")),
    flag("--report", action="store_true", help="only rewrite results from the finished blocks"),
    flag(
        "--target-points",
        type=float,
        default=0.0,
        help="a target fixed before the run (kept in <out>/target.json, judged first in results.md): the training "
        "probe's paired gain against the warm start, in points, with its 95%% interval above 0",
    ),
)
"""`slca bench recipe`'s flags, in `--help` order."""


def add_arguments(p) -> None:
    p.description = DESCRIPTION
    add_flags(p, FLAGS)


def add_recipe_arguments(p) -> None:
    p.description = RECIPE_DESCRIPTION
    add_flags(p, RECIPE_FLAGS)
