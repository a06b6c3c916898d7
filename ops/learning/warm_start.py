"""The comparison's one starting point: which model it is, and its evaluation (the per-item outcomes every arm is
paired with, the curves' step 0, and the measured evaluation time that sizes the budget), kept in
`<out>/warm_start.json` and `<out>/warm_start.items.jsonl`."""

from __future__ import annotations

from pathlib import Path

from ops.learning.evaluation import EvalSpec, curve_keys, flat_metrics, no_tool_keys, rate, run_eval
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


WARM_ITEMS = "warm_start.items.jsonl"


def evaluate_warm_start(config: Config, model_dir: Path, spec: EvalSpec, out: Path) -> dict:
    """`{"model", "metrics", "eval_s", "curve_eval_s", "n_items"}`, evaluated once per comparison folder (greedy: one
    model, one answer per item), its per-item records in `warm_start.items.jsonl`. Its curve point at step 0 is
    its outcomes on the curve subset (`curve0`): the same items as every later point. A curve point's time is
    estimated from the full evaluation's, pro rata (no second evaluation to measure it)."""
    from ops.eval.suite import read_jsonl, write_jsonl

    path, items_path = out / "warm_start.json", out / WARM_ITEMS
    saved = read_json(path)
    if saved is not None and items_path.is_file():
        return saved | {"records": read_jsonl(items_path)}
    records, eval_s = run_eval(config, model_dir, spec)
    write_jsonl(records, items_path)
    n = len(records)
    curve_s = eval_s * min(spec.curve_items, n) / n if n else 0.0
    record = {"model": model_dir.name, "metrics": flat_metrics(records, no_tool_keys(spec)),
              "curve0": rate(records, curve_keys(spec)), "eval_s": round(eval_s, 1), "curve_eval_s": round(curve_s, 1),
              "n_items": n}  # fmt: skip
    write_json(path, record)  # written last: its presence means the items file is complete
    return record | {"records": records}
