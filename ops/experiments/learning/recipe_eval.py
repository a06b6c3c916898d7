"""One greedy evaluation of the recipe sweep (`slca bench recipe`), run in a process of its own.

Why a process: an in-process vLLM evaluation left the engine's threads alive in `slca bench recipe` after its
server stopped (about 30% of a core, held until the block ended), and every arm trained after it had that much
less CPU. Here the model is served in a child, `python -m ops.experiments.learning.recipe_eval REQUEST`, which
exits when the records are written: the parent holds nothing between arms.

What crosses the process boundary is JSON, never pickle: the request (`Request`: the model's directory, the
items with their tasks, the greedy plan's max tokens, the engine, the parent's `--config`/`--set`), and back the
per-item records (`ops.experiments.eval.suite.write_jsonl`, one JSON line per item, in the request's order) and
`{"seconds": …}` (the same span the in-process evaluation timed: server start, items, server stop). The child
scores with the code and settings the parent would have used (same environment, same config arguments)."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from slca.cli import CliError

RECORDS_FILE = "items.jsonl"
TIMING_FILE = "timing.json"


@dataclass(frozen=True)
class Request:
    model_dir: str
    items: list[dict]
    """Per item: {"suite": …, "task": the task's JSON (`Task.model_dump(mode="json")`)}."""
    max_tokens: int
    engine: str
    config_args: list[str]
    """The parent's `--config FILE` and `--set K=V` arguments: the child loads the same settings."""

    def to_json(self) -> dict:
        return {
            "model_dir": self.model_dir,
            "items": self.items,
            "max_tokens": self.max_tokens,
            "engine": self.engine,
            "config_args": self.config_args,
        }


def request_of(model_dir: Path, items: list, max_tokens: int, engine: str, config_args: list[str]) -> Request:
    if any(i.task is None for i in items):
        raise ValueError("the recipe sweep evaluates task items only")
    payload = [{"suite": i.suite, "task": i.task.model_dump(mode="json")} for i in items]
    return Request(str(model_dir), payload, max_tokens, engine, list(config_args))


def items_of(request: Request) -> list:
    from ops.experiments.eval.suite import EvalItem
    from slca.contracts import Task

    tasks = [(entry["suite"], Task.model_validate(entry["task"])) for entry in request.items]
    return [EvalItem(suite, task.task_id, task=task) for suite, task in tasks]


def evaluate(
    model_dir: Path, items: list, max_tokens: int, engine: str, config_args: list[str], log: Path
) -> tuple[list, float]:
    """(records in item order, seconds): `items` answered greedily by `model_dir` in a child process; its output
    goes to `log`. A failed child, or records that are not exactly `items` in order, is a `CliError`."""
    from ops.experiments.eval.suite import read_jsonl

    request = request_of(model_dir, items, max_tokens, engine, config_args)
    with tempfile.TemporaryDirectory(prefix="slca-recipe-eval-") as tmp:
        work = Path(tmp)
        (work / "request.json").write_text(json.dumps(request.to_json()))
        argv = [sys.executable, "-m", "ops.experiments.learning.recipe_eval", str(work / "request.json"), str(work)]
        with open(log, "wb") as out:
            status = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
        if status != 0 or not (work / TIMING_FILE).is_file():
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise CliError(f"evaluation of {model_dir.name} failed (status {status}):\n" + "\n".join(tail))
        records = read_jsonl(work / RECORDS_FILE)
        seconds = float(json.loads((work / TIMING_FILE).read_text())["seconds"])
    asked = [(i.suite, i.item_id) for i in items]
    if [(r.suite, r.item_id) for r in records] != asked:
        raise CliError(f"evaluation of {model_dir.name} returned other items than it was given (see {log})")
    return records, seconds


def run(request: Request, out: Path) -> None:
    """The child's work: serve the model in this process, run every item greedily, write records and timing."""
    from ops.experiments.eval.server import eval_server
    from ops.experiments.eval.suite import EvalPlan, run_items, write_jsonl
    from slca.config import load_config
    from slca.logs import setup_logging

    parsed = _config_parser().parse_args(request.config_args)
    config = load_config(parsed.config, parsed.set)
    setup_logging(config.common.log_level)
    items = items_of(request)
    plan = EvalPlan(splits=(), bfcl_categories=(), mode="greedy", max_tokens=request.max_tokens)
    t0 = time.monotonic()
    with eval_server(config, Path(request.model_dir), request.engine) as server:
        records = asyncio.run(run_items(server.url, server.admin_token, items, plan))
    seconds = time.monotonic() - t0
    write_jsonl(records, out / RECORDS_FILE)
    (out / TIMING_FILE).write_text(json.dumps({"seconds": seconds}))  # written last: the parent's sign of success


def _config_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config")
    p.add_argument("--set", action="append", default=[])
    return p


def config_args(args) -> list[str]:
    """The `slca` command's own `--config`/`--set` arguments from its parsed namespace."""
    config = getattr(args, "config", None)
    return [
        *(["--config", str(config)] if config else []),
        *[a for s in getattr(args, "set", []) for a in ("--set", s)],
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.experiments.learning.recipe_eval")
    p.add_argument("request", type=Path, help="the request (JSON, written by `evaluate`)")
    p.add_argument("out", type=Path, help="directory for items.jsonl and timing.json")
    ns = p.parse_args(argv)
    data = json.loads(ns.request.read_text())
    run(Request(**data), ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
