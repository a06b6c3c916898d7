"""`slca bench learning` arguments (light: no heavy import here; the handler imports `ops.learning.main`)."""

from __future__ import annotations

from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("--model", help="warm start: 'embedded', 'tiny', a cached model's name or a directory "
                   "(default: ops.warm_model_name, the model `slca sft` writes)")  # fmt: skip
    p.add_argument("--estimators", default="slca,grpo,toolpo,rltr")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated; ≥ 3 for a meaningful seed spread")
    p.add_argument("--steps", type=int, default=0,
                   help="steps (= rollout groups) per run; 0: as many as fit in --minutes (measured calibration)")
    p.add_argument("--minutes", type=float, default=110.0,
                   help="time budget for the whole comparison; a plan estimated above it is refused (0: no limit)")
    p.add_argument("--pack", default="everyday", help="task pack: train split for training, test split for eval")
    p.add_argument("--eval-limit", type=int, default=20, help="in-domain test tasks and BFCL examples per category")
    p.add_argument("--eval-max-tokens", type=int, default=256, help="generated tokens per turn in evaluation")
    p.add_argument("--curve", choices=["eval", "reward"], default="eval",
                   help="learning curve: the primary metric on a fixed in-domain subset every --curve-every steps "
                        "(eval), or the per-step training reward (reward: no extra evaluation time)")
    p.add_argument("--curve-every", type=int, default=0, help="steps between curve points (0: about 4 per run)")
    p.add_argument("--curve-limit", type=int, default=10, help="in-domain test tasks of a curve point")
    p.add_argument("--out", type=Path, default=Path("bench/learning/estimators"))
    p.add_argument("--plan-only", action="store_true", help="evaluate the warm start, calibrate, print the plan, stop")
    p.add_argument("--train-arg", action="append", default=[], help="extra argument for every `slca train`")
