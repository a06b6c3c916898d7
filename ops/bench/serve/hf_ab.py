"""What the hf engine's A/B scripts in bench/serve share: one engine on the warm start (or `--model`), the
everyday pack's train prompts, and sides that differ in one serve setting on that one engine, alternated by
`ops/bench/ab.py` (pair i of either side takes the prompts from i × groups on; the warm-up, the pack's last ones).
Imported by `prefix_cache` and `shared_prefill` beside it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def load_engine(model: str | None, update: dict[str, Any]):
    """(engine, serve settings, model dir): the hf engine, not started, with `update` over the configured settings."""
    from ops.experiments.warmstart.model import warm_model_dir
    from serve.engines.hf import HFEngine
    from serve.settings import ServeSettings
    from slca.config import load_config
    from slca.models.paths import find_model_dir, is_model_dir

    config = load_config(None, [])
    warm = warm_model_dir(config)
    name = model or (str(warm) if is_model_dir(warm) else config.common.model)
    model_dir = find_model_dir(name, config.common.cache_dir)
    settings = config.get(ServeSettings).model_copy(update={"engine": "hf", **update})
    return HFEngine(str(model_dir), settings), settings, model_dir


def everyday_tasks():
    from sim.tasks import load_tasks

    return load_tasks("everyday", "train", seed=0)


def alternate_setting(
    window: Callable[[Any, int], Any], a: tuple[str, Any], b: tuple[str, Any], pairs: int, groups: int, prompts: int
):
    """`window(value, first prompt)` → Measurement; `a`, `b`: (side label, the setting's value on that side)."""
    from ops.bench.ab import Side, alternate

    window_of = {"A": 0, "B": 0}

    def side(key: str, label: str, value: Any) -> Side:
        def measure():
            first = window_of[key] * groups
            window_of[key] += 1
            return window(value, first)

        return Side(label, measure, warmup=lambda: window(value, prompts - groups))

    return alternate(side("A", *a), side("B", *b), pairs=pairs, warmup=1)


def header(script: str, model_dir, settings, args, **extra) -> dict[str, Any]:
    """The results' facts every hf A/B script records: the command as typed (`script`: the module that ran, e.g.
    `python -m ops.bench.serve.prefix_cache`), model, dtype (as the engine resolves `serve.hf_dtype`), group shape."""
    import sys

    from serve.engines.hf import placement

    return {
        "command": f"{script} " + " ".join(sys.argv[1:]),
        "model": model_dir.name,
        "dtype": placement(settings).precision.dtype,
        "group_size": args.group_size,
        "groups_per_window": args.groups,
        **extra,
    }


def per_side(result, value: Callable[[dict], Any]) -> dict[str, list]:
    """`value(window detail)` for each measured window, grouped by side label."""
    sides: dict[str, list] = {w.side: [] for w in result.windows}
    for w in result.windows:
        sides[w.side].append(value(w.detail))
    return sides
