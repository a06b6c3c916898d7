"""The same evaluation for every model of a comparison (`slca eval`'s: greedy, official BFCL checker), flattened
to `{metric: value}`, and the cheap curve point (the primary metric on a fixed in-domain subset)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from slca.config import Config

PRIMARY_METRIC = "indomain/success"
PRIMARY_WHY = (
    "In-domain exact-argument success (`indomain/success`: every gold call made once with all its arguments "
    "matching, no extra call, no invalid call; no call at all on no-tool tasks) on the task pack's held-out test "
    "split. Chosen before the run because it is what the training reward aims at on the same task distribution "
    "(BFCL is out of domain and saturates or floors on a 135M model), it is all-or-nothing so partial credit "
    "cannot hide a wrong argument, and it is scored by a checker that no estimator trains against."
)


@dataclass(frozen=True)
class EvalSpec:
    pack: str
    limit: int
    """Examples per BFCL category and in-domain test tasks."""
    max_tokens: int
    curve_limit: int
    """In-domain test tasks of a curve point (the first ones of the split: fixed across models)."""


def flat_metrics(result: dict) -> dict[str, float]:
    """`ops.eval.main.evaluate`'s result as `{"indomain/success": …, "bfcl/simple_python": …, …}`."""
    out: dict[str, float] = {}
    if "indomain" in result:
        s = result["indomain"]["summary"]
        out |= {f"indomain/{k}": float(s[k]) for k in ("success", "argument_match", "name_f1", "tool_turns")}
    if "bfcl" in result:
        out |= {f"bfcl/{cat}": float(v["accuracy"]) for cat, v in result["bfcl"]["categories"].items()}
        out["bfcl/overall"] = float(result["bfcl"]["overall"])
    return out


def full_eval(config: Config, model_dir: Path, spec: EvalSpec) -> tuple[dict[str, float], float]:
    """(metrics, seconds) of the final evaluation: in-domain test split and every BFCL category of `slca eval`."""
    from ops.eval.bfcl import CATEGORIES
    from ops.eval.main import evaluate

    t0 = time.monotonic()
    result = evaluate(config, model_dir, list(CATEGORIES), spec.limit, spec.pack, set(), max_tokens=spec.max_tokens)
    return flat_metrics(result), time.monotonic() - t0


def curve_point(config: Config, model_dir: Path, spec: EvalSpec) -> tuple[float, float]:
    """(primary metric on the fixed in-domain subset, seconds)."""
    from ops.eval.main import evaluate

    t0 = time.monotonic()
    result = evaluate(config, model_dir, [], spec.curve_limit, spec.pack, {"bfcl"}, max_tokens=spec.max_tokens)
    return flat_metrics(result)[PRIMARY_METRIC], time.monotonic() - t0
