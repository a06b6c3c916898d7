"""The result shape `ops.learning.evaluation` reads (`{"indomain": {"summary": …}, "bfcl": {"categories": …}}`),
computed by the one evaluation path (`ops.eval.suite`), until the comparison reads `EvalRun`s itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ops.eval.suite import EvalItem, EvalPlan, ItemRecord, plan_items
from slca.config import Config


def spread(items: list[EvalItem], n: int) -> list[EvalItem]:
    """`n` items taken round-robin over the tasks' intents (the first of each intent, then the second …): a small
    subset still sees every intent, where the first n of the split saw few."""
    by_intent: dict[str, list[EvalItem]] = {}
    for item in items:
        by_intent.setdefault(item.task.intent or "", []).append(item)
    out: list[EvalItem] = []
    for rank in range(max((len(v) for v in by_intent.values()), default=0)):
        out += [v[rank] for v in by_intent.values() if rank < len(v)]
    return out[:n]


def evaluate(config: Config, model_dir: Path, categories: list[str], limit: int, pack: str, skip: set[str],
             max_tokens: int = 256, engine: str = "hf", **_: Any) -> dict[str, Any]:  # fmt: skip
    """`limit` test tasks spread over intents and a seeded sample of `limit` items per BFCL category."""
    from ops.eval.main import evaluate_model

    plan = EvalPlan(splits=() if "indomain" in skip else ("test",), pack=pack,
                    bfcl_categories=() if "bfcl" in skip else tuple(categories), bfcl_per_category=limit,
                    max_tokens=max_tokens)  # fmt: skip
    items = plan_items(plan)
    tasks = spread([i for i in items if i.task is not None], limit)
    run = evaluate_model(config, model_dir, plan, engine=engine, items=tasks + [i for i in items if i.case is not None])
    result: dict[str, Any] = {"model": run.model, "limit": limit, "max_tokens": max_tokens, "seconds": run.seconds}
    task_records = [r for r in run.records if not r.suite.startswith("bfcl:")]
    if task_records:
        result["indomain"] = {"pack": pack, "summary": _indomain(task_records)}
    bfcl = [r for r in run.records if r.suite.startswith("bfcl:")]
    if bfcl:
        cats = {c: [r.success for r in bfcl if r.suite == f"bfcl:{c}"] for c in categories}
        result["bfcl"] = {"categories": {c: {"n": len(v), "accuracy": sum(v) / len(v) if v else 0.0}
                                         for c, v in cats.items()},
                          "overall": sum(r.success for r in bfcl) / len(bfcl)}  # fmt: skip
    return result


def _indomain(records: list[ItemRecord]) -> dict[str, float]:
    n = len(records)
    return {"n": n, "success": sum(r.success for r in records) / n,
            "argument_match": sum(r.components.get("value", 0.0) for r in records) / n,
            "name_f1": sum(r.components.get("name", 0.0) for r in records) / n,
            "tool_turns": sum(len({c["turn"] for c in r.calls}) for r in records) / n}  # fmt: skip
