"""The eval end to end on the tiny model: items through an in-process server (serve's agent loop for tasks, its
chat API for BFCL), scored, written one JSONL line each; `slca eval` and `slca eval compare` as commands."""

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from ops.experiments.eval.server import eval_server
from ops.experiments.eval.suite import EvalPlan, ItemRecord, plan_items, read_jsonl, run_items, summarize, write_jsonl
from slca.config import Config

REPO = Path(__file__).resolve().parents[4]


def slca(*argv, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "slca", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def items():
    plan = EvalPlan(splits=("test",), bfcl_categories=("simple_python", "irrelevance"), bfcl_per_category=1)
    everything = plan_items(plan)
    tasks = [i for i in everything if i.task is not None]
    with_tool = next(i for i in tasks if i.task.ground_truth.tool_needed and i.task.ground_truth.calls)
    no_tool = next(i for i in tasks if not i.task.ground_truth.tool_needed)
    return [with_tool, no_tool] + [i for i in everything if i.case is not None]


def test_items_run_through_one_server_and_land_in_jsonl(tiny_model_dir, tmp_path, items):
    plan = EvalPlan(max_tokens=12, max_turns=2, concurrency=4)
    config = Config(raw={"common": {"data_dir": str(tmp_path / "data")}})
    done = []
    with eval_server(config, tiny_model_dir, "hf", threads=1) as server:
        records = asyncio.run(run_items(server.url, server.admin_token, items, plan, on_done=lambda: done.append(1)))
        # greedy: the same item twice gives the same record
        again = asyncio.run(run_items(server.url, server.admin_token, items[:1], plan))
    assert len(done) == len(items) and [r.item_id for r in records] == [i.item_id for i in items]
    assert [r.suite for r in records] == ["test", "test", "bfcl:simple_python", "bfcl:irrelevance"]
    assert all(r.error is None and r.policy_version == 0 for r in records), [r.error for r in records]
    task, bfcl = records[0], records[2]
    # the random tiny model writes no call: the task that needs one fails, and the scorer's components are kept
    assert not task.success and task.calls == [] and 0.0 <= task.exec < 1.0 and task.pref is not None
    assert {"name", "value", "format"} <= set(task.components)
    assert not bfcl.success and bfcl.exec is None and bfcl.components["malformed"] == 0.0
    assert again[0] == records[0]

    write_jsonl(records, tmp_path / "items.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(lines) == len(items) and all(set(line) == {f.name for f in fields(ItemRecord)} for line in lines)
    assert read_jsonl(tmp_path / "items.jsonl") == records
    assert summarize(records)["held_out"]["n"] == 2


def test_a_refused_request_is_a_failed_record_not_an_exception(tiny_model_dir, tmp_path, items):
    config = Config(raw={"common": {"data_dir": str(tmp_path / "data")}})
    with eval_server(config, tiny_model_dir, "hf", threads=1) as server:
        records = asyncio.run(run_items(server.url, server.admin_token, items[:1], EvalPlan(max_tokens=10**6)))
    assert not records[0].success and records[0].error.startswith("HTTP 400")
    assert summarize(records)["test"]["errors"] == 1


def test_slca_eval_writes_items_and_a_summary_without_machine_paths(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    proc = slca(
        "eval",
        "--model",
        str(tiny_model_dir),
        "--splits",
        "",
        "--bfcl-categories",
        "irrelevance,multiple",
        "--bfcl-per-category",
        "2",
        "--max-tokens",
        "8",
        "--engine",
        "hf",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_jsonl(out / "items.jsonl")
    assert [r.suite for r in records] == ["bfcl:irrelevance"] * 2 + ["bfcl:multiple"] * 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == tiny_model_dir.name and summary["items"] == 4 and summary["seconds"] > 0
    assert summary["plan"]["bfcl_per_category"] == 2 and set(summary["summary"]) >= {"bfcl:multiple", "bfcl"}
    assert "ci_low" in summary["summary"]["bfcl"] and "95% interval" in proc.stdout
    assert str(tmp_path) not in (out / "summary.json").read_text() + (out / "items.jsonl").read_text()
    assert str(Path.home()) not in (out / "summary.json").read_text()


def test_slca_eval_compare_on_two_record_files(tmp_path):
    def write(name, solved):
        recs = [ItemRecord("test", f"t{i}", i in solved, 1.0 if i in solved else 0.0, 0.5) for i in range(12)]
        recs += [ItemRecord("bfcl:irrelevance", "b0", True, None, None)]
        (tmp_path / name).mkdir()
        write_jsonl(recs, tmp_path / name / "items.jsonl")

    write("a", {0, 1})
    write("b", set(range(12)) - {11})
    proc = slca("eval", "compare", "a", str(tmp_path / "b" / "items.jsonl"), "--json", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert list(result) == ["test", "bfcl:irrelevance", "held_out", "bfcl"]
    t = result["test"]
    assert t["n"] == 12 and t["b_only"] == 9 and t["a_only"] == 0 and t["mcnemar_p"] == pytest.approx(2 / 2**9)
    assert t["diff"] == pytest.approx(9 / 12) and 0 < t["ci_low"] <= t["diff"] <= t["ci_high"] <= 1
    table = slca("eval", "compare", "a", "b", cwd=tmp_path, timeout=60)
    assert table.returncode == 0 and "held_out" in table.stdout and "McNemar" in table.stdout


def test_eval_errors_are_clear(tmp_path):
    proc = slca("eval", "--model", str(tmp_path / "nope"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "no model at" in proc.stderr and "Traceback" not in proc.stderr
    proc = slca("eval", "compare", "x", "y", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "no eval records at x" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [("eval",), ("eval", "compare"), ("bench", "eval")])
def test_help_prints(argv, tmp_path):
    proc = slca(*argv, "--help", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr[-2000:]
