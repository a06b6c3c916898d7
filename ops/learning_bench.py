"""`slca bench learning`: slca vs grpo vs toolpo vs rltr from the same warm-started model, same seeds, same
step budget (each a `slca train` run); then every final model is evaluated the same way.

Outputs under `--out`: `<estimator>.jsonl` (per-step metrics from `slca train`), `learning.png` (execution
reward, preference reward and tool turns per step), `results.md` (final in-domain and BFCL scores, the starting
model as the baseline row), `results.json`.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ops.settings import OpsSettings
from slca.cli import CliError
from slca.config import Config

log = logging.getLogger("slca.bench")
SERIES = ((("exec_mean",), "execution reward"), (("pref_mean",), "preference reward"),
          (("tool_turns_mean", "tool_turns"), "tool turns"))
"""(keys of a `slca train` log line, first present wins; panel title)"""


def run_bench_learning(args, config: Config) -> int:
    estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]
    model = start_model(args.model, config)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log.info("bench learning: %s from %s, %d steps, seed %d → %s", estimators, model, args.steps, args.seed, out)
    runs: dict[str, dict[str, Any]] = {}
    for estimator in estimators:
        runs[estimator] = train(estimator, model, args, out)
    curves = {e: read_jsonl(r["log"]) for e, r in runs.items()}
    plot(curves, out / "learning.png", f"{model.name}, seed {args.seed}, {args.steps} steps")
    scores = {"start": evaluate_model(config, model, args.eval_limit)}
    for estimator, run in runs.items():
        scores[estimator] = evaluate_model(config, run["final"], args.eval_limit) if run["final"] else None
    table = results_table(scores, runs)
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"model": str(model), "steps": args.steps, "seed": args.seed,
                                                  "runs": runs, "scores": scores}, indent=1, default=str))  # fmt: skip
    print(table)
    print(f"plot: {out / 'learning.png'}\ntable: {out / 'results.md'}")
    return 0


def start_model(name: str | None, config: Config) -> Path:
    from slca.models.paths import resolve_model

    cache = Path(config.common.cache_dir).expanduser()
    warm = cache / "models" / config.get(OpsSettings).warm_model_name
    model = resolve_model(name, cache) if name else (warm if (warm / "config.json").is_file() else
                                                     resolve_model("embedded", cache))  # fmt: skip
    if not (model / "config.json").is_file():
        raise CliError(f"no model at {model}")
    return model


def train(estimator: str, model: Path, args, out: Path) -> dict[str, Any]:
    """One `slca train` run in its own process (a fresh model and server each: nothing leaks between runs)."""
    log_path = out / f"{estimator}.jsonl"
    log_path.unlink(missing_ok=True)
    run_dir = out / "runs"
    argv = [sys.executable, "-m", "slca", *(["--config", args.config] if args.config else []),
            *sum((["--set", s] for s in args.set), []), "--set", f"learner.init_model={model}",
            "--set", f"common.model={model}",  # the server that generates the rollouts serves the same model
            "--set", f"learner.run_dir={run_dir}", "train", "--estimator", estimator, "--seed", str(args.seed),
            "--steps", str(args.steps), "--log", str(log_path), *args.train_arg]  # fmt: skip
    started = time.monotonic()
    rc = subprocess.run(argv).returncode  # its own progress bar (tqdm, with ETA) goes to this terminal
    seconds = time.monotonic() - started
    if rc != 0:
        log.error("slca train --estimator %s failed with status %d", estimator, rc)
    return {"log": str(log_path), "rc": rc, "seconds": round(seconds, 1),
            "final": final_weights(run_dir / f"train-{estimator}-{args.seed}" / "weights")}  # fmt: skip


def final_weights(weights_dir: Path) -> Path | None:
    versions = [p for p in weights_dir.glob("v*") if p.name[1:].isdigit() and (p / "config.json").is_file()]
    return max(versions, key=lambda p: int(p.name[1:])) if versions else None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def evaluate_model(config: Config, model: Path, limit: int) -> dict[str, Any]:
    from ops.eval.bfcl import CATEGORIES
    from ops.eval.main import evaluate

    result = evaluate(config, model, list(CATEGORIES), limit, "everyday", set(), max_tokens=192)
    return {"indomain": result["indomain"]["summary"], "bfcl": {k: v["accuracy"] for k, v in
            result["bfcl"]["categories"].items()} | {"overall": result["bfcl"]["overall"]}}  # fmt: skip


def plot(curves: dict[str, list[dict]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(SERIES), figsize=(5 * len(SERIES), 4))
    for ax, (keys, label) in zip(axes, SERIES):
        for estimator, rows in curves.items():
            points = [(r["step"], v) for r in rows if (v := next((r[k] for k in keys if r.get(k) is not None), None))
                      is not None]  # fmt: skip
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=estimator)
        if not ax.lines:
            ax.text(0.5, 0.5, f"`slca train` logs no {keys[0]}", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def results_table(scores: dict[str, dict | None], runs: dict[str, dict]) -> str:
    from ops.eval.bfcl import CATEGORIES

    head = ["model", "in-domain success", "name F1", "arg match", "tool turns", *CATEGORIES, "BFCL overall", "train s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in scores.items():
        seconds = runs.get(name, {}).get("seconds", "")
        if s is None:
            lines.append(f"| {name} | (training failed: no weights) |" + " |" * (len(head) - 2))
            continue
        d, b = s["indomain"], s["bfcl"]
        cells = [name, f"{d['success']:.3f}", f"{d['name_f1']:.3f}", f"{d['argument_match']:.3f}",
                 f"{d['tool_turns']:.2f}", *(f"{b[c]:.3f}" for c in CATEGORIES), f"{b['overall']:.3f}", str(seconds)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
