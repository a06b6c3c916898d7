"""`slca bench online`'s last word: the last served version is judged, whatever the run's stop did.

The feed runs a final probe round when it stops (`ops.probe_final_timeout_s`); a run stopped without one (the
timeout 0 or spent, a feed that was SIGKILLed, `slca bench online` while the run still trains) has rounds whose
latest full one is older than the last served version. Then this module evaluates that version pinned: its
published weights (`<data_dir>/weights/v<N>/`, a complete model directory; v0 is the warm start) in an evaluation
server of its own (`ops.experiments.eval.main.evaluate_model`), on the probe's items, paired with the baseline's
per-item file. The round is written beside the others (`probe/v<N>-final.jsonl`) and returned, marked `pinned`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ops.observe.probe_rounds import HEADLINE, ProbeRound, RoundFiles, summarise_round
from slca.config import Config

log = logging.getLogger("slca.observe")

Evaluate = Callable[..., Any]
"""`ops.experiments.eval.main.evaluate_model(config, model_dir, plan, engine=, items=)` → a run with `.records`."""


def last_served_version(rewards: list[dict[str, Any]], rounds: list[ProbeRound]) -> int | None:
    """The last version the run served: the newest that sampled a scored trajectory or answered a probe item."""
    versions = [int(r["policy_version"]) for r in rewards if r.get("policy_version") is not None]
    versions += [r.version_max for r in rounds]
    return max(versions) if versions else None


def judged(rounds: list[ProbeRound], version: int) -> bool:
    """A round asked the held-out items of `version` alone."""
    return any(HEADLINE in r.suites and r.version_min == r.version_max == version for r in rounds)


def model_dir_of(config: Config, version: int) -> Path:
    """Version `version`'s weights as a model directory: the learner's published `weights/v<N>/`; v0 is the model
    `slca up` served first (the warm start when `slca sft` wrote one and no model is configured)."""
    if version > 0:
        return Path(config.common.data_dir) / "weights" / f"v{version}"
    from ops.experiments.warmstart.model import model_is_explicit, warm_model_dir
    from slca.models.paths import is_model_dir

    warm = warm_model_dir(config)
    return warm if not model_is_explicit(config) and is_model_dir(warm) else config.common.model_path()


def serve_engine(config: Config) -> str:
    try:
        engine = config.section("serve").engine
    except (ModuleNotFoundError, AttributeError):
        return "vllm"
    from serve.engines.registry import engine_names

    return engine if engine in engine_names() else "vllm"


def judge_last_version(
    config: Config, rounds: list[ProbeRound], version: int | None, evaluate: Evaluate | None = None
) -> ProbeRound | None:
    """The pinned final round on `version` when no round judged it (None when one did, or it cannot be run: no
    baseline file, or the version's weights are gone)."""
    if version is None or not rounds or judged(rounds, version):
        return None
    data_dir = Path(config.common.data_dir)
    # the baseline: the round of that kind, or (rounds published before kinds were recorded) the first
    files, base = RoundFiles(data_dir), next((r for r in rounds if r.kind == "baseline"), rounds[0])
    model_dir = model_dir_of(config, version)
    if not model_dir.is_dir():
        log.warning("the last served version v%d is not judged: its weights (%s) are not on disk", version, model_dir)
        return None
    try:
        baseline = files.read(base.version)
    except (OSError, ValueError, TypeError):
        baseline = None
    if baseline is None:
        log.warning("the last served version v%d is not judged: the baseline's per-item file is missing", version)
        return None
    return _evaluate(config, model_dir, version, baseline, base.version, evaluate)


def _evaluate(config, model_dir: Path, version: int, baseline, baseline_version: int, evaluate) -> ProbeRound:
    from ops.experiments.eval.suite import plan_items
    from ops.experiments.eval.probe_plan import probe_eval_plan
    from ops.settings import OpsSettings

    if evaluate is None:
        from ops.experiments.eval.main import evaluate_model as evaluate
    plan = probe_eval_plan(config.get(OpsSettings))
    items = plan_items(plan)
    print(f"judging the last served version v{version} pinned: {len(items)} probe items on {model_dir.name}")
    started = time.time()
    run = evaluate(config, model_dir, plan, engine=serve_engine(config), items=items)
    records = [replace(r, policy_version=version) for r in run.records]  # the pinned server reports its own v0
    result = summarise_round(records, baseline, baseline_version, started, plan.mode, version, kind="final")
    result.pinned = True
    RoundFiles(Path(config.common.data_dir)).write(result, records)
    return result
