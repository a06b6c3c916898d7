"""`slca bench serve`: its arithmetic (percentiles, ratios to vLLM's server) and a smoke run on the tiny model."""

from __future__ import annotations

import json

from ops.bench.common import percentile
from ops.bench.serve.load import Sample
from ops.bench.serve.report import ratio, summarise
from slca.cli import main


def test_percentiles_are_nearest_rank():
    values = [0.5, 0.1, 0.4, 0.2, 0.3]
    assert percentile(values, 50) == 0.3 and percentile(values, 95) == 0.5 and percentile(values, 0) == 0.1
    assert percentile([], 50) is None


def test_summary_counts_failures_apart_and_ratio_is_to_vllm_server_at_the_same_clients():
    samples = [Sample(10, 1.0, 0.2), Sample(30, 2.0, 0.4), Sample(0, 0.1, None, "HTTP 503: busy")]
    row = summarise("slca-vllm-core", "agent", 16, samples, 4.0)
    assert (row.requests, row.failed, row.tokens, row.tokens_per_s, row.requests_per_s) == (3, 1, 40, 10.0, 0.5)
    assert row.first_error == "HTTP 503: busy" and row.ttft_p50_s == 0.2 and row.latency_p95_s == 2.0
    base16 = summarise("vllm-server", "chat", 16, [Sample(80, 1.0, 0.1)], 4.0)
    base1 = summarise("vllm-server", "chat", 1, [Sample(80, 1.0, 0.1)], 1.0)
    assert ratio(row, [base1, base16, row]) == 0.5 and ratio(row, [base1, row]) is None


def test_bench_serve_smoke_writes_table_and_json(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "serve"
    rc = main(["--set", f"common.model={tiny_model_dir}", "--set", "serve.torch_threads=1", "--set",
               "serve.max_model_len=512", "bench", "serve", "--targets", "slca-hf", "--hf-clients", "1,2",
               "--min-requests", "2", "--max-tokens", "4", "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    assert rc == 0, printed
    results = json.loads((out / "results.json").read_text())
    rows = [(r["target"], r["api"], r["clients"], r["requests"], r["failed"]) for r in results["rows"]]
    assert rows == [("slca-hf", "chat", 1, 2, 0), ("slca-hf", "chat", 2, 2, 0), ("slca-hf", "agent", 1, 2, 0),
                    ("slca-hf", "agent", 2, 2, 0)]  # fmt: skip
    chat = results["rows"][0]
    assert 0 < chat["tokens"] <= 8 and chat["ttft_p50_s"] is not None and chat["ratio_to_vllm_server"] is None
    assert str(tmp_path) not in (out / "results.json").read_text() + (out / "table.md").read_text()
    assert "| slca-hf | agent | 2 |" in (out / "table.md").read_text()


def test_recorded_command_leaves_out_the_output_directory():
    from ops.bench.common import bench_command

    argv = ["slca", "--set", "a=b", "bench", "serve", "--clients", "1,16", "--out", "/x/y", "--max-tokens=8"]
    assert bench_command("serve", argv) == "slca bench serve --clients 1,16 --max-tokens=8"
    assert bench_command("swap", ["slca", "bench", "swap", "--out=/x"]) == "slca bench swap"
