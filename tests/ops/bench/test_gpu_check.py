"""`python -m ops.bench.gpu_check` (ops/bench/gpu_check.py): its comparisons and verdict, and its CPU smoke run, which
exercises every part's logic where there is no GPU and imports nothing a GPU machine without Redis, Celery or vLLM
lacks beyond what its docstring lists."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ops.bench.gpu_check import Part, Target, _agreement, verdict
from slca.contracts.engine import GenerationResult
from tests.support.processes import REPO


def _result(tokens: list[int], logprobs: list[float]) -> GenerationResult:
    return GenerationResult(tokens, logprobs, "length", [0] * len(tokens))


def test_greedy_outputs_are_compared_up_to_each_prompts_first_divergence():
    ref = [_result([1, 2, 3, 4], [-1.0, -2.0, -3.0, -4.0]), _result([5, 6], [-0.5, -0.5])]
    got = [_result([1, 2, 9, 9], [-1.1, -2.0, -0.1, -0.1]), _result([5, 6], [-0.5, -0.75])]
    figures = _agreement(ref, got)
    assert figures["first_divergence"] == [2, None] and figures["identical_prompts"] == 1
    assert figures["token_agreement"] == round(4 / 6, 4)  # 2 of 4, then 2 of 2
    # |Δ logprob| only where both drew the same tokens: 0.1, 0, 0, 0.25
    assert figures["logprob_abs_diff_max"] == pytest.approx(0.25)
    assert figures["logprob_abs_diff_mean"] == pytest.approx(0.35 / 4)
    shorter = _agreement([_result([1, 2, 3], [-1.0] * 3)], [_result([1, 2], [-1.0] * 2)])
    assert shorter["first_divergence"] == [2] and shorter["token_agreement"] == round(2 / 3, 4)


def test_the_verdict_fails_on_any_failed_part_and_without_cuda_is_a_smoke_pass():
    passed, skipped, failed = Part(), Part(status="skipped"), Part()
    failed.check("loss finite", False, [float("nan")])
    assert verdict({"m": {"engine": passed, "grammar": skipped}}, Target("cuda")) == ("PASS (skipped: m/grammar)", 0)
    assert verdict({"m": {"engine": passed, "learner": failed}}, Target("cuda")) == ("FAIL — m/learner: fail", 1)
    text, code = verdict({"m": {"engine": skipped}}, Target("cpu"))
    assert text.startswith("SMOKE PASS") and code == 0


def test_the_cpu_smoke_run_checks_every_part_and_imports_no_redis_server_celery_or_vllm(tiny_model_dir, tmp_path):
    """Without CUDA every part runs on the CPU (engine against engine, swap, grammar, the learner's steps) and is
    reported as skipped, exit 0; the process never imports celery, vllm, jsonschema, aiohttp or prometheus_client
    (what a GPU machine without them could not run)."""
    code = (
        "import json, sys\n"
        "from ops.bench.gpu_check import main\n"
        "rc = main(sys.argv[1:])\n"
        "print('MODULES ' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        "sys.exit(rc)\n"
    )
    out = tmp_path / "out"
    small = ["--tokens", "8", "--batch", "2", "--batch-tokens", "6", "--waves", "1", "--steps", "2"]
    sizes = ["--prompt-tokens", "16", "--gen-tokens", "8", "--group-size", "2", "--threads", "1"]
    argv = ["--model", str(tiny_model_dir), "--out", str(out), "--device", "cpu", *small, *sizes]
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "results.json").read_text())
    assert report["verdict"].startswith("SMOKE PASS")
    assert (out / "results.md").read_text().splitlines()[0] == report["verdict"]
    parts = report["models"][tiny_model_dir.name]
    assert set(parts) == {"engine", "grammar", "swap", "learner"}
    assert {p["status"] for p in parts.values()} == {"skipped"}
    assert all(p["checks"] for p in parts.values() if p["note"] != "xgrammar is not installed")
    assert parts["engine"]["figures"]["greedy_vs_cpu_fp32"]["token_agreement"] == 1.0  # fp32 against itself
    assert parts["engine"]["figures"]["throughput"]["median_ratio"] > 0
    assert str(tmp_path) not in json.dumps(report)  # no machine paths
    modules = set(json.loads(proc.stdout.split("MODULES ", 1)[1].splitlines()[0]))
    assert not modules & {"celery", "vllm", "jsonschema", "aiohttp", "prometheus_client"}
