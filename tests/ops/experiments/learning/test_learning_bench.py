"""End-to-end smoke of `slca bench learning` on the tiny random model: arms slca and slca_decision × 2 seeds × 1
step, 4 held-out items (real `slca train` processes, real evaluation through `ops.experiments.eval.suite`, a Redis of
the test's own). It proves the pipeline and the files, not learning: a random model never calls a tool. A second
invocation of the same command redoes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.experiments.learning.files import machine_paths
from slca.cli import main


@pytest.mark.slow
def test_bench_learning_smoke_on_tiny_then_resume(tmp_path, monkeypatch, tiny_model_dir, redis_url, capsys):
    pytest.importorskip("serve.app")
    from ops.experiments.eval.suite import read_jsonl

    monkeypatch.chdir(tmp_path)  # `--out` relative to the working directory, as from the repo root
    argv = [
        "--set",
        f"common.redis_url={redis_url}",
        "--set",
        f"common.data_dir={tmp_path / 'var'}",
        "--set",
        "serve.engine=hf",
        "--set",
        "serve.torch_threads=1",
        "--set",
        "learner.train_group_size=2",
        "--set",
        "learner.train_max_tokens=8",
        "bench",
        "learning",
        "--model",
        str(tiny_model_dir),
        "--arms",
        "slca,slca_decision",
        "--seeds",
        "0",
        "--steps",
        "1",
        "--minutes",
        "0",
        "--eval-items",
        "4",
        "--eval-max-tokens",
        "8",
        "--curve-items",
        "2",
        "--out",
        "out",
    ]
    assert main(argv) == 0
    out = tmp_path / "out"
    data = json.loads((out / "results.json").read_text())
    assert list(data) == ["primary_metric", "verdict", "warm_start", "runs", "budget", "command"]
    assert sorted((r["arm"], r["estimator"], r["seed"]) for r in data["runs"]) == [
        ("slca", "slca", 0),
        ("slca_decision", "slca", 0),
    ]
    assert [r["advantage"] for r in data["runs"] if r["arm"] == "slca_decision"] == [{"decision_token": True}]
    for entry in [data["warm_start"], *data["runs"]]:
        assert 0.0 <= entry["held_out/success"] <= 1.0
    assert data["verdict"]["n_items"] == 4 and [(c["a"], c["b"]) for c in data["verdict"]["comparisons"]] == [
        ("slca", "slca_decision"),
        ("slca", "warm_start"),
        ("slca_decision", "warm_start"),
    ]
    assert all(r["diag/omission_rate"] is not None and r["diag/tool_turns"] is not None for r in data["runs"])
    assert data["budget"]["model"] == "tiny-smollm2" and data["budget"]["group_size"] == 2
    text = (out / "results.json").read_text()
    assert machine_paths(data) == [] and str(tmp_path) not in text and str(Path.home()) not in text
    assert "--model tiny-smollm2" in data["command"] and data["command"].endswith("--out out")
    md = (out / "results.md").read_text()
    assert md.startswith("# Estimator comparison: slca vs slca_decision") and "| warm start |" in md
    assert md.index("α = 0.05") < md.index("| slca vs slca_decision |") < md.index("## Primary metric")
    assert (out / "learning.png").stat().st_size > 10_000
    warm_items = read_jsonl(out / "warm_start.items.jsonl")
    assert len(warm_items) == 4 and {r.suite for r in warm_items} <= {"test", "novel"}
    curves = json.loads((out / "curves.json").read_text())
    assert all(r["curve"] and r["curve"][-1][0] == 1 for r in curves["runs"])  # a curve point at the final step
    runs = sorted((out / "runs").iterdir())
    assert [p.name for p in runs] == ["slca-s0", "slca_decision-s0"]
    for p in runs:  # weights deleted, the per-item records kept, on the warm start's items
        assert (p / "done.json").is_file() and not (p / "work").exists()
        assert [(r.suite, r.item_id) for r in read_jsonl(p / "items.jsonl")] == [
            (r.suite, r.item_id) for r in warm_items
        ]
    stamps = {p.name: (p / "done.json").stat().st_mtime_ns for p in runs}
    capsys.readouterr()

    assert main(argv) == 0  # the same command again: every run is done, only the result files are rewritten
    assert {p.name: (p / "done.json").stat().st_mtime_ns for p in runs} == stamps
    assert "runs 2/2 done (2 from before)" in capsys.readouterr().err
