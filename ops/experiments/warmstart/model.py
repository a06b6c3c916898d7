"""The warm-started model: where it is (`warm_model_dir`; `resolve_warm_start` for `slca bench learning`), whether
`slca up` must make one (`needs_warm_start`), and making it before anything else (`ensure_warm_start`).

The raw SmolLM2 never emits a tool call (docs/cpu-facts.md#embedded-model): every trajectory scores the same,
every group has zero variance and online RL has nothing to learn from. So on a machine without a warm-started
model, `slca up` runs `slca sft` for `ops.warm_start_minutes`, writing `<cache>/models/<ops.warm_model_name>`: by
default beside serving, handed over as a hot swap (ops/run/supervisor/warm_stage.py, `ops.warm_start_beside`); with
that off, first, before serving (`ensure_warm_start`: its own progress bar, with the time left), and `child_env`
then serves and trains it. Later runs find it and skip the stage. An explicitly configured model is never replaced.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from ops.settings import OpsSettings
from slca.cli import CliError
from slca.config import Config
from slca.models.paths import is_model_dir, models_dir, resolve_model

log = logging.getLogger("slca.up")


def warm_model_dir(config: Config) -> Path:
    return models_dir(Path(config.common.cache_dir)) / config.get(OpsSettings).warm_model_name


def resolve_warm_start(name: str | None, config: Config) -> Path:
    """`--model`: 'embedded', 'tiny', a model's name in the cache or a directory; default: the warm-started
    model `slca sft` writes (and `slca up` serves)."""
    cache = Path(config.common.cache_dir).expanduser()
    default = config.get(OpsSettings).warm_model_name
    wanted = name or default
    cached = models_dir(cache) / wanted
    model = cached if "/" not in wanted and is_model_dir(cached) else resolve_model(wanted, cache)
    if is_model_dir(model):
        return model.resolve()
    if name is None:
        raise CliError(
            f"no warm-started model {default!r} in the model cache ({models_dir(cache)}): make it with "
            "`slca sft` (≈ 10 min; `slca up` also runs it first when it is missing), or choose the "
            "starting model with --model (embedded, tiny, a cached model's name or a directory)"
        )
    raise CliError(f"no model {name!r} (neither a model in {models_dir(cache)} nor a directory with config.json)")


def model_is_explicit(config: Config) -> bool:
    return "model" in config.raw.get("common", {})


def needs_warm_start(config: Config) -> bool:
    ops = config.get(OpsSettings)
    if ops.warm_start_minutes <= 0 or model_is_explicit(config):
        return False
    return not is_model_dir(warm_model_dir(config))


def ensure_warm_start(config: Config, global_argv: list[str], env: dict[str, str] | None = None) -> bool:
    """Run the warm start when needed; True when a warm-started model is (now) there. A failed warm start is
    reported and the system comes up on the base model (it serves; it just cannot learn much). `env` is added to
    the child's environment (the secret overrides, kept out of its argv)."""
    if not needs_warm_start(config):
        return is_model_dir(warm_model_dir(config))
    ops = config.get(OpsSettings)
    out = warm_model_dir(config)
    print(
        f"slca up: no warm-started model yet ({out}); warm start first: `slca sft` for "
        f"{ops.warm_start_minutes:g} min (first run only; set ops.warm_start_minutes=0 to skip)",
        flush=True,
    )
    argv = [
        sys.executable,
        "-m",
        "slca",
        *global_argv,
        "sft",
        "--minutes",
        str(ops.warm_start_minutes),
        "--eval-tasks",
        str(ops.warm_start_eval_tasks),
        "--out",
        str(out),
    ]
    try:
        code = subprocess.call(argv, env={**os.environ, **(env or {})})
    except KeyboardInterrupt:
        print("slca up: warm start interrupted", flush=True)
        raise
    if code != 0:
        log.error("warm start failed (exit %s); serving the base model", code)
        return False
    return is_model_dir(out)
