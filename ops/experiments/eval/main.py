"""`slca eval --model DIR`: the held-out splits of the task pack and BFCL, every item through one in-process
server on the model (`ops.experiments.eval.server`), per-item records + a summary with 95% intervals;
`slca eval compare A B`: two such runs, item by item."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ops.experiments.eval.suite import (
    EvalItem,
    EvalPlan,
    ItemRecord,
    plan_items,
    read_jsonl,
    run_items,
    summarize,
    write_jsonl,
)
from slca.cli import CliError
from slca.config import Config
from slca.models.paths import find_model_dir

log = logging.getLogger("slca.eval")
ITEMS_FILE = "items.jsonl"
SUMMARY_FILE = "summary.json"


@dataclass
class EvalRun:
    model: str
    """The model's directory name (never a machine path: results files travel)."""
    engine: str
    plan: EvalPlan
    records: list[ItemRecord]
    seconds: float

    def summary_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "engine": self.engine,
            "plan": asdict(self.plan),
            "seconds": round(self.seconds, 1),
            "items": len(self.records),
            "items_per_s": round(len(self.records) / max(self.seconds, 1e-9), 3),
            "summary": summarize(self.records),
        }


def model_dir_of(name: str, config: Config) -> Path:
    return find_model_dir(name, config.common.cache_dir)


def evaluate_model(
    config: Config,
    model_dir: Path,
    plan: EvalPlan,
    engine: str = "vllm",
    threads: int | None = None,
    items: list[EvalItem] | None = None,
    progress: bool = True,
) -> EvalRun:
    """The plan's items (or `items`) against an in-process server on `model_dir`, all in one concurrent run."""
    from ops.experiments.eval.server import eval_server

    items = plan_items(plan) if items is None else items
    started = time.monotonic()
    with eval_server(config, model_dir, engine, threads) as server:
        records = asyncio.run(_run(server.url, server.admin_token, items, plan, progress))
    return EvalRun(model_dir.name, engine, plan, records, time.monotonic() - started)


async def _run(url: str, token: str, items: list[EvalItem], plan: EvalPlan, progress: bool) -> list[ItemRecord]:
    from tqdm import tqdm

    with tqdm(total=len(items), desc="eval", unit="item", disable=not progress) as bar:
        return await run_items(url, token, items, plan, on_done=lambda: bar.update(1))


def write_run(run: EvalRun, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(run.records, out / ITEMS_FILE)
    (out / SUMMARY_FILE).write_text(json.dumps(run.summary_json(), indent=1))


def plan_of(args) -> EvalPlan:
    from ops.experiments.eval.bfcl import CATEGORIES

    cats = tuple(c.strip() for c in args.bfcl_categories.split(",") if c.strip())
    unknown = [c for c in cats if c not in CATEGORIES]
    if unknown:
        raise CliError(f"unknown BFCL categories {unknown}; known: {', '.join(CATEGORIES)}")
    splits = tuple(s.strip() for s in args.splits.split(",") if s.strip())
    try:
        return EvalPlan(
            splits=splits,
            pack=args.pack,
            train_probe_size=getattr(args, "train_probe_size", EvalPlan.train_probe_size),
            bfcl_categories=cats,
            bfcl_per_category=args.bfcl_per_category,
            bfcl_seed=args.bfcl_seed,
            mode=args.mode,
            max_tokens=args.max_tokens,
            max_turns=args.max_turns,
            concurrency=args.concurrency,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def run_eval(args, config: Config) -> int:
    if getattr(args, "eval_command", None) == "compare":
        return run_compare(args)
    if bool(args.model) == bool(getattr(args, "url", None)):
        raise CliError("slca eval needs --model DIR or --url URL (or: slca eval compare A B)")
    plan = plan_of(args)
    try:
        items = plan_items(plan)
    except ValueError as exc:  # an unknown split or category
        raise CliError(str(exc)) from None
    if args.url:
        run = evaluate_url(args.url, _api_key(args, config), plan, items)
    else:
        run = evaluate_model(
            config, model_dir_of(args.model, config), plan, engine=args.engine, threads=args.threads, items=items
        )
    out = args.out or Path(config.common.data_dir) / "eval" / f"{run.model}-{time.strftime('%Y%m%d-%H%M%S')}"
    write_run(run, out)
    print(format_summary(run.summary_json()))
    print(f"results: {out}")
    return 0


def evaluate_url(url: str, api_key: str | None, plan: EvalPlan, items: list[EvalItem]) -> EvalRun:
    """The plan's items against a server that is already running (e.g. `slca up`'s, whatever version it serves
    now: each record keeps the `policy_version` that answered it). Nothing is recorded (eval requests say so)."""
    started = time.monotonic()
    records = asyncio.run(_run(url.rstrip("/"), api_key, items, plan, progress=True))
    return EvalRun("served", "running server", plan, records, time.monotonic() - started)


def _api_key(args, config: Config) -> str | None:
    """--api-key, else the record key `slca up` keeps in the data dir (a probe-like client), else none."""
    if getattr(args, "api_key", None):
        return args.api_key
    key_file = Path(config.common.data_dir) / "record-key"
    return key_file.read_text().strip() if key_file.is_file() else config.common.record_key


def _pct(v: float | None) -> str:
    return "    -" if v is None else f"{v:5.3f}"


def format_summary(summary: dict[str, Any]) -> str:
    lines = [
        f"model: {summary['model']} ({summary['engine']}, {summary['plan']['mode']})   "
        f"{summary['items']} items in {summary['seconds']} s ({summary['items_per_s']} items/s)",
        f"{'suite':<24}{'n':>5}  {'success':>7}  {'95% interval':<15}  {'exec':>5}  {'pref':>5}  errors",
    ]
    for name, s in summary["summary"].items():
        lines.append(
            f"{name:<24}{s['n']:>5}  {s['success']:7.3f}  [{s['ci_low']:.3f}, {s['ci_high']:.3f}]   "
            f"{_pct(s['exec'])}  {_pct(s['pref'])}  {s['errors']}"
        )
    return "\n".join(lines)


# --- compare ------------------------------------------------------------------------------------
def load_records(path: Path) -> list[ItemRecord]:
    """An eval output directory (its items.jsonl) or an items.jsonl file."""
    file = path / ITEMS_FILE if path.is_dir() else path
    if not file.is_file():
        raise CliError(f"no eval records at {path} (expected an `slca eval` output directory or a .jsonl file)")
    return read_jsonl(file)


def run_compare(args) -> int:
    from ops.experiments.eval.stats import compare

    result = compare(load_records(args.a), load_records(args.b), seed=args.seed)
    if not result:
        raise CliError(f"{args.a} and {args.b} share no suite")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(format_compare(result, args.a.name, args.b.name))
    return 0


def format_compare(result: dict[str, dict], a: str, b: str) -> str:
    lines = [
        f"A = {a}   B = {b}   (paired on items both ran; interval: bootstrap 95% of B − A; p: exact McNemar)",
        f"{'suite':<24}{'n':>5}  {'A':>6}  {'B':>6}  {'B − A':>7}  {'95% interval':<17}  {'B only':>6}  "
        f"{'A only':>6}  {'p':>7}",
    ]
    for name, r in result.items():
        lines.append(
            f"{name:<24}{r['n']:>5}  {r['a']:6.3f}  {r['b']:6.3f}  {r['diff']:+7.3f}  "
            f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]  {r['b_only']:>6}  {r['a_only']:>6}  "
            f"{r['mcnemar_p']:7.4f}"
        )
    return "\n".join(lines)
