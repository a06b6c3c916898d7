"""Arguments of `slca eval`, `slca eval compare` and `slca bench eval` (argparse only: imported at start-up).
Defaults are `EvalPlan`'s own, so the command line and the API cannot disagree."""

from __future__ import annotations

import argparse
from pathlib import Path

from ops.experiments.eval.bfcl import CATEGORIES
from ops.experiments.eval.suite import MODES, EvalPlan
from serve.engines.registry import engine_names

_PLAN = EvalPlan()
OFFLINE_CONCURRENCY = 64
"""Requests in flight of `slca eval` / `slca bench eval` (the API's default, 16, suits a probe sharing a serving
engine): serve's default batch bound (`serve.max_batch`). Measured with `slca bench eval`, tiny model, vLLM, a
2-core machine at load 6: 64 in flight vs 16 — tasks 2.18 vs 1.24 items/s, BFCL 3.10 vs 2.34 items/s."""


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--splits",
        default=",".join(_PLAN.splits),
        help="splits of the task pack: held-out ones (every task) and train_probe (a fixed sample of train tasks)",
    )
    p.add_argument("--pack", default=_PLAN.pack, help="task pack")
    p.add_argument(
        "--train-probe-size", type=int, default=_PLAN.train_probe_size, help="tasks of the train_probe split"
    )
    p.add_argument(
        "--bfcl-categories",
        default=",".join(_PLAN.bfcl_categories),
        help=f"BFCL categories ('' for none; known: {','.join(CATEGORIES)})",
    )
    p.add_argument(
        "--bfcl-per-category",
        type=int,
        default=_PLAN.bfcl_per_category,
        help="a seeded random sample of N items per category (default: every item)",
    )
    p.add_argument("--bfcl-seed", type=int, default=_PLAN.bfcl_seed)
    p.add_argument(
        "--mode", choices=MODES, default=_PLAN.mode, help="greedy, or sampled (temperature 1, a seed per item)"
    )
    p.add_argument("--max-tokens", type=int, default=_PLAN.max_tokens, help="per model turn")
    p.add_argument("--max-turns", type=int, default=_PLAN.max_turns, help="model turns per task")
    p.add_argument("--concurrency", type=int, default=OFFLINE_CONCURRENCY, help="requests in flight")
    p.add_argument(
        "--engine",
        choices=engine_names(),
        default="vllm",
        help="a registered serve engine (vllm: the fast one; hf: fp32)",
    )
    p.add_argument("--threads", type=int, help="torch threads of the hf engine (default: as configured)")


def add_eval_arguments(ev: argparse.ArgumentParser) -> None:
    ev.add_argument("--model", help="model directory ('embedded', 'tiny' or a path)")
    ev.add_argument("--url", help="evaluate a running server instead (e.g. http://127.0.0.1:8000: what it serves now)")
    ev.add_argument("--api-key", help="with --url: bearer key (default: <data_dir>/record-key when present)")
    add_plan_arguments(ev)
    ev.add_argument("--out", type=Path, help="output directory (default: <data_dir>/eval/<model>-<time>)")
    sub = ev.add_subparsers(dest="eval_command")
    compare = sub.add_parser("compare", help="two eval runs item by item: McNemar p, bootstrap 95%% interval")
    compare.add_argument("a", type=Path, help="eval output directory or items.jsonl (A)")
    compare.add_argument("b", type=Path, help="eval output directory or items.jsonl (B)")
    compare.add_argument("--json", action="store_true", help="print JSON instead of a table")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model (default: the `slca sft` warm start if present, else 'tiny')")
    add_plan_arguments(p)
    p.set_defaults(bfcl_per_category=80)  # 400 BFCL items over the 5 categories: the target's size
    p.add_argument("--out", type=Path, help="write results.json here (a directory)")
