"""The comparison's one starting point: which model it is, and its evaluation (the baseline row, the curves'
step 0, and the measured evaluation time that sizes the budget), kept in `<out>/warm_start.json`."""

from __future__ import annotations

from pathlib import Path

from ops.learning.evaluation import EvalSpec, curve_point, full_eval
from ops.learning.files import read_json, write_json
from ops.settings import OpsSettings
from slca.cli import CliError
from slca.config import Config


def resolve_warm_start(name: str | None, config: Config) -> Path:
    """`--model`: 'embedded', 'tiny', a model's name in the cache or a directory; default: the warm-started
    model `slca sft` writes (and `slca up` serves)."""
    from slca.models.paths import models_dir, resolve_model

    cache = Path(config.common.cache_dir).expanduser()
    default = config.get(OpsSettings).warm_model_name
    wanted = name or default
    cached = models_dir(cache) / wanted
    model = cached if "/" not in wanted and (cached / "config.json").is_file() else resolve_model(wanted, cache)
    if (model / "config.json").is_file():
        return model.resolve()
    if name is None:
        raise CliError(f"no warm-started model {default!r} in the model cache ({models_dir(cache)}): make it with "
                       "`slca sft` (≈ 10 min; `slca up` also runs it first when it is missing), or choose the "
                       "starting model with --model (embedded, tiny, a cached model's name or a directory)")
    raise CliError(f"no model {name!r} (neither a model in {models_dir(cache)} nor a directory with config.json)")


def evaluate_warm_start(config: Config, model_dir: Path, spec: EvalSpec, with_curve: bool, out: Path) -> dict:
    """`{"metrics", "curve0", "eval_s", "curve_eval_s"}`, evaluated once per comparison folder."""
    path = out / "warm_start.json"
    saved = read_json(path)
    if saved is not None and (saved["curve0"] is not None or not with_curve):
        return saved
    metrics, eval_s = full_eval(config, model_dir, spec)
    curve0, curve_s = curve_point(config, model_dir, spec) if with_curve else (None, 0.0)
    record = {"model": model_dir.name, "metrics": metrics, "curve0": curve0, "eval_s": round(eval_s, 1),
              "curve_eval_s": round(curve_s, 1)}  # fmt: skip
    write_json(path, record)
    return record
