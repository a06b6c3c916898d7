"""`slca bench learn-vs-trl`'s flags, in `--help` order (light: nothing heavy imported here)."""

from __future__ import annotations

from pathlib import Path

from ops.bench.learn_vs_trl.arms import TrlRecipe
from slca.cli.flags import flag


def _minutes(text: str) -> list[float]:
    return [float(t) for t in text.split(",") if t.strip()]


HELP = (
    "learning per hour against TRL: slca train and TRL's GRPOTrainer from the same warm start, on the same "
    "training tasks, reward and minutes, greedy success at checkpoints, in blocks (bench/learning/README.md)"
)

FLAGS = (
    flag("--block", type=int, help="the block's number: its arm order (even: slca first) and both arms' seed"),
    flag("--minutes", type=float, default=60.0, help="training minutes per arm, on the clock from its launch"),
    flag(
        "--checkpoints",
        type=_minutes,
        default=[30.0, 60.0],
        help="comma-separated minutes at which each arm's model is taken and judged (--minutes is always one)",
    ),
    flag("--group-size", type=int, default=8, help="completions per prompt on both sides (TRL's num_generations)"),
    flag("--model", help="warm start (default: ops.warm_model_name, the model `slca sft` writes)"),
    flag("--pack", default="everyday"),
    flag("--probe-size", type=int, default=64, help="training-probe tasks: what both arms train on"),
    flag("--eval-max-tokens", type=int, default=256),
    flag("--eval-engine", choices=["hf", "vllm"], default="vllm"),
    flag(
        "--trl-lr",
        type=float,
        default=TrlRecipe.lr,
        help=f"TRL's learning rate (default {TrlRecipe.lr:g}: GRPOConfig's documented default; see "
        "ops/bench/learn_vs_trl/arms.py). Fixed by the first block of an --out",
    ),
    flag("--keep-checkpoints", action="store_true", help="keep the checkpoints' weights after they are judged"),
    flag("--out", type=Path, default=Path("bench/learning/vs-trl")),
    flag("--report", action="store_true", help="only rewrite results.json and results.md from the finished blocks"),
)
