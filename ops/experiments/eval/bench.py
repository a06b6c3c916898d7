"""`slca bench eval`: how long the default evaluation takes — items/s per suite and in total, through one server.

Each suite runs on its own (one after the other, the same server) so that its rate is its own: tasks are
multi-turn agent runs with simulated tools, BFCL items one chat turn each. The sum slightly overstates the time of
`slca eval`, which sends every item at once and so never drains the batch between suites.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ops.experiments.eval.main import model_dir_of, plan_of
from ops.experiments.eval.suite import EvalItem, plan_items, run_items, summarize
from slca.config import Config

TARGET_S = 300.0
"""The target: both held-out splits + 400 BFCL items in ≤ 5 min (2 cores, vLLM, the 135M model)."""


def default_model(config: Config) -> str:
    """The `slca sft` warm start when there is one, else the tiny random model."""
    from ops.experiments.warmstart.model import warm_model_dir
    from slca.models.paths import is_model_dir

    warm = warm_model_dir(config)
    return str(warm) if is_model_dir(warm) else "tiny"


def by_suite(items: list[EvalItem]) -> dict[str, list[EvalItem]]:
    groups: dict[str, list[EvalItem]] = {}
    for item in items:
        groups.setdefault(item.suite, []).append(item)
    return groups


def run_bench_eval(args, config: Config) -> int:
    from ops.experiments.eval.server import eval_server

    model_dir = model_dir_of(args.model or default_model(config), config)
    plan = plan_of(args)
    groups = by_suite(plan_items(plan))
    rows: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    with eval_server(config, model_dir, args.engine, args.threads) as server:
        ready = time.monotonic() - started
        for suite, items in groups.items():
            t0 = time.monotonic()
            records = asyncio.run(run_items(server.url, server.admin_token, items, plan))
            seconds = time.monotonic() - t0
            s = summarize(records)[suite]
            rows[suite] = {
                "n": len(items),
                "seconds": round(seconds, 2),
                "items_per_s": round(len(items) / seconds, 3),
                "success": round(s["success"], 3),
                "errors": s["errors"],
            }
            print(
                f"{suite:<24}{len(items):>5} items  {seconds:7.1f} s  {len(items) / seconds:7.2f} items/s"
                f"  success {s['success']:.3f}  errors {s['errors']}",
                flush=True,
            )
    total = time.monotonic() - started
    n = sum(r["n"] for r in rows.values())
    print(
        f"{'total':<24}{n:>5} items  {total:7.1f} s (server start {ready:.1f} s; target ≤ {TARGET_S:.0f} s on the "
        f"135M model)"
    )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {
            "model": model_dir.name,
            "engine": args.engine,
            "concurrency": plan.concurrency,
            "server_start_s": round(ready, 1),
            "total_s": round(total, 1),
            "items": n,
            "suites": rows,
        }
        (args.out / "results.json").write_text(json.dumps(result, indent=1))
    return 0
